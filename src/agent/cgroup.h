#pragma once
// CgroupManager: CPU and memory limits for the agent's workloads through Linux control groups.
//
// The problem: a node runs several tenants' workloads side by side, and one of them must not starve the
// others of memory or CPU. Linux enforces such limits through cgroups, but hosts differ: a modern host
// mounts the unified (v2) hierarchy with the `memory` and `cpu` controllers; an older or hybrid one (the
// machines this project runs on) mounts v2 without those controllers and offers them only through the
// legacy v1 hierarchies `/sys/fs/cgroup/memory` and `/sys/fs/cgroup/cpu`; a container may offer neither.
// The manager detects what the host offers once, at construction, and says which mode it uses ("cgroup
// v2", "cgroup v1", or "none: <why>") so the agent can report it.
//
// Layout: each workload gets a group `<parent>/<id>` (default parent "gpugeek") in every hierarchy used
// (one for v2; `memory` and `cpu` for v1). Limits written:
//   v2: memory.max = bytes, memory.swap.max = 0 (when present), cpu.max = "<quota_us> <period_us>";
//   v1: memory.limit_in_bytes = bytes, memory.memsw.limit_in_bytes = bytes (when swap accounting is on),
//       cpu.cfs_period_us = period, cpu.cfs_quota_us = quota.
// quota_us = cpu_millis * period_us / 1000, at least 1000 us (the kernel's minimum quota). Swap is held at
// zero so that a workload over its memory limit is OOM-killed instead of paging the node to a crawl (as
// Kubernetes does by default).
//
// A process joins a group by writing its pid to the group's `cgroup.procs`. `CgroupGroup::procs_files`
// lists those files so that the executor's child can write its own pid into each before it execs, and so
// the workload never runs a single instruction outside its limits.
//
// Leftovers. An agent killed with SIGKILL (or a crashed host daemon) leaves its workloads running in their
// groups, unsupervised and holding the GPUs the scheduler hands to others. A restarted agent has no record
// of them, and the server re-assigns whatever should run (desired state), so the new agent ends them:
// ReapOrphans() SIGKILLs every process in every group under the parent and removes the groups (kubelet
// does the same with containers it does not know). CreateGroup() does the same to a group already present
// with the id it is asked for. Both wait, bounded, for killed processes to leave.
//
// Thread-safety: a CgroupManager is immutable after Create; all methods are safe to call concurrently
// (they touch only the files of the group they are given).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpugeek::agent {

// Limits for one workload. Zero means "no limit" for that resource.
struct ResourceLimits {
  uint64_t cpu_millis = 0;    // milli-CPU: 1000 = one CPU's worth of time per period
  uint64_t memory_bytes = 0;  // bytes of RAM (swap is held at zero where the host lets us)
};

enum class CgroupMode { kNone, kV1, kV2 };

struct CgroupOptions {
  // Where the cgroup file systems are mounted. Tests point this at a temporary tree.
  std::string root = "/sys/fs/cgroup";
  // The group, relative to each hierarchy's root, under which workload groups are created. May contain
  // '/' for nesting; must not contain "..".
  std::string parent = "gpugeek";
  // CFS bandwidth period; the quota is cpu_millis / 1000 of it. 100 ms is the kernel's default.
  Duration cpu_period = std::chrono::milliseconds(100);
};

// One workload's groups. Value type; the manager does not keep track of it after CreateGroup.
struct CgroupGroup {
  std::string id;
  std::vector<std::string> dirs;         // absolute group directories, one per hierarchy
  std::vector<std::string> procs_files;  // `<dir>/cgroup.procs` for each dir
};

// A group ReapOrphans() found under the parent.
struct ReapedGroup {
  std::string id;                 // its name (a workload id, for groups this manager created)
  std::vector<std::string> dirs;  // its directories, one per hierarchy it existed in
  int killed = 0;                 // processes SIGKILLed in it (and in groups nested in it)
  absl::Status status;            // OK: removed; Unavailable: processes outlived the timeout; Internal
};

class CgroupManager {
 public:
  // Detects the cgroup mode under options.root and prepares the parent group(s) (creating them and, for
  // v2, enabling the memory and cpu controllers for their children).
  // Never fails for lack of cgroup support: the manager then has mode kNone and reason() says why
  // (e.g. "none: /sys/fs/cgroup/unified lacks the memory, cpu controllers and no v1 memory hierarchy
  // at /sys/fs/cgroup/memory"). Returns InvalidArgument for a malformed `parent` or a non-positive
  // `cpu_period`.
  static absl::StatusOr<std::unique_ptr<CgroupManager>> Create(const CgroupOptions& options);

  CgroupMode mode() const { return mode_; }
  // "cgroup v2", "cgroup v1", or "none: <why>".
  std::string Describe() const;

  // Creates `<parent>/<id>` in each hierarchy and writes `limits` (a zero field writes no limit for that
  // resource). `id` must be 1-128 characters of [A-Za-z0-9._-] and not start with '.'.
  // A group already present with that id is a leftover (the executor never asks for the id of a workload
  // it runs: a previous agent's workload, or an earlier run of the id whose killed processes were slow to
  // leave): every process in it is SIGKILLed, and once they left (at most `leftover_timeout`) it is
  // removed and created afresh, so the new workload starts instead of failing.
  // Errors: InvalidArgument for a bad id; FailedPrecondition when the mode is kNone and a limit is asked
  // for; Unavailable when a leftover group's processes outlived `leftover_timeout` (stuck in the kernel:
  // try again later); Internal with the path and errno text when a directory or file cannot be written
  // (the group is then removed again). With mode kNone and no limits, returns an empty group (no dirs)
  // that the other methods accept.
  absl::StatusOr<CgroupGroup> CreateGroup(const std::string& id, const ResourceLimits& limits,
                                          Duration leftover_timeout = std::chrono::seconds(2)) const;

  // Ends what an earlier user of this parent left behind, e.g. an agent of the same node killed with
  // SIGKILL: for every group under the parent (`<parent>/*`, in each hierarchy), SIGKILLs every process
  // in it and in groups nested in it, waits until they left (all groups together at most `timeout`) and
  // removes the groups. Call before creating any group: it would end those too. Returns one entry per
  // group found (none when the parent is empty or the mode is kNone); the parent itself stays.
  std::vector<ReapedGroup> ReapOrphans(Duration timeout = std::chrono::seconds(5)) const;

  // Removes the parent's last level (`<root>/<parent>` in each hierarchy; levels above it may be shared
  // with other agents and stay). OK when gone; FailedPrecondition when it still holds groups (workloads
  // not yet removed); Internal for other errors. OK without effect in mode kNone.
  absl::Status RemoveParent() const;

  // Pids in the group (the union of every hierarchy's cgroup.procs). Empty for an empty or removed group.
  std::vector<pid_t> Pids(const CgroupGroup& group) const;

  // Sends SIGKILL to every process in the group, including ones that left the workload's process group
  // (setsid daemons). Returns how many processes were signalled.
  int KillAll(const CgroupGroup& group) const;

  // How many times the kernel's OOM killer acted in the group because of its memory limit (v2
  // memory.events `oom_kill`, v1 memory.oom_control `oom_kill`); 0 when unknown.
  uint64_t OomKills(const CgroupGroup& group) const;

  // Removes the group's directories. Returns OK when they are gone (or never existed); Unavailable when a
  // directory still holds processes (EBUSY: killed processes take a moment to leave; call again later);
  // Internal for other errors.
  absl::Status Remove(const CgroupGroup& group) const;

 private:
  struct Hierarchy {
    std::string mount;   // e.g. /sys/fs/cgroup/memory or /sys/fs/cgroup/unified
    std::string parent;  // mount + "/" + options.parent
  };
  CgroupManager(CgroupMode mode, std::string reason, std::vector<Hierarchy> hierarchies, CgroupOptions options)
      : mode_(mode), reason_(std::move(reason)), hierarchies_(std::move(hierarchies)), options_(std::move(options)) {}

  absl::Status WriteLimits(const CgroupGroup& group, const ResourceLimits& limits) const;
  // SIGKILLs every process in `dirs` and in groups nested in them, waits (until `deadline`, steady clock)
  // for them to leave and removes the groups, innermost first. Adds the processes signalled to `killed`.
  // OK when removed; Unavailable when processes outlived the deadline; Internal for other errors.
  absl::Status KillAndRemove(const std::vector<std::string>& dirs, std::chrono::steady_clock::time_point deadline,
                             int& killed) const;

  // Constant after construction.
  const CgroupMode mode_;
  const std::string reason_;  // for kNone: why
  // v2: one (the unified mount); v1: memory then cpu.
  const std::vector<Hierarchy> hierarchies_;
  const CgroupOptions options_;
};

// Checks a workload id (also a file and directory name): 1-128 characters of [A-Za-z0-9._-], not
// starting with '.'. Returns InvalidArgument naming the problem.
absl::Status ValidateWorkloadId(const std::string& id);

}  // namespace gpugeek::agent
