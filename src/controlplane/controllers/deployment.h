#pragma once
// DeploymentController: model services (api::ServiceSpec, docs/service-spec.md) reconciled toward their
// desired replicas. Like the experiment controller it is a client of the control plane: a replica is a job
// submitted through admission (ControlPlane::Submit, as the service's user) built from its version's job
// spec, named SERVICE-VERSION-ORDINAL, with the platform variables PORT (allocated here, 20000-29999, unique
// among the live replicas of every service), GPUGEEK_SERVICE and GPUGEEK_SERVICE_VERSION; it is stopped with
// ControlPlane::Cancel. What it decides is stored first (store/service_records.h):
//
//   launch    a replica row (version, ordinal, port) is stored, then its job submitted, then the row names
//             the job; after a crash between the two a job of that name carrying the replica's variables is
//             adopted
//   replace   a replica whose job ended (failed, succeeded, cancelled by someone else) is stored ENDED and
//             a new one (next ordinal) started, after a back-off of 1 s doubling to 60 s per version while
//             its replicas keep failing (reset when one becomes ready)
//   scale     desired replicas per version (ServiceRecord::desired): initial = replicas.initial split by
//             weight; POST .../scale and the autoscaler set them. Scaling down cancels the highest ordinals
//   update    a new spec of the same name (generation + 1): a version whose job spec changed gets new
//             replicas first; each old one is cancelled once a new one is READY (rolling update)
//   delete    every replica is cancelled; the service is DELETED
//   readiness each RUNNING replica is probed (HTTP GET of readiness.path on its node's address and port) on
//             the probe thread (Probe), with no lock held across the GET; READY after success_threshold
//             successes in a row, NOT_READY after failure_threshold failures; one not ready within
//             startup_budget (default 10 min) of its start is restarted
//   autoscale gateways report their load (ReportLoad); once a second per service a sched::Autoscaler fed
//             with in_flight + queued sets the total desired replicas, split across versions by weight
//
// A restarted server rebuilds every service from the store: replica rows name their jobs, which are
// adopted; readiness is probed again and back-offs start afresh.
// Thread-safety: every public method but Reconcile and Probe from any thread; Reconcile from one thread
// (the loop's), Probe from one thread (the prober's).

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "api/service_spec.h"
#include "common/clock.h"
#include "sched/autoscaler.h"
#include "store/store.h"

namespace gpugeek::controlplane {

class ControlPlane;

struct DeploymentOptions {
  int first_port = 20000;  // the replicas' ports, inclusive
  int last_port = 29999;
  Duration default_startup_budget = std::chrono::minutes(10);  // when the spec sets none
  Duration min_backoff = std::chrono::seconds(1);
  Duration max_backoff = std::chrono::seconds(60);
  Duration load_window = std::chrono::seconds(5);  // a gateway's report counts this long
};

// A replica as GET /v1/services/{name}/replicas shows it.
struct ReplicaView {
  std::string version;
  int64_t ordinal = 0;
  std::string job;
  std::string node;     // "" until placed
  std::string address;  // the node's address ("" until placed)
  int port = 0;
  std::string state;              // PENDING | STARTING | READY | NOT_READY | ENDED
  TimePoint since;                // when it entered that state (as far as this server saw)
  int64_t capacity_milli = 1000;  // GPUs of its allocation in milli-GPU; 1000 when it has none
};

// Splits `total` replicas across versions by weight percent, largest remainder first (ties: the spec's
// order); a version with weight > 0 gets at least 1 whenever total >= 1 (taken from the largest shares, or added
// when total is below the number of such versions: then the sum exceeds total).
std::map<std::string, int> SplitByWeight(int total, const std::vector<std::pair<std::string, int>>& weights);

// "v1=2,v2=1" <-> {v1: 2, v2: 1}.
std::string FormatDesired(const std::map<std::string, int>& desired);
std::map<std::string, int> ParseDesired(const std::string& text);

class DeploymentController {
 public:
  DeploymentController(ControlPlane& control_plane, store::Store& store, Clock& clock, DeploymentOptions options = {});

  // Validates the spec (InvalidArgument naming the field, as api::ParseServiceSpec). A new name stores the
  // service ACTIVE with replicas.initial split by weight; the name of an ACTIVE service of the same tenant
  // replaces its spec (generation + 1 when it differs; the desired total is kept and split by the new
  // weights). AlreadyExists when another tenant's ACTIVE service has that name (the gateways route by it).
  absl::StatusOr<store::ServiceRecord> Apply(const std::string& spec_yaml, const std::string& tenant,
                                             const std::string& user);
  // The ACTIVE service of that name (NotFound).
  absl::StatusOr<store::ServiceRecord> Find(const std::string& name);
  // Marks it DELETED (the loop cancels its replicas). NotFound for an unknown id.
  absl::StatusOr<store::ServiceRecord> Delete(const std::string& id, const std::string& reason);
  // Rewrites the spec's weights (every version not named gets 0): InvalidArgument naming the field for an
  // unknown version, a weight outside 0..100 or a sum other than 100. Generation + 1; the desired total is
  // split by the new weights. Returns the weights by version.
  absl::StatusOr<std::map<std::string, int>> SetTraffic(const std::string& id, const nlohmann::json& weights);
  // Sets the desired replicas of the named versions (others keep theirs): InvalidArgument naming the field
  // for an unknown version, a negative count, or a total outside replicas.min..replicas.max. Returns every
  // version's desired replicas.
  absl::StatusOr<std::map<std::string, int>> Scale(const std::string& id, const nlohmann::json& replicas,
                                                   const std::string& reason);
  // A gateway's load report (POST /v1/services/load): service name -> in flight and queued requests.
  // `served` (optional): per service and version, the requests that gateway answered since it started (counters).
  void ReportLoad(const std::string& gateway, const std::map<std::string, std::pair<double, double>>& load,
                  const std::map<std::string, std::map<std::string, uint64_t>>& served = {});
  // Requests answered per version of a service, summed over every gateway's last report (the observed split:
  // `gpugeek top`, GET /v1/services).
  std::map<std::string, uint64_t> Served(const std::string& service_name);
  // The summed load (in_flight + queued) of a service over the gateways that reported within load_window.
  double Load(const std::string& service_name);

  // Replicas of a service: those alive by version and ordinal, then (unless `live_only`) the last 20 ended.
  absl::StatusOr<std::vector<ReplicaView>> Replicas(const store::ServiceRecord& service, bool live_only = false);
  // GET /v1/endpoints: every ACTIVE service's READY replicas, in the gateways' route shape.
  absl::StatusOr<nlohmann::json> Routes();

  // One pass over the services (the loop's thread only). Store errors are logged and retried next pass.
  void Reconcile();
  // One round of readiness probes that are due (the prober's thread only), up to kParallelProbes at once; no
  // lock is held across a GET.
  void Probe();
  // Blocks until Apply, Delete, SetTraffic, Scale or Wake wakes it, or `timeout` passes.
  void WaitForWork(Duration timeout);
  void Wake();

  static constexpr int kMaxServices = 10'000;
  static constexpr size_t kParallelProbes = 16;

 private:
  // Readiness of one replica job (guarded by mu_).
  struct ProbeState {
    std::string url_base;  // "http://ADDRESS:PORT"
    api::ReadinessProbe probe;
    MonoTime started;     // first seen RUNNING
    MonoTime next_probe;  // due at
    bool in_flight = false;
    int successes = 0;  // in a row
    int failures = 0;   // in a row
    bool ready = false;
    bool ever_ready = false;
    TimePoint since;  // when `ready` last changed (or the probing began)
  };
  struct VersionBackoff {
    int failures = 0;
    MonoTime not_before;
  };
  struct GatewayLoad {
    MonoTime at;
    std::map<std::string, std::pair<double, double>> load;
    std::map<std::string, std::map<std::string, uint64_t>> served;
  };
  struct Autoscaled {
    std::unique_ptr<sched::Autoscaler> autoscaler;
    std::string spec_yaml;  // the spec it was built from
    MonoTime last;
    int decided = -1;           // its last decision (-1: none yet)
    std::string decided_split;  // that decision split by weight, as stored in ServiceRecord::desired
  };

  struct DueProbe {
    std::string job;
    std::string url_base;
    api::ReadinessProbe probe;
  };
  // Probes one replica and records the outcome (a thread of Probe's).
  void ProbeOne(const DueProbe& due);
  absl::Status ReconcileOne(const store::ServiceRecord& service, std::vector<store::ReplicaRecord>& all,
                            std::set<int>& ports_in_use);
  // Stores the replica ENDED, then cancels its job when `cancel`. Its port stays taken until the job's
  // allocation is released. The loop's thread only.
  absl::Status EndReplica(store::ReplicaRecord& replica, const std::string& reason, bool cancel);
  absl::Status Launch(const store::ServiceRecord& service, const api::ServiceSpec& spec,
                      const api::ServiceVersion& version, const std::string& digest, int64_t& next_ordinal,
                      std::set<int>& ports_in_use);
  // Feeds the service's autoscaler (once a second, while gateways report its load) and stores its decision
  // as the desired replicas; `service` is the stored record after it.
  absl::Status Autoscale(store::ServiceRecord& service, const api::ServiceSpec& spec, int ready);
  // Updates a service with compare-and-set, read again on Aborted.
  absl::StatusOr<store::ServiceRecord> Mutate(const std::string& id,
                                              const std::function<absl::Status(store::ServiceRecord&)>& change);
  absl::StatusOr<api::ServiceSpec> Parse(const std::string& yaml) const;
  std::string NewId();
  bool Ready(const std::string& job_id);

  ControlPlane& cp_;
  store::Store& store_;
  Clock& clock_;
  const DeploymentOptions options_;

  // The loop's thread only.
  std::map<std::string, VersionBackoff> backoff_;  // by "SERVICE_ID/VERSION"
  std::map<std::string, Autoscaled> autoscalers_;  // by service id
  std::set<std::string> known_;                    // the ACTIVE services of the last pass
  // Per ACTIVE service: the next ordinal of each version (read from every row at first sight).
  std::map<std::string, std::map<std::string, int64_t>> next_ordinal_;
  std::map<std::string, int> draining_;  // job id -> port: ended replicas whose job still holds its allocation
  bool scanned_deleted_ = false;         // the first pass looked at every DELETED service

  std::mutex mu_;
  std::map<std::string, ProbeState> probes_;     // by job id; guarded by mu_
  std::map<std::string, GatewayLoad> gateways_;  // by gateway id; guarded by mu_

  std::mutex apply_mu_;  // serializes Apply
  std::mutex id_mu_;
  int64_t next_id_ = 0;  // guarded by id_mu_; 0 until read from the store

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool work_ = false;  // guarded by wake_mu_
};

}  // namespace gpugeek::controlplane
