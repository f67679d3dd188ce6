#include "controlplane/controllers/experiment.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "api/job_spec.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/control_plane.h"
#include "hpo/report.h"

namespace gpugeek::controlplane {
namespace {

constexpr int kReportPage = 1000;

std::optional<hpo::TrialState> ParseTrialState(const std::string& name) {
  for (hpo::TrialState s :
       {hpo::TrialState::kRunning, hpo::TrialState::kComplete, hpo::TrialState::kPruned, hpo::TrialState::kFailed}) {
    if (hpo::TrialStateName(s) == name) return s;
  }
  return std::nullopt;
}

bool Live(const std::string& state) { return state == "running" || state == "stopping"; }

int64_t GpuMilliSeconds(const Usage& usage) {
  int64_t total = 0;
  for (const UsageLine& line : usage) total += line.gpu_milli_seconds;
  return total;
}

absl::StatusOr<hpo::ExperimentSpec> ParseStored(const store::ExperimentRecord& record) {
  absl::StatusOr<hpo::ExperimentSpec> spec = hpo::ParseExperimentSpec(record.spec_yaml);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("experiment {}: its stored spec no longer parses: {}", record.id, spec.status().message()));
  }
  return spec;
}

}  // namespace

absl::StatusOr<LoadedSearch> LoadSearch(store::Store& store, const store::ExperimentRecord& record) {
  LoadedSearch out;
  out.record = record;
  ASSIGN_OR_RETURN(out.spec, ParseStored(record));
  ASSIGN_OR_RETURN(std::unique_ptr<hpo::Sampler> sampler, hpo::MakeSampler(out.spec.sampler, out.spec.trials));
  ASSIGN_OR_RETURN(std::unique_ptr<hpo::Pruner> pruner, hpo::MakePruner(out.spec.pruner));
  out.study = std::make_unique<hpo::Study>(out.spec.space, out.spec.direction, std::move(sampler), std::move(pruner),
                                           out.spec.seed);
  ASSIGN_OR_RETURN(out.trials, store.ListTrials(record.id));
  std::vector<hpo::Trial> trials;
  for (const store::TrialRecord& t : out.trials) {
    const std::optional<hpo::TrialState> state = ParseTrialState(t.state);
    if (!state)
      return absl::DataLossError(fmt::format("trial {} of {}: unknown state '{}'", t.number, record.id, t.state));
    const nlohmann::json params = nlohmann::json::parse(t.params_json, nullptr, /*allow_exceptions=*/false);
    absl::StatusOr<hpo::Point> point = out.spec.space.PointFromJson(params);
    if (!point.ok()) {
      return absl::DataLossError(fmt::format("trial {} of {}: {}", t.number, record.id, point.status().message()));
    }
    hpo::Trial trial{.number = t.number, .state = *state, .params = *std::move(point), .value = t.value};
    int64_t last_id = 0;
    if (!t.job_id.empty()) {
      for (;;) {
        ASSIGN_OR_RETURN(std::vector<store::MetricReportRecord> page,
                         store.ListMetricReports(t.job_id, last_id, kReportPage));
        for (const store::MetricReportRecord& m : page) {
          last_id = m.id;
          if (m.step > trial.last_step()) trial.intermediate.emplace_back(m.step, m.value);
        }
        if (page.size() < static_cast<size_t>(kReportPage)) break;
      }
    }
    out.last_report_id.push_back(last_id);
    trials.push_back(std::move(trial));
  }
  RETURN_IF_ERROR(out.study->Restore(std::move(trials)));
  return out;
}

ExperimentController::ExperimentController(ControlPlane& control_plane, store::Store& store, Clock& clock)
    : cp_(control_plane), store_(store), clock_(clock) {}

std::string ExperimentController::NewId() {
  std::lock_guard<std::mutex> lock(id_mu_);
  if (next_id_ == 0) {
    next_id_ = 1;
    std::string after;
    for (;;) {
      absl::StatusOr<std::vector<store::ExperimentRecord>> page =
          store_.ListExperiments({.after_id = after, .limit = 10000});
      if (!page.ok() || page->empty()) break;
      after = page->back().id;
      int64_t n = 0;
      if (after.size() > 2 && absl::SimpleAtoi(after.substr(2), &n)) next_id_ = std::max(next_id_, n + 1);
      if (page->size() < 10000) break;
    }
  }
  return fmt::format("x-{:06d}", next_id_++);
}

absl::StatusOr<store::ExperimentRecord> ExperimentController::Create(const std::string& spec_yaml,
                                                                     const std::string& tenant,
                                                                     const std::string& user) {
  ASSIGN_OR_RETURN(const hpo::ExperimentSpec spec,
                   hpo::ParseExperimentSpec(spec_yaml, cp_.options().catalog != nullptr ? *cp_.options().catalog
                                                                                        : hw::GpuCatalog::Builtin()));
  store::ExperimentRecord record{.id = NewId(),
                                 .tenant = tenant,
                                 .user = user,
                                 .name = spec.name,
                                 .spec_yaml = spec_yaml,
                                 .state = "running",
                                 .reason = fmt::format("submitted by {}", user.empty() ? "the server" : user)};
  ASSIGN_OR_RETURN(store::ExperimentRecord stored, store_.CreateExperiment(record));
  Wake();
  return stored;
}

absl::StatusOr<store::ExperimentRecord> ExperimentController::Stop(const std::string& id, const std::string& reason) {
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(store::ExperimentRecord record, store_.GetExperiment(id));
    if (!Live(record.state)) {
      return absl::FailedPreconditionError(fmt::format("experiment {} has ended ({})", id, record.state));
    }
    if (record.state == "stopping") return record;
    record.state = "stopping";
    record.reason = reason;
    absl::StatusOr<store::ExperimentRecord> stored = store_.UpdateExperiment(record);
    // The controller moved it meanwhile: read it again.
    if (stored.status().code() == absl::StatusCode::kAborted && attempt < 8) continue;
    if (stored.ok()) Wake();
    return stored;
  }
}

void ExperimentController::Wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    work_ = true;
  }
  wake_cv_.notify_all();
}

void ExperimentController::WaitForWork(Duration timeout) {
  std::unique_lock<std::mutex> lock(wake_mu_);
  wake_cv_.wait_for(lock, timeout, [this] { return work_; });
  work_ = false;
}

void ExperimentController::Reconcile() {
  std::map<std::string, store::ExperimentRecord> live;
  for (const char* state : {"running", "stopping"}) {
    absl::StatusOr<std::vector<store::ExperimentRecord>> page =
        store_.ListExperiments({.state = state, .limit = kMaxLiveExperiments});
    if (!page.ok()) {
      spdlog::warn("experiments: cannot list {} experiments: {}", state, page.status());
      return;
    }
    for (store::ExperimentRecord& r : *page) live.emplace(r.id, std::move(r));
  }
  std::erase_if(searches_, [&](const auto& entry) { return !live.contains(entry.first); });
  for (auto& [id, record] : live) {
    auto it = searches_.find(id);
    if (it == searches_.end()) {
      absl::StatusOr<LoadedSearch> loaded = LoadSearch(store_, record);
      if (!loaded.ok()) {
        spdlog::warn("experiments: {}", loaded.status());
        if (loaded.status().code() == absl::StatusCode::kInvalidArgument) {
          record.state = "failed";
          record.reason = std::string(loaded.status().message());
          (void)store_.UpdateExperiment(record);
        }
        continue;
      }
      Search search{.loaded = *std::move(loaded)};
      // Metered GPU time of the trials that ended; trials the store shows ended but whose job still
      // runs (a crash between the two writes) are cancelled again.
      for (const store::TrialRecord& t : search.loaded.trials) {
        if (t.state == "running" || t.job_id.empty()) continue;
        absl::StatusOr<JobView> job = cp_.GetJob(t.job_id);
        if (!job.ok()) continue;
        search.done_gpu_milli_seconds += GpuMilliSeconds(job->usage);
        if (!api::IsTerminal(job->record.state)) (void)cp_.Cancel(t.job_id, t.reason);
      }
      it = searches_.emplace(id, std::move(search)).first;
      spdlog::info("experiments: {} ({}) resumed with {} trials", id, record.name, it->second.loaded.trials.size());
    }
    it->second.loaded.record = record;
    if (absl::Status s = ReconcileOne(it->second); !s.ok()) spdlog::warn("experiments: {}: {}", id, s);
  }
}

absl::Status ExperimentController::ReconcileOne(Search& search) {
  LoadedSearch& s = search.loaded;
  const bool stopping = s.record.state == "stopping";
  int64_t running_gpu = 0;
  int running = 0;
  for (store::TrialRecord& trial : s.trials) {
    if (trial.state != "running") continue;
    if (stopping) {
      RETURN_IF_ERROR(EndTrial(search, trial, hpo::TrialState::kFailed, std::nullopt, "experiment stopped"));
      continue;
    }
    RETURN_IF_ERROR(ReconcileTrial(search, trial, &running_gpu));
    if (trial.state == "running") ++running;
  }
  if (stopping) return Finish(search, "stopped", s.record.reason);
  if (s.record.state != "running") return absl::OkStatus();

  const hpo::ExperimentSpec& spec = s.spec;
  const int64_t gpu_budget_milli_seconds = spec.max_gpu_seconds * 1000;
  auto budget_left = [&] {
    if (static_cast<int>(s.trials.size()) >= spec.trials) return false;
    return gpu_budget_milli_seconds == 0 || search.done_gpu_milli_seconds + running_gpu < gpu_budget_milli_seconds;
  };
  while (running < spec.parallelism && budget_left()) {
    const hpo::Trial& asked = s.study->Ask();
    store::TrialRecord trial{.experiment_id = s.record.id,
                             .number = asked.number,
                             .params_json = spec.space.PointToJson(asked.params).dump(),
                             .state = "running"};
    RETURN_IF_ERROR(store_.PutTrial(trial));
    s.trials.push_back(trial);
    s.last_report_id.push_back(0);
    RETURN_IF_ERROR(Launch(search, s.trials.back()));
    if (s.record.state != "running") return absl::OkStatus();  // the trial's job was refused
    ++running;
  }
  if (running == 0 && !budget_left()) {
    int complete = 0, pruned = 0, failed = 0;
    for (const store::TrialRecord& t : s.trials) {
      complete += t.state == "complete";
      pruned += t.state == "pruned";
      failed += t.state == "failed";
    }
    std::string why = static_cast<int>(s.trials.size()) >= spec.trials
                          ? fmt::format("{} trials run", s.trials.size())
                          : fmt::format("gpu_time budget spent ({:.0f} GPU-seconds)",
                                        static_cast<double>(search.done_gpu_milli_seconds) / 1000);
    why += fmt::format(": {} complete, {} pruned, {} failed", complete, pruned, failed);
    if (const hpo::Trial* best = s.study->Best()) {
      why += fmt::format("; best {} {:.6g} at trial {}", spec.metric, s.study->ValueOf(*best->value), best->number);
    }
    return Finish(search, "succeeded", why);
  }
  return absl::OkStatus();
}

absl::Status ExperimentController::Launch(Search& search, store::TrialRecord& trial) {
  LoadedSearch& s = search.loaded;
  const hpo::Trial& t = s.study->trials()[static_cast<size_t>(trial.number)];
  const api::JobSpec job = hpo::TrialJob(s.spec, trial.number, t.params);
  std::map<std::string, std::string> env = hpo::TrialEnv(s.spec, s.record.id, trial.number, t.params);
  // A job a crash left between the submission and the trial row naming it.
  absl::StatusOr<std::vector<JobView>> same_name = cp_.ListJobs({.tenant = s.record.tenant, .name = job.name});
  if (same_name.ok()) {
    for (const JobView& v : *same_name) {
      if (v.record.platform_env == env) {
        trial.job_id = v.record.id;
        return store_.PutTrial(trial);
      }
    }
  }
  absl::StatusOr<JobView> submitted = cp_.Submit({.spec_yaml = api::JobSpecToYaml(job),
                                                  .tenant = s.record.tenant,
                                                  .user = s.record.user,
                                                  .platform_env = std::move(env)});
  if (!submitted.ok()) {
    const absl::StatusCode code = submitted.status().code();
    if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kInternal ||
        code == absl::StatusCode::kAborted) {
      return submitted.status();  // the row stays without a job: submitted again on the next pass
    }
    // Admission refused the trial's job: every trial would be refused alike.
    const std::string why = fmt::format("trial {}'s job was refused: {}", trial.number, submitted.status().message());
    RETURN_IF_ERROR(EndTrial(search, trial, hpo::TrialState::kFailed, std::nullopt, why));
    for (store::TrialRecord& other : s.trials) {
      if (other.state == "running") {
        RETURN_IF_ERROR(EndTrial(search, other, hpo::TrialState::kFailed, std::nullopt, "experiment failed"));
      }
    }
    return Finish(search, "failed", why);
  }
  trial.job_id = submitted->record.id;
  spdlog::info("experiments: {} trial {} is job {} ({})", s.record.id, trial.number, trial.job_id, trial.params_json);
  return store_.PutTrial(trial);
}

absl::Status ExperimentController::ReconcileTrial(Search& search, store::TrialRecord& trial,
                                                  int64_t* running_gpu_milli_seconds) {
  LoadedSearch& s = search.loaded;
  if (trial.job_id.empty()) return Launch(search, trial);
  int64_t& last_id = s.last_report_id[static_cast<size_t>(trial.number)];
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<store::MetricReportRecord> page,
                     store_.ListMetricReports(trial.job_id, last_id, kReportPage));
    for (const store::MetricReportRecord& m : page) {
      last_id = m.id;
      absl::StatusOr<bool> prune = s.study->Report(trial.number, m.step, m.value);
      if (!prune.ok()) continue;  // a step again (resumed from a checkpoint): the first value stands
      if (*prune) {
        return EndTrial(
            search, trial, hpo::TrialState::kPruned, std::nullopt,
            fmt::format("pruned by {} at step {} ({} {:.6g})", s.spec.pruner.name, m.step, s.spec.metric, m.value));
      }
    }
    if (page.size() < static_cast<size_t>(kReportPage)) break;
  }
  ASSIGN_OR_RETURN(const JobView job, cp_.GetJob(trial.job_id));
  if (!api::IsTerminal(job.record.state)) {
    *running_gpu_milli_seconds += GpuMilliSeconds(job.usage);
    return absl::OkStatus();
  }
  search.done_gpu_milli_seconds += GpuMilliSeconds(job.usage);
  const hpo::Trial& t = s.study->trials()[static_cast<size_t>(trial.number)];
  if (job.record.state == api::JobState::kSucceeded) {
    if (t.intermediate.empty()) {
      return EndTrial(search, trial, hpo::TrialState::kFailed, std::nullopt,
                      fmt::format("job {} succeeded without reporting {} (gpugeek report --step N --value V)",
                                  trial.job_id, s.spec.metric));
    }
    return EndTrial(search, trial, hpo::TrialState::kComplete, s.study->ValueOf(t.intermediate.back().second), "");
  }
  return EndTrial(search, trial, hpo::TrialState::kFailed, std::nullopt,
                  fmt::format("job {} {}: {}", trial.job_id, api::JobStateName(job.record.state), job.record.reason));
}

absl::Status ExperimentController::EndTrial(Search& search, store::TrialRecord& trial, hpo::TrialState state,
                                            std::optional<double> value, const std::string& reason) {
  LoadedSearch& s = search.loaded;
  store::TrialRecord next = trial;
  next.state = std::string(hpo::TrialStateName(state));
  next.value = value;
  next.reason = reason;
  RETURN_IF_ERROR(store_.PutTrial(next));  // durable before the job is stopped
  trial = next;
  switch (state) {
    case hpo::TrialState::kComplete:
      RETURN_IF_ERROR(s.study->Tell(trial.number, *value));
      break;
    case hpo::TrialState::kPruned:
      RETURN_IF_ERROR(s.study->Prune(trial.number));
      break;
    default:
      RETURN_IF_ERROR(s.study->Fail(trial.number));
  }
  spdlog::info("experiments: {} trial {} {}{}", s.record.id, trial.number, trial.state,
               reason.empty() ? "" : ": " + reason);
  if (state != hpo::TrialState::kComplete && !trial.job_id.empty()) {
    absl::StatusOr<JobView> cancelled = cp_.Cancel(trial.job_id, reason);
    if (!cancelled.ok() && cancelled.status().code() != absl::StatusCode::kFailedPrecondition) {
      spdlog::warn("experiments: {} trial {}: cannot cancel job {}: {}", s.record.id, trial.number, trial.job_id,
                   cancelled.status());
    }
  }
  return absl::OkStatus();
}

absl::Status ExperimentController::Finish(Search& search, const std::string& state, const std::string& reason) {
  store::ExperimentRecord next = search.loaded.record;
  next.state = state;
  next.reason = reason;
  ASSIGN_OR_RETURN(search.loaded.record, store_.UpdateExperiment(next));
  spdlog::info("experiments: {} {}: {}", next.id, state, reason);
  return absl::OkStatus();
}

}  // namespace gpugeek::controlplane
