#pragma once
// SlurmBridge: a Slurm cluster as a region of the pool. It stands in for the agents of the cluster's GPU
// nodes: it registers each node with the control plane (the agent protocol, api/agent_protocol.h), beats
// for it, and turns the assignments the control plane's scheduler placed on those nodes into Slurm batch
// jobs pinned exactly there (batch.h), reporting their state back as the members' workload reports.
//
// Node names: "<cluster>-<slurm node>" in region "slurm-<cluster>", labels slurm-cluster, slurm-partition.
// Inventory: the node's GPU GRES (gres.h) as GPUs of the catalog model `gpu_models` maps its GRES type to
// (e.g. a100 -> A100-SXM-80GB), with the board topology of that model (hw/emulated_discovery.h); nodes whose
// GRES type is not mapped are left out of the pool (logged once).
// Liveness: a node Slurm reports down (nodes.h NodeCondition::kDown) gets no heartbeat, so the control plane
// sees it lost after its lease; its Slurm jobs end as NODE_FAIL and are reported as a node failure ("fenced:"
// reports), so gpugeek re-places them (Slurm itself never requeues them: --no-requeue). Draining nodes keep
// beating (their jobs run to the end). While slurmrestd cannot be read the nodes keep beating with their last
// state for `slurm_outage_grace`, then stop.
// Gangs: the members of one job and epoch, on distinct nodes of this cluster, are submitted together once
// all num_nodes members are assigned and every older epoch of the job has ended in Slurm, as one job with one
// task per node (or procs_per_node with the torch launcher) and ranks in node_rank order. An assignment of an
// epoch older than one seen for its job is ignored. A member is reported running once Slurm runs the job
// (PENDING reports nothing: the member stays SCHEDULED; after `pending_timeout` the job is cancelled and fails
// to start with Slurm's reason), exited with its exit status or signal when it ends, failed to start with
// sbatch's reason when Slurm refuses it. A member whose gang has members outside the cluster, or two on one
// node, fails to start after `gang_wait` with the reason.
// Stopping: a cancelled or no longer listed gang gets SIGTERM, then SIGKILL after its grace; its exit is
// reported until the control plane stops listing it.
// Fencing: a node whose heartbeat has not been answered for its lease gets its Slurm jobs killed (reported
// as "fenced:"), as an agent fences itself, before the control plane re-places them.
// Restarts: each node's credential and instance id are kept in `state_dir` (local to the bridge, locked: one
// bridge per state dir), so a restarted bridge is the same agent reconnecting; it adopts the Slurm jobs it
// finds with its comment (gpugeek:<job>:<epoch>) instead of submitting them again. An sbatch whose outcome is
// unclear (timed out, printed no id) is looked up the same way.
// Each workload's output is the Slurm job's output file (a regular file, never followed through a link),
// shipped as the log of node rank 0; an offset advances only when the control plane took the bytes.
// Not supported on Slurm nodes (failed to start with the reason): workdir archives, files, datasets, model
// weights and container images (they need the agent's fetchers). Every job runs as the bridge's Unix user.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/agent_protocol.h"
#include "backends/slurm/rest_client.h"
#include "common/clock.h"
#include "http/client.h"

namespace gpugeek::backends::slurm {

struct BridgeOptions {
  std::string cluster;  // [A-Za-z0-9-]{1,32}: the region is "slurm-<cluster>", nodes "<cluster>-<name>"
  RestOptions slurm;
  std::string server_url;                         // the control plane's agent listener
  std::string ca_file;                            // its CA (https)
  std::string join_token;                         // for nodes that have no credential yet
  std::string state_dir;                          // node credentials, one file per node (0600)
  std::map<std::string, std::string> gpu_models;  // GRES type -> GPU catalog id
  std::string capacity_type = "on-demand";
  int64_t price_micros_per_gpu_hour = 0;
  std::string job_root;   // where each job's folder is made; must be the same path on every Slurm node
  std::string partition;  // "" = Slurm's default partition
  Duration gang_wait = std::chrono::seconds(30);
  Duration pending_timeout = std::chrono::minutes(10);
  Duration slurm_outage_grace = std::chrono::minutes(5);
  Clock* clock = nullptr;  // monotonic (leases); nullptr = RealClock()
};

class SlurmBridge {
 public:
  // InvalidArgument naming the option (cluster, server_url, state_dir, gpu_models, job_root; a state_dir
  // inside job_root, where jobs could read the node credentials); FailedPrecondition when another bridge holds
  // state_dir.
  static absl::StatusOr<std::unique_ptr<SlurmBridge>> Create(const BridgeOptions& options);
  ~SlurmBridge();

  // One pass: reads the cluster, registers new nodes, beats for the live ones with their members'
  // reports, submits complete gangs, cancels what the control plane no longer wants, fences nodes past
  // their lease. Errors are per node or per gang and logged; the pass itself fails only when slurmrestd
  // cannot be read (Unavailable), and then beats for no node.
  absl::Status Tick();

  // Cancels every Slurm job the bridge started that is still active (as an agent stops its workloads when it
  // stops); the control plane re-places them once the nodes' leases run out.
  void StopAll();

  // The heartbeat interval the control plane asked for (1 s before the first registration).
  Duration interval() const { return interval_; }

 private:
  struct Node;
  struct Gang;
  explicit SlurmBridge(const BridgeOptions& options);

  absl::Status RegisterNode(Node& node);
  void BeatNode(Node& node);
  void UpdateNodes(const std::vector<SlurmNode>& nodes);
  void Adopt();
  void CollectAssignments();
  void SubmitGangs();
  bool SubmitGang(Gang& g);
  void FollowGangs();
  void FenceExpired();
  bool LeaseHeld(const Node& node) const;
  std::vector<api::WorkloadReport> ReportsFor(const Node& node) const;
  std::vector<api::LogChunk> LogsFor(const Node& node, std::vector<std::pair<Gang*, uint64_t>>& advance);

  BridgeOptions options_;
  Clock* clock_;
  std::unique_ptr<SlurmRest> slurm_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;     // by pool node name
  std::map<std::pair<std::string, int64_t>, Gang> gangs_;  // by (job id, epoch)
  std::map<std::string, int64_t> newest_epoch_;            // by job id: the highest epoch seen
  std::set<std::string> unmapped_logged_;
  Duration interval_ = std::chrono::seconds(1);
  int lock_fd_ = -1;                          // flock on state_dir/lock, held for the bridge's life
  bool adopted_ = false;                      // the Slurm jobs of an earlier run were looked up
  std::optional<MonoTime> slurm_down_since_;  // slurmrestd unreadable since
};

}  // namespace gpugeek::backends::slurm
