#pragma once
// ControlPlaneMetrics: the control plane's instruments, exactly the "Server" half of docs/metrics.md
// (names, types and labels are that contract; the text format is metrics/registry.h's).
//
// Counted where the control plane commits a change (ControlPlane calls these):
//   gpugeek_job_transitions_total{from,to}, gpugeek_job_submissions_total{result=accepted|rejected},
//   gpugeek_job_recovery_duration_seconds (failure -> RUNNING again), gpugeek_job_recovery_phase_seconds{phase=
//   detect|stop|place|start} (recovery.h), gpugeek_scheduling_cycle_duration_seconds
//   (one scheduling pass, timed with the control plane's Clock), gpugeek_scheduling_placements_total{policy},
//   gpugeek_http_request_duration_seconds{method,route,code} (the HTTP server's observer),
//   gpugeek_build_info{version} 1.
// Read at scrape time by collectors over the control plane (RegisterCollectors):
//   gpugeek_node_up{node,capacity_type,region}, gpugeek_node_cordoned{node},
//   gpugeek_node_heartbeat_age_seconds{node}; per (model, capacity_type) of the schedulable pool
//   (ControlPlane::Pool: nodes up and not cordoned) gpugeek_pool_gpus, _gpus_allocated, _gpus_free,
//   gpugeek_pool_capacity_milligpus, gpugeek_pool_allocated_milligpus, gpugeek_pool_fragmentation_milligpus,
//   gpugeek_pool_unallocatable_gpus, and gpugeek_pool_fragmentation_ratio; gpugeek_jobs{state,priority} and
//   gpugeek_jobs_oldest_pending_age_seconds from one aggregate store query (Store::CountJobs), never a
//   listing of the jobs.
//
// Thread-safety: every method may be called from any thread.

#include <string>

#include "api/job_state.h"
#include "common/clock.h"
#include "controlplane/recovery.h"
#include "metrics/registry.h"

namespace gpugeek::controlplane {

class ControlPlane;

class ControlPlaneMetrics {
 public:
  // Adds the instrument families to `registry` (which must outlive this object). One control plane
  // per registry: a second would write every family twice.
  explicit ControlPlaneMetrics(metrics::Registry& registry);

  // Adds the collectors that read `cp` at scrape time. `cp` must outlive every later Render().
  void RegisterCollectors(ControlPlane& cp);

  void Transition(api::JobState from, api::JobState to);
  void Submission(bool accepted);
  void Recovered(const RecoveryPhases& phases);
  void SchedulingCycle(Duration elapsed);
  void Placed(const std::string& policy);
  // A node was declared down (gpugeek_nodes_lost_total).
  void NodeLost();
  // Exports gpugeek_scheduling_placements_total{policy} at 0 before the first placement.
  void DeclarePolicy(const std::string& policy);
  // An HTTP request finished (http::RequestObserver); `route` is the pattern, e.g. "/v1/jobs/{id}".
  void HttpRequest(const std::string& method, const std::string& route, int status, Duration elapsed);

  metrics::Registry& registry() { return registry_; }

 private:
  metrics::Registry& registry_;
  metrics::Family<metrics::Counter>& transitions_;
  metrics::Family<metrics::Counter>& submissions_;
  metrics::Family<metrics::Histogram>& recovery_;
  metrics::Family<metrics::Histogram>& recovery_phase_;
  metrics::Family<metrics::Histogram>& scheduling_cycle_;
  metrics::Family<metrics::Counter>& placements_;
  metrics::Family<metrics::Counter>& nodes_lost_;
  metrics::Family<metrics::Histogram>& http_requests_;
  metrics::Family<metrics::Gauge>& build_info_;
};

}  // namespace gpugeek::controlplane
