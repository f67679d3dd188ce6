#pragma once
// Agent: the per-node half of gpugeek. It registers the node's GPUs with the control plane, heartbeats
// telemetry, workload states and log bytes, and turns the assignments each heartbeat reply lists into
// local processes (through the Executor) and back.
//
// The problem: the control plane decides what runs where, but only the node can start, watch and stop
// processes. The two talk over an unreliable network: replies get lost, repeated or delayed, the server
// restarts, and a partitioned node may hear of a placement that has since moved elsewhere. So the protocol
// (api/agent_protocol.h) sends desired state, and this class reconciles towards it, idempotently.
//
// One heartbeat cycle, Tick():
//   1. Poll the executor: record how each ended workload ended (exit code, signal, OOM); check the lease
//      (see "Self-fencing" below).
//   2. Register if not registered yet (POST /v1/agents/register with the inventory and instance id).
//   3. Build the Heartbeat: a GpuSample per GPU (Discovery::Sample); a WorkloadReport for each workload
//      held (running or stopping: "running"; ended: "exited" with code / signal / message; could not
//      start: "failed-to-start"); the log bytes written since the last acknowledged offset, at most
//      `max_log_bytes_per_workload` per workload and `max_log_bytes_per_heartbeat` in all.
//   4. POST it to /v1/agents/{node}/heartbeat. Log offsets advance only when the server answered 2xx, so
//      a lost heartbeat re-sends the same bytes at the same offsets, never different ones. A 2xx answer
//      renews the lease from the moment this heartbeat was SENT.
//   5. Reconcile the reply (unless it says `reregister`; see below):
//      - Fencing. For each job the agent remembers the highest epoch any reply listed. A listed assignment
//        with a lower epoch is stale and dropped (logged once): it is never started, and it does not keep
//        a workload of another epoch alive. An assignment starts only if its epoch is higher than any the
//        agent has already started (or declined) for that job: a repeated or delayed reply cannot start a
//        workload twice.
//      - A listed assignment the agent does not hold is started (unless marked `cancel`: it is then
//        reported as exited, "cancelled before it started", and never run), unless the agent is fenced:
//        then it waits for a reply that arrives within the lease.
//      - A listed assignment with a higher epoch than the workload the agent runs for that job replaces
//        it: the old one is cancelled with ITS grace, and the new one starts in the first Tick after the
//        old one has been reaped (they share the member's log file and working directory).
//      - A held assignment marked `cancel` is cancelled: SIGTERM to its process group, SIGKILL after
//        grace_ms (the executor delivers it on a Poll at or after the deadline).
//      - A running workload whose assignment is no longer listed (at its epoch) is cancelled with the
//        grace of the assignment last seen.
//      - An ended workload is reported in every heartbeat while its assignment is listed; once unlisted it
//        is forgotten (its log keeps being shipped until the server has all of it).
//   Re-registration: when the reply says `reregister`, or the heartbeat is answered NotFound (the server
//   does not know this node, e.g. its store was wiped), the agent registers again in the same Tick and does
//   NOT reconcile that reply (a server that does not know the node has no meaningful list for it);
//   workloads keep running and the next heartbeat's reply decides.
//
// Self-fencing. A node the server cannot hear from is, to the server, lost: after its lease it re-places
// the node's jobs elsewhere. If the node is alive but cut off (a partition, a frozen VM or a stalled
// agent), the old workloads must be gone by then, or a gang member runs in two places (two writers on
// one checkpoint). So the agent enforces the same lease on itself, measured on the MONOTONIC clock
// (Clock::Monotonic(); a wall-clock step neither fences nor delays it):
//   - `last_ack_sent` = the send time of the newest heartbeat the server answered 2xx.
//   - At last_ack_sent + lease_ms with no newer success, the agent is FENCED: it cancels every workload
//     it holds with grace min(grace_ms, fence_grace_ms) counted from that deadline (SIGTERM now, SIGKILL
//     at last_ack_sent + lease_ms + min(grace_ms, fence_grace_ms); the executor delivers it on the
//     first Poll at or after it, within ~100 ms in Run), logs it once and counts it
//     (gpugeek_agent_fenced_total). A fenced workload's exit report says "fenced: ...".
//   - While fenced it keeps heartbeating and reporting, but starts nothing.
//   - A heartbeat answered 2xx whose send time + lease_ms is still ahead un-fences it (one answered
//     after the lease had run out even from its own send time does not); the reply is reconciled as
//     usual: the server has by then moved or requeued what it lost, and its list decides.
//   The server counts its lease from its RECEIPT of the last heartbeat, which is never before the
//   agent sent it, so the agent's deadline always comes first. Timeline with the server's defaults
//   (heartbeats every 1 s, lease 2 s, fence grace 0.5 s, margin 0.5 s), t = send time of the last
//   answered heartbeat:
//     t             the last answered heartbeat is sent; the server receives it at t + d (d >= 0)
//     t + 2 s       the agent fences: SIGTERM to every workload it holds, nothing new starts
//     t + d + 2 s   the server's lease (counted from receipt) runs out; it waits out grace and margin
//     t + 2.5 s     SIGKILL to whatever is left: every workload is gone (bar one executor poll, ~100 ms)
//     t + d + 3 s   the server declares the node down, presumes its members stopped, and may re-place
//                   them (lease 2 s + fence grace 0.5 s + a 0.5 s margin)
//   so a member is never running in two places. Fencing is checked at each Tick and, in Run, by a
//   watchdog thread every 100 ms (which also polls the executor), so a heartbeat blocked in its HTTP
//   request (up to request_timeout) delays neither the fence nor its SIGKILL. Reachable in time, the
//   agent never fences: a 1 s heartbeat has two tries per lease.
//
// The shims' lease. Self-fencing needs the agent to run. An agent that is frozen (SIGSTOP, a long stall,
// stuck in the kernel) keeps its workloads' lifelines open, so their shims never see the EOF that an
// agent's death gives them, and the workloads would run on after the server re-placed them. So each
// shim holds a lease too (LaunchRequest::lease, Executor::RenewLeases), and the agent renews it at the
// same moment as its own: on every heartbeat answered 2xx it writes to each lifeline the deadline
// last_ack_sent + lease_ms + 200 ms (kShimLeaseSlack), as an absolute CLOCK_BOOTTIME time; a workload
// starts with the same deadline. Past it, with no later renewal, the shim does what it does on EOF:
// SIGTERM the workload tree (not the group again if it already had one, from the agent's own fence or a
// cancel), and SIGKILL what is left after min(grace_ms, fence_grace_ms), the shim's grace. With a frozen
// agent and the defaults:
//     t + 2.2 s     each shim SIGTERMs its workload tree
//     t + 2.7 s     each shim SIGKILLs what is left (plus its wake-up latency, well under 100 ms)
//     t + d + 3 s   the server may re-place them: 0.3 s later at least
//   The bound: the shim's SIGKILL comes by t + lease + 200 ms + min(grace, fence grace) <= receipt + 2.7 s,
//   whatever the round trip. Why the deadline is written, not a byte per answer: a byte renews when the
//   answer ARRIVES, after the server received the heartbeat, so the SIGKILL would come by receipt + rtt +
//   lease + grace: past receipt + 3 s for any answer slower than 0.5 s (a slow server, a long GC, a
//   retransmit). The deadline is counted from the SEND time like the agent's own, and is absolute, so a
//   renewal the shim reads late (descheduled, throttled by its CPU quota) means the same. Why the 200 ms:
//   a live agent fences first (its watchdog checks every 100 ms) and SIGTERMs the group, so its shims
//   send no second SIGTERM, which could cut a checkpoint short; a frozen one's shims act alone. The shim
//   counts on CLOCK_BOOTTIME, which, unlike CLOCK_MONOTONIC, runs while the machine is suspended: after a
//   suspend longer than the lease the shims stop their workloads on resume (the agent's own monotonic
//   lease does not notice a suspend). A workload stopped so is reported as fenced once the agent runs
//   again (it checks the lease before polling the executor).
//
// Workloads. The member of job J with node rank R runs as executor workload `J-R` (a job id must be valid
// as a workload id, see ValidateWorkloadId; otherwise the assignment is reported failed-to-start), in the
// working directory `<data_dir>/work/J-R` (created), with its combined stdout/stderr in
// `<data_dir>/logs/J-R.log`. Log offsets are byte positions in that file; a replacement (higher epoch)
// appends to it. Environment, lowest precedence first: PATH, HOME and LANG of the agent (`base_env`), the
// assignment's `env`, then BuildWorkloadEnv's GPUGEEK_* and device variables (a job spec cannot override
// the devices it was given). The assignment names GPUs by UUID (Assignment::gpu_uuids); each is looked up
// in the node's inventory (hw::GpuDevice::uuid) and given to the workload in the vendor library's own
// numbering (GpuDevice::source_index), and the vendor of the assigned GPUs picks CUDA_VISIBLE_DEVICES
// (NVIDIA) or ROCR_/HIP_VISIBLE_DEVICES (AMD); an assignment that names a UUID the node does not have
// (the message names it), the same GPU twice or GPUs of two vendors is reported failed-to-start. CPU (cpu_milli) and
// memory (memory_bytes) limits go to cgroups when `cgroup_limits` is on and the host offers cgroups; otherwise they are
// not enforced (logged per workload).
//
// Run() registers (retrying with capped exponential backoff while the server is unreachable, logging once
// per change between reachable and unreachable), then Ticks every heartbeat interval (the server's
// RegistrationReply may override the configured one) and polls the executor every 100 ms in between, so a
// cancel's SIGKILL lands within ~100 ms of its deadline. On Stop() (or the stop token) it cancels every
// workload with its grace, waits until all have ended (at most the longest grace plus 5 s), sends a last
// best-effort heartbeat reporting their exits, and returns; so `gpugeek up` and `gpugeek agent` exit
// without leaving processes behind. Run paces itself on the steady clock; the injected Clock drives the
// executor's grace deadlines and start/end times.
//
// Restart after a crash. An agent killed with SIGKILL leaves its workloads running in their cgroups,
// unsupervised and holding GPUs the scheduler hands to others. Create() therefore ends them before the
// agent registers or takes an assignment: every group under `<parent>/<node>` is SIGKILLed and removed
// (CgroupManager::ReapOrphans, one log line per group); the server then re-assigns what should run. An
// agent holds its node's cgroup exclusively while it lives (an abstract unix socket named after it, which
// the kernel releases even on SIGKILL), so a second agent with the same node name on the host is refused
// instead of killing the first one's workloads. Without cgroups (cgroup_limits off, or none on the host)
// leftovers cannot be found: see README.md. On destruction the agent removes its (then empty) node group.
//
// Instance id. Create() draws a random 128-bit id (api::NewInstanceId) that registration and every
// heartbeat carry: a server seeing a new id for a known node knows the agent restarted (it holds nothing
// it did not start itself), the same id that it reconnected.
//
// Memory: per job ever assigned to this node the agent keeps its fence (two integers) and its log offset,
// a few dozen bytes, for its lifetime. After an agent restart both are forgotten: logs are re-shipped from
// offset 0 (the server keeps what it has by offset) and fencing starts over (the server's epochs still
// fence, as it never lists an old epoch for a node it has since moved the job from).
//
// Metrics (AgentOptions::metrics, agent_metrics.h): each heartbeat's GPU sample, result and round trip, the
// workloads running and how each ended go into the registry's agent families (docs/metrics.md); the caller
// serves them (MetricsListener) and tells the agent where (SetMetricsAddress), which registration announces.
//
// Thread-safety: Tick() and Run() drive the agent from one thread at a time (Run calls Tick; never call
// both concurrently; Run's own watchdog thread shares mu_ with them). Stop(), the accessors and
// Workloads() may be called from any thread at any time.

#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/cgroup.h"
#include "agent/dataset_fetch.h"
#include "agent/emulated_utilization.h"
#include "agent/exec_runner.h"
#include "agent/executor.h"
#include "agent/podman.h"
#include "agent/reclaim_notice.h"
#include "agent/workdir_fetch.h"
#include "api/agent_protocol.h"
#include "common/clock.h"
#include "hw/discovery.h"

namespace gpugeek::http {
class Client;
}
namespace gpugeek::metrics {
class Registry;
}

namespace gpugeek::agent {

class AgentMetrics;

struct AgentOptions {
  std::string server_url;  // "https://127.0.0.1:8472" (or "http://..." to a --insecure-no-tls server); required
  // The CA certificate (PEM file) the server's certificate must chain to; required for an https://
  // server_url and the only trust anchor (never the system store; http::ClientOptions::ca_file).
  std::string ca_file;
  // How the agent proves it is `node` (the server's node_authority.h): once it has joined, the node
  // credential kept in <data_dir>/node.credential (mode 0600); to join the first time, this join token
  // (an admin's `gpugeek join-token create`). It is also the fallback when the server refuses the kept
  // credential (the node was removed). Create fails when there is neither.
  std::string join_token;
  // The node's name in the pool: 1-128 of [A-Za-z0-9._-]. Empty: the host name (gethostname(2)).
  std::string node;
  std::string address = "127.0.0.1";        // how gang peers reach this node (GPUGEEK_MASTER_ADDR)
  std::string capacity_type = "on-demand";  // on-demand | spot | reserved
  std::string region;
  // Where this node learns of a spot reclaim (reclaim_notice.h; borrowed, must outlive the Agent; nullptr =
  // nowhere): Run polls it every reclaim_poll on a thread of its own and tells the server once.
  ReclaimNoticeSource* reclaim_notice = nullptr;
  Duration reclaim_poll = std::chrono::seconds(2);
  // A GPU-hour of this node, in integer micro-units (api::Registration::price_micros_per_gpu_hour); 0 = unpriced.
  int64_t price_micros_per_gpu_hour = 0;
  // The shortest rental charged (api::Registration::min_rental_s); 0 = per second.
  int64_t min_rental_s = 0;
  std::map<std::string, std::string> labels;
  hw::Discovery* discovery = nullptr;  // borrowed, required; must outlive the Agent; used only by Tick/Run
  // Required. Logs go to <data_dir>/logs, working directories to <data_dir>/work/<job>-<rank>.
  std::string data_dir;
  Duration heartbeat_interval = std::chrono::seconds(1);  // until the server's RegistrationReply says otherwise
  bool cgroup_limits = true;          // enforce cpu_milli / memory_bytes with cgroups where the host offers them
  CgroupOptions cgroups;              // mounts (tests use a temporary tree); groups: <parent>/<node>/<workload>
  const Clock* clock = &RealClock();  // borrowed; must outlive the Agent
  // Variables every workload starts with. Empty: PATH (default "/usr/local/bin:/usr/bin:/bin"), HOME and
  // LANG copied from the agent's own environment where set.
  EnvMap base_env;
  // Bytes shipped per workload per heartbeat: 1 .. api::kMaxLogChunkBytes (1 MiB).
  uint64_t max_log_bytes_per_workload = 256 << 10;
  uint64_t max_log_bytes_per_heartbeat = 1 << 20;  // bytes shipped per heartbeat in all
  Duration connect_timeout = std::chrono::seconds(3);
  Duration request_timeout = std::chrono::seconds(10);  // read timeout of each request
  Duration max_backoff = std::chrono::seconds(30);      // Run's registration retry cap (starts at 0.5 s)
  // Borrowed, optional: the agent adds its families (docs/metrics.md "Agent", agent_metrics.h) and keeps
  // them current; serving them is the caller's (MetricsListener). Must outlive the Agent's use of it;
  // one agent per registry. nullptr: no metrics.
  metrics::Registry* metrics = nullptr;
  // "host:port" where this agent serves /metrics, announced at registration (Registration::metrics_address);
  // empty when it serves none. SetMetricsAddress changes it later.
  std::string metrics_address;
  // Who workloads run as (executor.h RunAsOptions): by default, a root agent runs each tenant's members
  // as that tenant's own unprivileged uid. An empty map_path becomes <data_dir>/uids.
  RunAsOptions run_as;
  // Containers (JobSpec::image; container_command.h): the rootful podman invocation split into words, e.g.
  // {"podman", "--root", "/var/lib/gpugeek/podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"}.
  // Empty: this node runs no containers (it reports no images; a member with an image fails to start).
  std::vector<std::string> podman;
  // Extra `podman run` flags this machine needs, e.g. {"--ulimit", "nofile=4096:4096"}.
  std::vector<std::string> podman_run_flags;
  // How often the image list is read again (`podman images`, on its own thread); a changed list is sent by
  // registering again.
  Duration image_refresh = std::chrono::seconds(30);
  // The compiled-engine runtimes this node has, sorted (engine_runtimes.h; `--engines`), reported at
  // registration (Registration::engines). A member of a job with `engine:` gets GPUGEEK_ENGINE=FORMAT and
  // GPUGEEK_ENGINE_RUNTIMES, the comma-separated runtimes of that format among these.
  std::vector<std::string> engines;
};

// What the agent holds for one job, as Workloads() reports it.
struct WorkloadStatus {
  std::string job_id;
  int64_t epoch = 0;
  int node_rank = 0;
  std::string workload_id;  // executor id: "<job>-<rank>"
  // "preparing" (fetching and unpacking its workdir), "running", "stopping" (cancel sent), "exited", "failed-to-start",
  // "not-started" (cancelled before start)
  std::string state;
  pid_t pid = 0;        // while running or stopping
  std::string message;  // how it ended / why it did not start
};

class Agent {
 public:
  // Validates the options, discovers the node's inventory (Discovery::Discover), creates the data
  // directories, the cgroup manager (when cgroup_limits), ends what a previous agent of this node left in
  // its cgroups (see the file comment), and creates the executor. Does not contact the server.
  // Draws the agent's instance id. Errors: InvalidArgument (missing server_url / discovery / data_dir /
  // clock, bad node name, capacity_type, heartbeat interval or log caps, malformed URL, an https:// URL
  // without ca_file or a ca_file that does not parse, an inventory of more than api::kMaxGpusPerNode
  // GPUs); NotFound for a missing ca_file; the discovery's error; Internal when a directory cannot be
  // created or no random source gives an instance id; FailedPrecondition when another live agent on this
  // host holds the node's cgroup (same node name).
  static absl::StatusOr<std::unique_ptr<Agent>> Create(AgentOptions options);

  // SIGKILLs whatever still runs (through the executor), then removes the node's cgroup (`<parent>/<node>`)
  // once empty, so node names no longer in use do not pile up on the host. Run() returning normally has
  // already stopped everything gracefully.
  ~Agent();

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // One heartbeat cycle (see the file comment). Errors: Unavailable when the server cannot be reached
  // (workloads keep running until the lease runs out, then the agent fences; the next Tick retries with
  // the same log offsets); the server's error for a refused registration or heartbeat; InvalidArgument
  // when a reply does not decode. The executor is polled, workload exits recorded and the lease checked
  // even when the server is unreachable.
  absl::Status Tick();

  // Registers, then Ticks every heartbeat interval until `stop` is requested or Stop() is called; then
  // stops every workload gracefully (see the file comment). Meanwhile a watchdog thread checks the lease
  // and polls the executor every 100 ms. Returns OK after a requested stop; errors from the server are
  // logged and retried, never returned.
  absl::Status Run(std::stop_token stop = {});
  // Asks Run() to stop and return. Thread-safe, idempotent, non-blocking.
  void Stop();

  // Cancels every running workload with its grace, polls until all have ended or `timeout` (steady
  // clock) passed, then sends a best-effort heartbeat. Used by Run on stop; exposed for tests.
  void StopWorkloads(Duration timeout);

  const std::string& node() const { return node_; }
  // Sets what the next registration announces as Registration::metrics_address (e.g. once a
  // MetricsListener bound its port), and whether it speaks TLS (Registration::metrics_tls). Does not
  // re-register by itself. Thread-safe.
  void SetMetricsAddress(std::string address, bool tls = false);
  std::string metrics_address() const;
  bool metrics_tls() const;
  // The interval in force (the server's, after registration).
  Duration heartbeat_interval() const;
  bool registered() const;
  // Whether the agent is fenced now (its lease ran out; see the file comment). Thread-safe.
  bool fenced() const;
  // The lease and fence grace in force (RegistrationReply's; 3 s and 2 s until registered). Thread-safe.
  Duration lease() const;
  Duration fence_grace() const;
  // This agent's instance id (32 lower-case hex digits), drawn by Create and sent in registration and
  // every heartbeat.
  const std::string& instance_id() const { return instance_id_; }
  const hw::NodeInventory& inventory() const { return inventory_; }
  // "cgroup v2", "cgroup v1" or "none: <why>" (also when cgroup_limits is off).
  std::string CgroupDescription() const;
  // A snapshot of the workloads held, by job id.
  std::vector<WorkloadStatus> Workloads() const;

  // `gpugeek exec`: where and as whom a command runs beside the member of `job_id` with `node_rank`:
  // the member's working folder, complete environment and user (exec_runner.h). NotFound when this node
  // holds no such member; FailedPrecondition when it is not running (preparing its workdir, stopping or
  // ended); IdentityFor's errors. Thread-safe.
  absl::StatusOr<ExecTarget> ExecTargetFor(const std::string& job_id, int node_rank);
  // `gpugeek ports` / `port-forward`: the process whose tree holds the listening sockets of the member of
  // `job_id` with `node_rank` (listening_ports.h): its shim on the host, its container's first process
  // (`podman inspect`) in a container. NotFound / FailedPrecondition as ExecTargetFor; Unavailable when
  // podman cannot tell the container's process. Thread-safe.
  absl::StatusOr<pid_t> PortRootFor(const std::string& job_id, int node_rank);
  // Whether `presented` is the exec token of the server's last RegistrationReply, compared in constant
  // time; false while none was given (not registered, or a server that relays no exec). Thread-safe.
  bool ExecTokenMatches(std::string_view presented) const;

  // The checkpoint contract (docs/checkpointing.md). Sets the URL of the node's workload endpoint
  // (WorkloadListener, e.g. "http://127.0.0.1:40713"): members started from now on get it as
  // GPUGEEK_AGENT_URL beside their own GPUGEEK_MEMBER_TOKEN (32 hex digits, drawn per placement); "" =
  // none (neither is set). Thread-safe.
  void SetWorkloadUrl(std::string url);
  // A member's workload says its checkpoint at `step` (0..api::kMaxCheckpointStep) is complete: the
  // member whose GPUGEEK_MEMBER_TOKEN is `member_token` (compared in constant time) reports it on every
  // heartbeat from now on, the next one at once. Returns "<job id> rank <node rank> epoch <epoch>".
  // Unauthenticated for a token of no member here, FailedPrecondition for a member that has ended,
  // InvalidArgument for a step out of range. Thread-safe.
  absl::StatusOr<std::string> ReportCheckpoint(std::string_view member_token, int64_t step);
  // A member's workload reports `value` (finite) of its objective at `step` (0..api::kMaxCheckpointStep):
  // `gpugeek report --step N --value V` (docs/hpo.md). Held and sent with every heartbeat (the next one
  // at once) until the server says it stored it (Assignment::metrics_stored), so neither a lost reply nor
  // a server restart loses one. Returns the member ("<job id> rank <node rank> epoch <epoch>") and whether
  // the server asked it to stop (a pruned trial: its workload may checkpoint and exit now).
  // Unauthenticated and FailedPrecondition as ReportCheckpoint; InvalidArgument for a step out of range or
  // a value not finite; ResourceExhausted while api::kMaxMetricsPerReport reports wait to be stored.
  struct MetricAck {
    std::string member;
    int64_t seq = 0;
    bool stop = false;
  };
  absl::StatusOr<MetricAck> ReportMetric(std::string_view member_token, int64_t step, double value);

  // One poll of options.reclaim_notice (Run calls it every reclaim_poll): on the first notice, posts
  // {"deadline_s": NoticeSeconds(time, clock now)} to /v1/agents/{node}/reclaim; later polls do nothing
  // once the server took it. Returns the source's or the server's error (polled again next time); OK
  // without a source. Call from one thread at a time (it has its own HTTP client).
  absl::Status PollReclaimNotice();

 private:
  // kPreparing: fetching and unpacking the job's workdir archive, and fetching its dataset version (on
  // other threads) before the first step starts; reported to the server as running.
  enum class State { kPreparing, kRunning, kStopping, kExited, kFailedToStart, kNotStarted };
  struct Member {
    api::Assignment assignment;  // as last listed
    std::string workload_id;
    State state = State::kRunning;
    bool listed = true;  // listed at its epoch by the last reconciled reply
    pid_t pid = 0;
    bool fenced = false;                        // stopped because the agent fenced itself
    api::WorkloadReport report;                 // the final report once ended / failed / not started
    std::optional<MonoTime> ended_at;           // when its process was reaped (report.ended_ms_ago)
    std::shared_future<absl::Status> prepared;  // kPreparing: the workdir unpacked, the dataset fetched
    bool in_setup = false;                      // the running step is the assignment's `setup`, not `run`
    bool setup_done = false;                    // setup exited 0: the next start is `run`
    bool log_started = false;                   // the log source of this placement is set up
    std::string container;                      // the running step's container name; "" on the host
    LaunchRequest launch;                       // the running step's, as started (exec runs beside it)
    std::string member_token;                   // GPUGEEK_MEMBER_TOKEN of this placement
    std::optional<int64_t> checkpoint_step;     // the last step its workload reported complete
    std::vector<api::MetricPoint> metrics;      // reported, not yet stored by the server (by seq)
    int64_t next_metric_seq = 0;                // the seq of its next report
  };
  // "<job id> rank <node rank> epoch <epoch>".
  static std::string MemberName(const Member& m);
  // The running (or stopping) member whose GPUGEEK_MEMBER_TOKEN is `member_token` (constant-time compare):
  // Unauthenticated for none, FailedPrecondition naming `what` for one that has ended. Call with mu_ held.
  absl::StatusOr<Member*> LiveMemberByTokenLocked(std::string_view member_token, std::string_view what);
  struct Fence {
    int64_t max_seen = 0;                 // highest epoch any reply listed
    std::optional<int64_t> handled;       // highest epoch started or declined
    std::optional<int64_t> stale_logged;  // last stale epoch warned about
  };
  // Set when a workload started or ended since the last heartbeat (guarded by mu_): Run() then
  // heartbeats at once instead of waiting for the interval.
  bool report_soon_ = false;

  struct LogSource {
    std::string job_id;
    int node_rank = 0;
    uint64_t offset = 0;   // bytes of the file the server acknowledged
    bool drained = false;  // no member uses it and everything was shipped: skipped
    // The placement now writing to the file, and where its output starts: the server keeps one log
    // per placement (epoch), with offsets counted from that placement's first byte.
    int64_t epoch = 0;
    uint64_t epoch_start = 0;
  };

  Agent(AgentOptions options, std::unique_ptr<http::Client> client, std::unique_ptr<CgroupManager> cgroups,
        std::unique_ptr<Executor> executor, std::shared_ptr<AgentMetrics> metrics, hw::NodeInventory inventory,
        int node_claim_fd, std::string instance_id);

  absl::Status Register();
  // Replaces client_ with one presenting `bearer` (the Tick thread only).
  absl::Status UseBearer(const std::string& bearer);
  std::string credential_file() const { return options_.data_dir + "/node.credential"; }
  // POSTs one heartbeat and records its result and round trip in the metrics.
  absl::StatusOr<nlohmann::json> PostHeartbeat(const api::Heartbeat& hb);
  // Updates gpugeek_agent_workloads. Requires mu_.
  void UpdateWorkloadsMetricLocked();
  // Records the exits Poll() returns. Requires mu_ held.
  void PollLocked();
  // Fences the agent if the lease has run out (see the file comment). Requires mu_.
  void CheckLeaseLocked();
  // A heartbeat sent at `sent` was answered 2xx: renews the lease, un-fencing when it is still ahead.
  // Requires mu_.
  void RenewLeaseLocked(MonoTime sent);
  // What is left of the workloads' shim lease: last_ack_sent + lease + kShimLeaseSlack (agent.cc) - now
  // (lease + slack before any answer). Requires mu_.
  Duration ShimLeaseLeftLocked() const;
  api::Heartbeat BuildHeartbeat(std::map<std::string, uint64_t>& new_offsets);
  // Sets the utilisation of the emulated GPUs in `samples` (inventory order) from the CPU use of the
  // members holding them (emulated_utilization.h); real GPUs keep their library's figure.
  void FillEmulatedUtilization(std::vector<hw::GpuSample>& samples);
  void Reconcile(const api::HeartbeatReply& reply);
  // Starts `a` as member of its job; records a failed-to-start member when it cannot. Requires mu_.
  void StartLocked(const api::Assignment& a);
  // Starts the member's next step (`setup` when it has one not yet done, else `run`) as its workload.
  // Requires mu_.
  void LaunchLocked(Member& m);
  // The member of `job_id` with `node_rank` on this node; NotFound naming both when there is none. mu_ held.
  absl::StatusOr<const Member*> MemberLocked(const std::string& job_id, int node_rank) const;
  // Records a member that could not start. Requires mu_.
  void FailStartLocked(Member& m, const absl::Status& status);
  // Members whose workdir is ready start; a failed preparation is a failed start. Requires mu_.
  void AdvancePreparingLocked();
  // Fetches (once per digest, WorkdirFetcher) and unpacks `a`'s workdir archive into `dir`, then each of
  // its `files:` archives into dir/path, and waits for its dataset version (once per commit,
  // DatasetFetcher), on another thread. A dataset error reads "dataset NAME@COMMIT12: ...".
  std::shared_future<absl::Status> PrepareWorkdir(const api::Assignment& a, const std::string& dir);
  // `step` ("setup" or "run") names the container of a member with an image. A member with a dataset gets
  // GPUGEEK_DATASET=NAME@COMMIT and GPUGEEK_DATASET_DIR=its checkout (on the host; /gpugeek/dataset,
  // mounted read-only, in a container); likewise GPUGEEK_MODEL=OWNER/NAME@COMMIT and GPUGEEK_MODEL_DIR
  // (/gpugeek/model) for the job's `weights:`.
  absl::StatusOr<LaunchRequest> MakeLaunchRequestLocked(const api::Assignment& a, const std::string& id,
                                                        const std::string& command,
                                                        const std::string& step = "run") const;
  // Turns `req` into the member's container (container_command.h): the podman command, an env file of
  // the member's environment, and an environment of PATH only for podman itself.
  absl::Status ContainerizeLocked(const api::Assignment& a, const std::string& step, std::optional<hw::Vendor> vendor,
                                  const std::vector<int>& gpu_indices, LaunchRequest& req) const;
  // How a version cache gets one object: an authenticated GET of
  // /v1/agents/{node}/{collection}/{commit}/objects/{digest} (collection "datasets" or "models"), at
  // most data::kMaxTreeBytes, on the calling (fetch) thread, over a pool of clients presenting the node's
  // current credential.
  DatasetFetcher::GetObjectFn VersionObjectGetter(const std::string& collection) const;
  // The versions an assignment names (its dataset, its model weights), each with its cache.
  struct VersionInput {
    std::string what;   // "dataset", "weights": how errors name it
    std::string label;  // "NAME@COMMIT12" (with "OWNER/" for weights)
    std::string name, commit;
    DatasetFetcher* cache = nullptr;
    std::string env_ref, ref;   // GPUGEEK_DATASET = NAME@COMMIT
    std::string env_dir;        // GPUGEEK_DATASET_DIR
    std::string container_dir;  // where a container sees it, read-only
    std::string signer_pem;     // the key its model.sig must verify with before a member starts; "" = none
  };
  std::vector<VersionInput> VersionInputs(const api::Assignment& a) const;
  // Removes a step's container (if podman left it) and its env file, on another thread.
  void RemoveContainerLater(const std::string& name) const;
  void CancelLocked(Member& m, int64_t grace_ms, const char* why);
  void ForgetDoneMembersLocked();
  bool StopRequested() const;
  // Waits (steady clock) up to `d` or until Stop.
  void WaitFor(Duration d);

  const AgentOptions options_;
  const std::string node_;
  std::unique_ptr<http::Client> client_;  // used by the Tick thread only; replaced on joining
  std::string bearer_;                    // what client_ presents: the credential or the join token
  // The bearer the workdir and dataset downloads present (their threads read it while the Tick thread may
  // change it).
  struct SharedBearer {
    std::mutex mu;
    std::string value;
  };
  const std::shared_ptr<SharedBearer> shared_bearer_ = std::make_shared<SharedBearer>();
  std::shared_ptr<WorkdirFetcher> fetcher_;   // <data_dir>/archives; set at construction
  std::shared_ptr<DatasetFetcher> datasets_;  // <data_dir>/datasets; set by Create
  // <data_dir>/models/<tenant>: one model cache per tenant that runs models, as a checkout is closed to
  // its tenant's group and a shared model may run for two tenants on one node. Made on first use.
  DatasetFetcher* ModelCacheFor(const std::string& tenant) const;
  DatasetFetcher::GetObjectFn model_getter_;  // set by Create
  mutable std::mutex model_caches_mu_;
  mutable std::map<std::string, std::shared_ptr<DatasetFetcher>> model_caches_;  // guarded by model_caches_mu_
  const std::unique_ptr<CgroupManager> cgroups_;                                 // may be null (cgroup_limits off)
  std::unique_ptr<Executor> executor_;           // set at construction; reset only by ~Agent
  const int node_claim_fd_;                      // see ClaimNode (agent.cc); -1 without cgroups
  const std::shared_ptr<AgentMetrics> metrics_;  // null without AgentOptions::metrics; thread-safe itself
  const std::string instance_id_;                // api::NewInstanceId, drawn by Create
  EmulatedUtilization emulated_utilization_;     // heartbeat thread only
  hw::NodeInventory inventory_;                  // Tick thread; replaced on re-registration
  std::unique_ptr<ImageWatcher> images_;         // null without options_.podman

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;             // guarded by mu_
  bool registered_ = false;                 // guarded by mu_
  uint64_t registered_images_version_ = 0;  // guarded by mu_; images_->version() sent at registration
  std::string metrics_address_;             // guarded by mu_
  std::string exec_token_;                  // guarded by mu_; RegistrationReply::exec_token
  std::string workload_url_;                // guarded by mu_; SetWorkloadUrl
  bool reclaim_reported_ = false;           // PollReclaimNotice's thread only
  bool metrics_tls_ = false;                // guarded by mu_
  Duration interval_;                       // guarded by mu_
  Duration lease_;                          // guarded by mu_; RegistrationReply::lease_ms
  Duration fence_grace_;                    // guarded by mu_; RegistrationReply::fence_grace_ms
  // Monotonic send time of the newest heartbeat answered 2xx; unset until one was (nothing is held before).
  std::optional<MonoTime> last_ack_sent_;   // guarded by mu_
  bool fenced_ = false;                     // guarded by mu_
  std::map<std::string, Member> members_;   // guarded by mu_; by job id
  std::map<std::string, Fence> fences_;     // guarded by mu_; by job id
  std::map<std::string, LogSource> logs_;   // guarded by mu_; by workload id
  std::set<std::string> warned_no_limits_;  // guarded by mu_
};

}  // namespace gpugeek::agent
