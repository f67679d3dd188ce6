#pragma once
// ControlPlaneOptions: what `gpugeek server` configures in the control plane (control_plane.h).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "api/price_table.h"
#include "api/region_latency.h"
#include "common/clock.h"

namespace gpugeek::hw {
class GpuCatalog;
}
namespace gpugeek::metrics {
class Registry;
}
namespace gpugeek::store {
class Store;
}
namespace gpugeek::crypto {
class Keyring;
}

namespace gpugeek::controlplane {

// The marketplace's money (billing.h).
struct BillingOptions {
  // Credit granted to each tenant (at creation, and at start to every tenant without it), in micro-units;
  // 0 = none. `gpugeek server --trial-credit 25.00`.
  int64_t trial_credit_micros = 0;
  // How long a trial credit lasts (`--trial-credit-days`); zero = forever.
  Duration trial_credit_ttl = std::chrono::hours(24 * 30);
  // The platform's fee on a provider's sale, in basis points 0..10000 (`--platform-fee-bps 1500` = 15%).
  int64_t platform_fee_bps = 0;
  // Serverless prices (controllers/serving_meter.h), in micro-units per million requests a service's gateways
  // answer and per million tokens its replicas report (`--price-per-million-requests 0.20`,
  // `--price-per-million-tokens 0.50`); 0 = requests are counted but not charged. The replicas' GPU time is
  // charged as any job's.
  int64_t price_per_million_requests_micros = 0;
  int64_t price_per_million_tokens_micros = 0;
  // Whether a tenant with nothing left to spend is refused new work (402) and its running work stopped
  // (`--enforce-budgets`). Off: usage is charged and may run a tenant's cash below zero.
  bool enforce = false;
};

struct ControlPlaneOptions {
  store::Store* store = nullptr;  // borrowed; must outlive the control plane
  Clock* clock = nullptr;         // nullptr = RealClock()
  std::string data_dir;           // job logs under <data_dir>/logs
  // Seals the job logs under each job's tenant's data key (LogStore); borrowed, must outlive the control
  // plane. nullptr: logs are stored raw (embedding and tests; the server always passes its keyring).
  crypto::Keyring* keyring = nullptr;
  // Placement policy of sched's Registry. FGD-style policies use the typical pods of the jobs seen
  // so far; until there are any, BestFit places.
  std::string policy = "FGDFit";
  uint64_t seed = 42;
  int64_t topology_weight = 10;  // prefer one NVLink domain for multi-GPU members
  Duration heartbeat_interval = std::chrono::seconds(1);
  // The fencing timeline (control_plane.h): a node whose lease is not renewed for `lease` is suspect;
  // its agent then stops its members within `fence_grace`; after lease + fence_grace + fence_margin
  // the node is down and its members presumed stopped. Requires lease > heartbeat_interval.
  // Defaults: suspect after two missed 1 s beats, down at 3 s; a silent node's members get 0.5 s from
  // SIGTERM to SIGKILL (a planned stop still gets the job's checkpoint grace).
  Duration lease = std::chrono::seconds(2);
  Duration fence_grace = std::chrono::milliseconds(500);
  Duration fence_margin = std::chrono::milliseconds(500);
  // A GPU that raised a hardware XID (controllers/gpu_health.h) is not placed on for this long after the
  // last one; conditions its samples keep showing (lost, uncorrectable ECC, a pending page retirement)
  // hold it for as long as they last.
  Duration gpu_quarantine = std::chrono::minutes(10);
  // A node lost (down) this many times within block_window is blocked from new placements for block_for:
  // a flapping node should not keep taking work it then loses (0 = never block).
  int block_after_losses = 3;
  Duration block_window = std::chrono::hours(1);
  Duration block_for = std::chrono::minutes(30);
  // After a reclaim notice on a node of a region (ControlPlane::Reclaim), jobs are placed outside that
  // region for this long when they fit elsewhere (SkyPilot and dstack users report recovery straight back
  // into the region just reclaimed).
  Duration reclaim_avoid = std::chrono::minutes(10);
  // The provider's GPU-hour prices (api/price_table.h): a node whose agent names no price
  // (--gpu-hour-price) gets the price of its GPU model and capacity type from here.
  api::PriceTable gpu_hour_prices;
  // Credits, charges, fees and budgets (billing.h).
  BillingOptions billing;
  // Round trips between regions (api/region_latency.h, --region-latency): a job whose data lives in one
  // region (its checkpoint's, or resources.data_region) is placed there first, then nearest first.
  api::RegionLatency region_latency;
  // Log bytes kept per job (LogStore); output past it is dropped with a marker line.
  uint64_t log_quota_bytes = uint64_t{1} << 30;
  // Logs, and the log grants of released allocations, of jobs ended longer ago than this are deleted.
  Duration log_retention = std::chrono::hours(24 * 7);
  // The state-change events of jobs ended longer ago than this are deleted (the job rows stay).
  Duration event_retention = std::chrono::hours(24 * 30);
  // Audit records (audit_log.h) older than this are deleted.
  Duration audit_retention = std::chrono::hours(24 * 365);
  // How long after its release an allocation's nodes may still ship log bytes for it.
  Duration log_grant_retention = std::chrono::minutes(10);
  // Half-life of the tenants' decayed GPU usage behind fair share (sched/quota.h; Slurm's
  // PriorityDecayHalfLife, default 7 days); 0 = no decay. Must not be negative.
  Duration fair_share_half_life = std::chrono::hours(24 * 7);
  // The decayed usage is written to the store at most this often (by the writer's pass) and at
  // destruction, so a restart loses at most this much of it.
  Duration usage_save_interval = std::chrono::seconds(60);
  const hw::GpuCatalog* catalog = nullptr;  // nullptr = GpuCatalog::Builtin()
  // Where the server metrics of docs/metrics.md go (controlplane/metrics.h); nullptr = none. Borrowed;
  // one control plane per registry, and no Render() after the control plane is destroyed (its
  // collectors read it).
  metrics::Registry* metrics = nullptr;
  // Whether `tenant` has uploaded the workdir archive `digest` (archive_store.h): a spec whose
  // workdir_digest the tenant has not uploaded is refused at submission. Empty: every such spec is refused.
  std::function<bool(const std::string& tenant, const std::string& digest)> has_archive;
  // The commit digest revision `rev` of the tenant's dataset `dataset` names (dataset_store.h): a spec's
  // `dataset:` is resolved at submission, and refused with this error. Empty: such specs are refused.
  std::function<absl::StatusOr<std::string>(const std::string& tenant, const std::string& dataset,
                                            const std::string& rev)>
      resolve_dataset;
  // The commit digest of a spec's `weights:` (model_routes.h ResolveModelFor), for `tenant` needing the
  // right to deploy (`finetune` = false) or fine-tune; the model's owner ("" = the tenant) as written.
  // With the spec's `engine` format ("" = none), the version must hold a file of it. Another tenant's model
  // counts as pulled by `user` (its pull log). Empty: such specs are refused.
  std::function<absl::StatusOr<std::string>(const std::string& tenant, const std::string& user,
                                            const std::string& owner, const std::string& model, const std::string& rev,
                                            bool finetune, const std::string& engine)>
      resolve_weights;

  // When a silent node is down: lease + fence_grace + fence_margin.
  Duration node_down_after() const { return lease + fence_grace + fence_margin; }
};

}  // namespace gpugeek::controlplane
