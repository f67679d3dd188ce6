#pragma once
// ExperimentController: hyper-parameter experiments (hpo::ExperimentSpec, docs/hpo.md) reconciled toward
// their budget. It is a client of the control plane, as Kubernetes' controllers are of the API server:
// trials are jobs submitted through admission (ControlPlane::Submit, as the experiment's user, with
// GPUGEEK_EXPERIMENT / GPUGEEK_TRIAL_ID / GPUGEEK_PARAMS as platform variables) and stopped through
// ControlPlane::Cancel (SIGTERM, the trial's checkpoint grace, SIGKILL). It runs on its own thread and
// keeps each live experiment's hpo::Study in memory; what it decides is stored first:
//
//   ask      a trial row (number, point) is stored, then its job submitted, then the row names the job;
//            after a crash between the two a job named NAME-tN carrying the trial's variables is adopted
//   report   members' metric reports (store::MetricReportRecord, stored by the job lifecycle controller
//            from heartbeats) are read in commit order and handed to Study::Report; a prune verdict
//            stores the trial PRUNED, then cancels its job, so its GPUs go back at the next heartbeat
//   end      a trial whose job SUCCEEDED completes with its last reported value (FAILED when it
//            reported none); a job that failed or was cancelled by someone else fails the trial
//   budget   new trials while fewer than `parallelism` run, fewer than budget.trials were asked, and the
//            trials' GPU time (metered, controlplane/usage.h) is under budget.gpu_time; the experiment
//            SUCCEEDS when the budget is spent and no trial runs
//   stop     (POST /v1/experiments/{id}/stop) running trials fail "experiment stopped", their jobs are
//            cancelled, the experiment is STOPPED
//
// A restarted server rebuilds every live search from the store (LoadSearch): trials, their points and
// every stored report, so no reported value is lost and the budget is finished.
// Thread-safety: Create and Stop from any thread (they only write the store and wake the loop);
// Reconcile from the loop's thread only.

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "hpo/experiment_spec.h"
#include "hpo/study.h"
#include "store/store.h"

namespace gpugeek::controlplane {

class ControlPlane;

// A search as the store holds it: the parsed spec, the study restored from its trials and reports, and
// per trial its record and the id of the last report taken.
struct LoadedSearch {
  store::ExperimentRecord record;
  hpo::ExperimentSpec spec;
  std::unique_ptr<hpo::Study> study;
  std::vector<store::TrialRecord> trials;  // by number
  std::vector<int64_t> last_report_id;     // by number
};

// Reads the experiment's trials and their reports from `store` and restores its study. Reports whose step
// does not exceed the trial's last one (a trial resumed from a checkpoint reports some steps again) are
// skipped. InvalidArgument when the stored spec no longer parses; the store's errors.
absl::StatusOr<LoadedSearch> LoadSearch(store::Store& store, const store::ExperimentRecord& record);

class ExperimentController {
 public:
  ExperimentController(ControlPlane& control_plane, store::Store& store, Clock& clock);

  // Validates the spec (InvalidArgument naming the field, as hpo::ParseExperimentSpec), stores the
  // experiment running and wakes the loop. `tenant` and `user` own it and its trials.
  absl::StatusOr<store::ExperimentRecord> Create(const std::string& spec_yaml, const std::string& tenant,
                                                 const std::string& user);
  // Asks a running experiment to stop (state stopping; the loop cancels its trials). FailedPrecondition
  // for one already ended; NotFound for an unknown id.
  absl::StatusOr<store::ExperimentRecord> Stop(const std::string& id, const std::string& reason);

  // One pass over the live experiments (the loop's thread only). Store errors are logged and retried on
  // the next pass.
  void Reconcile();
  // Blocks until Create, Stop or Wake wakes it, or `timeout` passes.
  void WaitForWork(Duration timeout);
  void Wake();

  static constexpr int kMaxLiveExperiments = 10'000;

 private:
  struct Search {
    LoadedSearch loaded;
    int64_t done_gpu_milli_seconds = 0;  // metered GPU time of the trials that ended
  };
  absl::Status ReconcileOne(Search& search);
  absl::Status ReconcileTrial(Search& search, store::TrialRecord& trial, int64_t* running_gpu_milli_seconds);
  // Submits the trial's job, or adopts one a crash left behind.
  absl::Status Launch(Search& search, store::TrialRecord& trial);
  absl::Status EndTrial(Search& search, store::TrialRecord& trial, hpo::TrialState state, std::optional<double> value,
                        const std::string& reason);
  absl::Status Finish(Search& search, const std::string& state, const std::string& reason);
  std::string NewId();

  ControlPlane& cp_;
  store::Store& store_;
  Clock& clock_;
  std::map<std::string, Search> searches_;  // the loop's thread only

  std::mutex id_mu_;
  int64_t next_id_ = 0;  // guarded by id_mu_; 0 until read from the store

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool work_ = false;  // guarded by wake_mu_
};

}  // namespace gpugeek::controlplane
