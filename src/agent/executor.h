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
};

// The variables gpugeek gives a workload (merge them over the base environment the caller chooses):
//   GPUGEEK_JOB_ID, GPUGEEK_NODE_RANK, GPUGEEK_NUM_NODES, GPUGEEK_GPUS_PER_NODE (= gpu_indices.size()),
//   GPUGEEK_WORLD_SIZE (= num_nodes * max(1, gpus_per_node): one process per GPU, or one per node for a
//   CPU-only job), GPUGEEK_MASTER_ADDR, GPUGEEK_MASTER_PORT, GPUGEEK_RESTART_COUNT, and
//   GPUGEEK_CHECKPOINT_DIR when checkpoint_dir is set;
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
  std::string id;           // unique among running workloads; see ValidateWorkloadId (cgroup.h)
  std::string command;      // run as `/bin/sh -c command`; must not be empty
  std::string working_dir;  // must exist and be a directory
  EnvMap env;               // the complete environment (nothing is inherited from the agent)
  ResourceLimits limits;    // enforced through the executor's CgroupManager; zero fields: no limit
  // SIGTERM -> SIGKILL grace when the agent dies or the lease runs out while the workload runs (the
  // member's grace), capped at ExecutorOptions::orphan_grace; nullopt: the cap. Unused without the shim.
  std::optional<Duration> orphan_grace;
  // The shim's lease: unless RenewLeases() extends it, the shim stops the workload (as when the agent dies)
  // once this long has passed since the shim started. Counted by the shim on CLOCK_BOOTTIME, so it runs on
  // while the agent process is frozen and while the machine is suspended. Rounded up to whole
  // milliseconds; 1 ms .. 24 h. nullopt: no lease, only the agent's death stops the workload (uses
  // without a control plane). Unused without the shim.
  std::optional<Duration> lease;
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
};

class Executor {
 public:
  // Errors: InvalidArgument for an empty log_dir, a null clock, a shell that is not an absolute path, a
  // negative default_grace or orphan_grace, or an oom_score_adj outside -1000..1000;
  // FailedPrecondition when the shell, or (use_shim) the shim, is not an executable file: the message
  // names the paths looked at;
  // Internal when log_dir cannot be created.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(ExecutorOptions options);

  // SIGKILLs every workload still running (no grace: a graceful shutdown Cancel()s them and Poll()s until
  // running_count() is 0 first), reaps them and removes their cgroups.
  ~Executor();

  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts a workload; returns the pid of its leader, the shim (also the process group id of the shim, the
  // shell and its children; without the shim, the shell's), once the shell is exec'd.
  // Errors: InvalidArgument (bad id, empty command, an environment name that is empty or has '=', a value
  // with a NUL, a lease outside 1 ms .. 24 h); AlreadyExists (that id is running); NotFound (working_dir
  // missing); FailedPrecondition (working_dir not a directory, limits without cgroups); Unavailable (a
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

  explicit Executor(ExecutorOptions options) : options_(std::move(options)) {}

  // Signals the group (and, for SIGKILL, every process in the cgroup). Requires mu_.
  void SignalGroupLocked(const Workload& w, int sig);
  // Reaps `w` if it has exited; fills `exit` and returns true then. Requires mu_.
  bool TryReapLocked(Workload& w, WorkloadExit& exit);
  // Closes `w`'s status pipe and lifeline. Requires mu_.
  static void CloseFds(Workload& w);
  void RemoveCgroupLocked(const CgroupGroup& group);

  // Constant after construction.
  const ExecutorOptions options_;  // shim_path resolved

  mutable std::mutex mu_;
  std::map<std::string, Workload> running_;    // guarded by mu_
  std::vector<CgroupGroup> pending_removals_;  // guarded by mu_: groups that were busy when removed
};

}  // namespace gpugeek::agent
