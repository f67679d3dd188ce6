#pragma once
// Executor: runs the agent's workloads as local processes, one process group each.
//
// The problem: a workload is a user's shell command (`torchrun ... train.py`) that forks helpers of its
// own. The agent must start it with exactly the environment and GPUs it was assigned, inside its CPU and
// memory limits, capture its output for the server to stream, learn how it ended, and on cancel stop
// every process it started, politely first (SIGTERM, so it can checkpoint) and then for certain (SIGKILL).
//
// Mechanics. Start() forks a child that becomes the leader of a new session and process group (setsid),
// joins the workload's cgroups (writing its own pid to each `cgroup.procs`, so no instruction runs outside
// the limits), resets signal dispositions and mask, changes to the working directory, points stdin at
// /dev/null and both stdout and stderr at ONE log file, `<log_dir>/<id>.log`, opened with O_APPEND (so a
// restarted workload appends, and the two streams interleave in the order they were written, as a
// terminal would show them), and execs `gpugeek-shim ... -- /bin/sh -c RUN` with the given environment
// and nothing else. The shim (shim_main.cc) forks and execs the shell in its own process group and
// cgroups, and supervises it: when the agent process dies, however (the workload's lifeline pipe, whose
// write end only the agent holds, reads EOF), or, for a workload started with a LaunchRequest::lease, when
// that lease runs out without a RenewLeases() (the agent is frozen, or cut off from its control plane),
// the shim SIGTERMs the workload's whole tree, SIGKILLs it after min(LaunchRequest::orphan_grace,
// ExecutorOptions::orphan_grace), and exits; when the shell ends, the shim exits the same way. Start()
// returns once the shell's exec has happened (or reports why it could not: the status pipe carries the
// failing step and errno back), so a Cancel() right after Start() always reaches the whole group.
//
// Poll() reaps without blocking (waitid WNOHANG) and returns the workloads that ended since the last call.
// When a group's leader (the shim) has exited, processes left behind in its group and cgroup are SIGKILLed
// before the leader is reaped (its pid, and so the group id, cannot be reused until then), and the cgroups
// are removed. The exit reported is the shell's, exactly (code, signal, core dump), as the shim recorded
// it on the status pipe; the shim's own status when there is no record (the group was SIGKILLed).
// Cancel() sends SIGTERM to the group (the shim notes it, and sends none of its own later; the shell and
// its children get it once) and sets a deadline of now + grace on the injected Clock's monotonic time (a
// wall-clock step neither brings it forward nor delays it); the first Poll() at or after the deadline
// SIGKILLs the group (and its cgroup). The agent calls Poll() periodically (every 100 ms or so); nothing
// happens between calls.
//
// Thread-safety: all methods may be called from any thread; one mutex serializes them. Start() holds it
// across fork+exec (a few milliseconds).
//
// Process-wide requirements: the executor reaps its children itself, so the agent must not set SIGCHLD to
// SIG_IGN nor call wait()/waitpid(-1) anywhere (a workload reaped elsewhere is reported with an unknown
// status). Several Executors may coexist in one process.

#include <sys/types.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/cgroup.h"
#include "common/clock.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::agent {

// A process environment: variable name -> value.
using EnvMap = std::map<std::string, std::string>;

// What the agent knows about one workload's place in its job; input to BuildWorkloadEnv.
struct WorkloadSpec {
  std::string job_id;
  int node_rank = 0;             // 0 .. num_nodes-1
  int num_nodes = 1;             // nodes in the gang
  std::vector<int> gpu_indices;  // physical device indices on this node (driver order), may be empty
  hw::Vendor vendor = hw::Vendor::kNvidia;
  std::string master_addr;     // host of rank 0 (gangs); empty: "127.0.0.1"
  int master_port = 0;         // rendezvous port on master_addr; 0: 29500 (torchrun's default)
  std::string checkpoint_dir;  // empty: not set
  int restart_count = 0;       // how many times this job was restarted before this run
  int tp = 0, pp = 0, dp = 0;  // the planner's layout; 0 = none
  int zero_stage = 0;          // the plan's ZeRO stage, with the layout
  int64_t micro_batch = 0;     // the plan's micro-batch; 0 = none
};

// The variables gpugeek gives a workload (merge them over the base environment the caller chooses):
//   GPUGEEK_JOB_ID, GPUGEEK_NODE_RANK, GPUGEEK_NUM_NODES, GPUGEEK_GPUS_PER_NODE (= gpu_indices.size()),
//   GPUGEEK_WORLD_SIZE (= num_nodes * max(1, gpus_per_node): one process per GPU, or one per node for a
//   CPU-only job), GPUGEEK_MASTER_ADDR, GPUGEEK_MASTER_PORT, GPUGEEK_RESTART_COUNT, and
//   GPUGEEK_CHECKPOINT_DIR when checkpoint_dir is set, GPUGEEK_TP / GPUGEEK_PP / GPUGEEK_DP and
//   GPUGEEK_ZERO_STAGE when the job was sized by the planner (its layout on the placed GPU model), and
//   GPUGEEK_MICRO_BATCH (the plan's sequences per GPU per pass);
// and the devices:
//   NVIDIA (and kUndisclosed): CUDA_VISIBLE_DEVICES = the indices ("0,3"), CUDA_DEVICE_ORDER = PCI_BUS_ID
//     (so CUDA numbers devices as NVML and nvidia-smi do; CUDA's default puts the fastest first).
//   AMD: ROCR_VISIBLE_DEVICES = the indices (the ROCm runtime's filter, recommended on Linux) and
//     HIP_VISIBLE_DEVICES = 0..n-1: HIP numbers the devices ROCR left visible, so repeating the physical
//     indices there would hide them (ROCR_VISIBLE_DEVICES=2,3 HIP_VISIBLE_DEVICES=2,3 shows no GPU).
//   No GPUs: CUDA_VISIBLE_DEVICES="" and HIP_VISIBLE_DEVICES="", which hide every GPU from a CPU-only
//     workload whatever the vendor.
EnvMap BuildWorkloadEnv(const WorkloadSpec& spec);

// One workload to start.
struct LaunchRequest {
  std::string id;       // unique among running workloads; see ValidateWorkloadId (cgroup.h)
  std::string command;  // run as `/bin/sh -c command`; must not be empty
  // Must exist and be a directory. When the executor switches users (see RunAsOptions), Start() makes it
  // the workload's own: owner uid:gid of the tenant, mode 0700, so other tenants cannot even list it; the
  // directory itself only, not what it holds. The process starts in it (chdir happens before the switch,
  // so it works even below a directory the workload's user cannot traverse; then only relative paths and
  // `cd $HOME` by absolute path do not).
  std::string working_dir;
  // The complete environment (nothing is inherited from the agent). When the executor switches users,
  // HOME is replaced by working_dir.
  EnvMap env;
  // Whose workload this is: a tenant name ([a-z0-9-], 1-63 characters, a DNS label) or "" for the
  // default tenant. Picks the user the workload runs as (Executor::IdentityFor).
  std::string tenant;
  ResourceLimits limits;  // enforced through the executor's CgroupManager; zero fields: no limit
  // SIGTERM -> SIGKILL grace when the agent dies or the lease runs out while the workload runs (the
  // member's grace), capped at ExecutorOptions::orphan_grace; nullopt: the cap. Unused without the shim.
  std::optional<Duration> orphan_grace;
  // The shim's lease: unless RenewLeases() extends it, the shim stops the workload (as when the agent dies)
  // once this long has passed since the shim started. Counted by the shim on CLOCK_BOOTTIME, so it runs on
  // while the agent process is frozen and while the machine is suspended. Rounded up to whole
  // milliseconds; 1 ms .. 24 h. nullopt: no lease, only the agent's death stops the workload (uses
  // without a control plane). Unused without the shim.
  std::optional<Duration> lease;
  // Start the command as the agent's own user even when the executor switches users (RunAsOptions); the
  // working directory is still made the tenant's, and HOME is left as `env` has it. For a container
  // member (container_command.h): rootful podman must run as root, and the container's processes run as
  // the tenant's uid (`podman run --user`, from IdentityFor).
  bool as_agent = false;
};

// How a workload ended.
struct WorkloadExit {
  std::string id;
  pid_t pid = 0;                 // the leader's (the shim's) pid, also the process group id, while it ran
  std::optional<int> exit_code;  // 0-255 when the shell exited
  int term_signal = 0;           // the signal that killed the shell (or the shim), 0 when it exited
  bool core_dumped = false;
  bool cancelled = false;           // Cancel() was called
  bool killed_after_grace = false;  // Cancel()'s grace ran out and the group was SIGKILLed
  uint64_t oom_kills = 0;           // OOM kills in its memory cgroup (the memory limit was hit)
  TimePoint started;                // Clock time Start() ran the process
  TimePoint finished;               // Clock time Poll() reaped it
  // 0 for a clean exit, false otherwise.
  bool succeeded() const { return exit_code.has_value() && *exit_code == 0; }
  // "exited with code 3", "killed by signal 9 (SIGKILL) after the cancel grace period",
  // "killed by signal 9 (SIGKILL): out of memory (cgroup limit)", ...
  std::string Describe() const;
};

// Who workloads run as. The rule: a workload never runs as root unless an operator says so.
//   - The agent runs as root (the usual deployment): each tenant gets its own unprivileged uid, with a
//     group of the same number, from [first_uid, first_uid + count); the supplementary groups are exactly
//     device_gids (everything the agent had is cleared with setgroups). Two tenants never share a uid on a
//     node, so one tenant's job cannot read, signal or ptrace another's.
//   - allow_root_workloads (off by default): an operator's opt-out; workloads run as root, as the agent.
//   - The agent is not root: it cannot switch users, so every workload runs as the agent's own uid and
//     gid (no isolation between tenants on that node; an operator who wants it runs the agent as root).
// In every case the workload starts with no_new_privs set (PR_SET_NO_NEW_PRIVS): a setuid program (sudo,
// su) or file capabilities can no longer raise its privileges.
//
// The tenant -> uid mapping: uid = first_uid + (FNV-1a-64(tenant) mod count), or, when that uid is taken
// (by another tenant, or by an account or group the host's passwd/group databases know, which a workload
// must never act as), the next free one, wrapping. Hashing first means the same tenant gets the same uid
// on every node of a pool unless a collision happened there, so files a job writes to a filesystem
// shared between nodes (checkpoints) keep one owner; recording each allocation in map_path (fsync'd
// before the first workload of that tenant runs) keeps it on this node across agent restarts even after
// a collision, so a later tenant never inherits a uid that still owns an earlier tenant's files. Nodes
// that saw colliding tenants in different orders may disagree; a pool that needs uids equal everywhere
// (NFS) should have the control plane allocate them. The default range (200000-265535) lies above
// systemd's (< 65536 and its dynamic users) and below its container ranges (524288 and up); check that it
// does not overlap /etc/subuid ranges of rootless containers on the host.
//
// GPU device files: /dev/nvidia* are created 0666 by the NVIDIA driver (NVreg_DeviceFileMode), so they
// stay usable after the switch. AMD's /dev/kfd and /dev/dri/renderD* are usually 0660, group `render`
// (or `video`): device_gids' default finds those groups, so the workload keeps them. Either way every GPU
// of the node is reachable by every workload: CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES choose, they do
// not enforce (that would take the cgroup device controller).
struct RunAsOptions {
  uid_t first_uid = 200000;  // must be > 0
  uint32_t count = 65536;    // >= 1; first_uid + count - 1 must fit below 2^32 - 1 (which means "no uid")
  // The file recording tenant -> uid ("<uid> <tenant>" lines, "-" for the default tenant), created (0600,
  // with its directories) on the first allocation. Empty: kept in memory, so a restarted agent may give a
  // tenant another uid (fine for tests, wrong for a node whose disks keep files).
  std::string map_path;
  // Supplementary groups of every switched workload. nullopt: the groups owning GPU device files that
  // others may not open (/dev/kfd, /dev/dri/renderD*, /dev/nvidia*: group rw, not world rw, group not 0).
  std::optional<std::vector<gid_t>> device_gids;
  // Run workloads as root when the agent is root. Off: they run as their tenant's uid.
  bool allow_root_workloads = false;
};

// The user a workload runs as.
struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups when switched
  bool switched = false;      // false: the workload runs as the agent itself (not root, or opted out)
};

struct ExecutorOptions {
  std::string log_dir;                                // created if missing
  Duration default_grace = std::chrono::seconds(30);  // SIGTERM -> SIGKILL, when Cancel names none
  const Clock* clock = &RealClock();                  // borrowed; must outlive the Executor
  // Borrowed; must outlive the Executor. Null: no cgroups, and a request with limits is refused.
  const CgroupManager* cgroups = nullptr;
  std::string shell = "/bin/sh";  // run as `<shell> -c <command>`
  // Written to each workload's /proc/<pid>/oom_score_adj before it runs, range -1000..1000. Positive, a
  // node-wide OOM kills a workload before the agent; and a workload of an agent started with
  // OOMScoreAdjust=-1000 (inherited across fork) stays killable, so its own cgroup's OOM killer can end
  // it instead of leaving it stuck at its memory limit. Kubernetes gives Burstable pods 2..999 the same
  // way (kubelet, pkg/kubelet/qos/policy.go). Lowering it below the agent's own value needs
  // CAP_SYS_RESOURCE; without it the workload keeps the agent's value.
  int oom_score_adj = 500;
  // The workload supervisor (see the top of this file). Empty: `gpugeek-shim` next to the running binary
  // (/proc/self/exe), else the one this build made (GPUGEEK_SHIM_BUILD_PATH, for tests in the build tree).
  std::string shim_path;
  // false: exec the shell directly, without the shim. Then a workload outlives an agent killed with
  // SIGKILL (only cgroups, when present, let a restarted agent reap it).
  bool use_shim = true;
  // The most a workload gets between SIGTERM and SIGKILL once its agent died: the control plane soon
  // hands its GPUs to others, so a dead agent's workloads must let go within seconds.
  Duration orphan_grace = std::chrono::seconds(2);
  // Who workloads run as (see RunAsOptions): by default, a root agent runs each tenant's workloads as
  // that tenant's unprivileged uid.
  RunAsOptions run_as;
};

class Executor {
 public:
  // Errors: InvalidArgument for an empty log_dir, a null clock, a shell that is not an absolute path, a
  // negative default_grace or orphan_grace, an oom_score_adj outside -1000..1000, or a run_as range that
  // includes uid 0 or is empty or overflows;
  // FailedPrecondition when the shell, or (use_shim) the shim, is not an executable file: the message
  // names the paths looked at; or when run_as.map_path records a uid outside the range;
  // DataLoss when run_as.map_path cannot be parsed (the message names file and line);
  // Internal when log_dir cannot be created or map_path cannot be read.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(ExecutorOptions options);

  // SIGKILLs every workload still running (no grace: a graceful shutdown Cancel()s them and Poll()s until
  // running_count() is 0 first), reaps them and removes their cgroups.
  ~Executor();

  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts a workload; returns the pid of its leader, the shim (also the process group id of the shim, the
  // shell and its children; without the shim, the shell's), once the shell is exec'd.
  // Runs as IdentityFor(request.tenant): the child joins the cgroups, changes to working_dir and opens
  // the log as the agent; then, right before exec'ing the command, the shim (or, without it, the child)
  // clears the supplementary groups, sets the gid, then the uid (real, effective and saved), checks that
  // none of them is left at the old value and that uid 0 cannot be taken back, and sets no_new_privs.
  // The shim itself stays the agent's user, so the workload can neither signal nor ptrace its supervisor,
  // and it is exec'd with an empty environment (request.env reaches only the command, through a memfd),
  // so nothing in env (LD_PRELOAD, ...) runs inside a root process.
  // Errors: InvalidArgument (bad id, empty command, an environment name that is empty or has '=', a value
  // with a NUL, a lease outside 1 ms .. 24 h, a bad tenant name); AlreadyExists (that id is running);
  // NotFound (working_dir missing); FailedPrecondition (working_dir not a directory or a symlink to one
  // when switching users, limits without cgroups); ResourceExhausted / Internal (as IdentityFor); Internal
  // (switching users failed in the child: the message names the uid and errno); Unavailable (a
  // leftover cgroup of that id, e.g. from an agent killed with SIGKILL, still held processes 2 s after they
  // were SIGKILLed: see CgroupManager::CreateGroup, which otherwise ends them and reuses the name, blocking
  // for that while); Internal (log file, cgroup, pipes, fork or exec of the shim or the shell failed, with
  // the step and errno text). On error nothing keeps running and no cgroup is left.
  absl::StatusOr<pid_t> Start(const LaunchRequest& request);

  // Sends SIGTERM to the workload's process group and arms a SIGKILL for `grace` (default: the options')
  // later, which Poll() delivers. A grace of zero SIGKILLs now. Cancelling a workload already cancelled
  // keeps the earlier deadline unless the new one is sooner. Errors: NotFound (no running workload `id`).
  absl::Status Cancel(const std::string& id, std::optional<Duration> grace = std::nullopt);

  // Reaps finished workloads without blocking, delivers due SIGKILLs, retries cgroup removals that found
  // the group busy, and returns the workloads that ended since the last call (each exactly once).
  std::vector<WorkloadExit> Poll();

  // Renews the lease of every running workload started with one: its shim now lets it run until `left`
  // from now (CLOCK_BOOTTIME, read here), or until a later deadline it already had (a renewal never
  // shortens a lease). Writes one LeaseRenewal (shim_protocol.h) to each lifeline, non-blocking: a full
  // pipe (a shim that has not read its last 8192 renewals, e.g. stopped) is skipped, and the call never
  // blocks. Nothing happens for `left` <= 0. Returns how many workloads were renewed. A workload whose
  // lease already ran out is not revived: its shim is stopping it for good.
  size_t RenewLeases(Duration left);

  // The user a workload of `tenant` ("" = the default tenant) runs as; allocates (and records, see
  // RunAsOptions) a uid for a tenant seen for the first time. Not switched (the agent's own uid and gid)
  // when the agent is not root or run_as.allow_root_workloads. Errors: InvalidArgument (a tenant name
  // that is not "" or a DNS label); ResourceExhausted (every uid of the range is taken); Internal (the
  // map file could not be written: nothing was allocated).
  absl::StatusOr<Identity> IdentityFor(const std::string& tenant);

  // Whether `id` has been started and not yet returned by Poll().
  bool IsRunning(const std::string& id) const;
  size_t running_count() const;

  // `<log_dir>/<id>.log`: the workload's combined stdout and stderr. The file exists once Start() began.
  std::string LogPath(const std::string& id) const;

  // "cgroup v2", "cgroup v1" or "none: ..." (the CgroupManager's description, or "none: no cgroup
  // manager configured").
  std::string CgroupDescription() const;

 private:
  struct Workload {
    std::string id;
    pid_t pid = 0;
    CgroupGroup cgroup;
    TimePoint started;  // wall clock, shown to users
    bool cancelled = false;
    std::optional<MonoTime> kill_deadline;
    bool killed_after_grace = false;
    int status_fd = -1;  // read end of the shim's status pipe (non-blocking); -1 without the shim
    // The lifeline (close-on-exec; -1 without the shim): the shim holds the only other copy of the read
    // end; this process holds the write end (non-blocking) and its own read end, kept open so a renewal
    // written after the shim exited fails with EAGAIN at worst, never with EPIPE and its SIGPIPE.
    int lifeline_read = -1;
    int lifeline_write = -1;
    bool leased = false;  // started with a LaunchRequest::lease
  };

  explicit Executor(ExecutorOptions options)
      : options_(std::move(options)), switch_users_(::geteuid() == 0 && !options_.run_as.allow_root_workloads) {}

  absl::StatusOr<Identity> IdentityForLocked(const std::string& tenant);
  // Loads options_.run_as.map_path into tenant_uids_. Called by Create only.
  absl::Status LoadUidMap();

  // Signals the group (and, for SIGKILL, every process in the cgroup). Requires mu_.
  void SignalGroupLocked(const Workload& w, int sig);
  // Reaps `w` if it has exited; fills `exit` and returns true then. Requires mu_.
  bool TryReapLocked(Workload& w, WorkloadExit& exit);
  // Closes `w`'s status pipe and lifeline. Requires mu_.
  static void CloseFds(Workload& w);
  void RemoveCgroupLocked(const CgroupGroup& group);

  // Constant after construction.
  const ExecutorOptions options_;  // shim_path resolved, run_as.device_gids filled in
  const bool switch_users_;        // the agent is root and root workloads are not allowed

  mutable std::mutex mu_;
  std::map<std::string, Workload> running_;    // guarded by mu_
  std::vector<CgroupGroup> pending_removals_;  // guarded by mu_: groups that were busy when removed
  std::map<std::string, uid_t> tenant_uids_;   // guarded by mu_: as recorded in run_as.map_path
};

}  // namespace gpugeek::agent
