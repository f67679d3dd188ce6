#pragma once
// What the store keeps of hyper-parameter experiments (controlplane/controllers/experiment.h): the
// experiment as submitted, one row per trial (its point, its job, its outcome) and the metrics trials
// report per step (agent/workload_listener.h `POST /v1/report`), so a restarted control plane resumes
// every search where it was and loses no reported value.

#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"

namespace gpugeek::store {

struct ExperimentRecord {
  std::string id;         // unique, chosen by the caller ("x-000003")
  std::string tenant;     // owning tenant; "" = default tenant
  std::string user;       // who submitted it (its trials are submitted as that user)
  std::string name;       // hpo::ExperimentSpec::name
  std::string spec_yaml;  // as accepted; sealed at rest like a job's spec
  // running | stopping (asked to stop: no new trials, running ones cancelled) | succeeded (the budget
  // is spent and every trial ended) | stopped | failed (the spec or a trial submission was refused).
  std::string state = "running";
  std::string reason;  // why it is in that state
  TimePoint created_at;
  TimePoint updated_at;
  int64_t version = 0;  // set by the store; bumped on every write
};

struct TrialRecord {
  std::string experiment_id;
  int64_t number = 0;       // 0, 1, 2, ... in the order asked
  std::string params_json;  // hpo::SearchSpace::PointToJson, compact
  // running | complete | pruned | failed (hpo::TrialState's names)
  std::string state = "running";
  std::string job_id;           // its job; "" until the job is stored
  std::optional<double> value;  // the final value as reported (complete trials)
  std::string reason;           // why pruned or failed
  TimePoint created_at;
  TimePoint updated_at;
};

// One value a member reported at one step. Each member numbers its reports 0, 1, 2, ... within a
// placement (seq), so an agent that resends after a lost reply or a server restart stores nothing twice.
struct MetricReportRecord {
  int64_t id = 0;  // set by the store: strictly increasing in commit order
  std::string job_id;
  int64_t epoch = 0;
  int node_rank = 0;
  int64_t seq = 0;
  int64_t step = 0;
  double value = 0;
  TimePoint reported_at;  // when the server stored it (wall clock)
};

// Store::ListExperiments: ids strictly after `after_id`, ascending, at most `limit` (1..10000).
struct ExperimentFilter {
  std::string tenant;  // "" = every tenant's
  std::string state;   // "" = any state
  std::string after_id;
  int limit = 100;
};

}  // namespace gpugeek::store
