#include "controlplane/experiment_routes.h"

#include <cmath>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/paging.h"
#include "hpo/report.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

J Number(double v) { return std::isfinite(v) ? J(v) : J(nullptr); }

absl::Status NoExperiment(const std::string& id) {
  return absl::NotFoundError(fmt::format("store: no experiment '{}'", id));
}

// The experiment, when the caller may see it.
absl::StatusOr<store::ExperimentRecord> Visible(store::Store& store, const Principal& who, const std::string& id) {
  absl::StatusOr<store::ExperimentRecord> e = store.GetExperiment(id);
  if (!e.ok() || !who.CanSee(e->tenant)) return NoExperiment(id);
  return e;
}

// The loaded search with each trial's metered GPU time.
struct Detailed {
  LoadedSearch search;
  std::vector<double> gpu_seconds;  // by trial number
  double total_gpu_seconds = 0;
};

absl::StatusOr<Detailed> Detail(store::Store& store, ControlPlane& cp, const store::ExperimentRecord& record) {
  Detailed d;
  ASSIGN_OR_RETURN(d.search, LoadSearch(store, record));
  for (const store::TrialRecord& t : d.search.trials) {
    double seconds = 0;
    if (!t.job_id.empty()) {
      if (absl::StatusOr<JobView> job = cp.GetJob(t.job_id); job.ok()) {
        for (const UsageLine& line : job->usage) seconds += static_cast<double>(line.gpu_milli_seconds) / 1000;
      }
    }
    d.gpu_seconds.push_back(seconds);
    d.total_gpu_seconds += seconds;
  }
  return d;
}

J Summary(const Detailed& d) {
  const LoadedSearch& s = d.search;
  const hpo::ExperimentSpec& spec = s.spec;
  J counts = {{"running", 0}, {"complete", 0}, {"pruned", 0}, {"failed", 0}};
  for (const store::TrialRecord& t : s.trials) counts[t.state] = counts.value(t.state, 0) + 1;
  return {{"id", s.record.id},
          {"name", s.record.name},
          {"tenant", s.record.tenant},
          {"user", s.record.user},
          {"state", s.record.state},
          {"reason", s.record.reason},
          {"metric", spec.metric},
          {"direction", spec.direction == hpo::Direction::kMaximize ? "maximize" : "minimize"},
          {"budget", {{"trials", spec.trials}, {"gpu_seconds", spec.max_gpu_seconds}}},
          {"parallelism", spec.parallelism},
          {"sampler", spec.sampler},
          {"pruner", spec.pruner.name},
          {"counts", counts},
          {"gpu_seconds", d.total_gpu_seconds},
          {"created_at", FormatTime(s.record.created_at)},
          {"updated_at", FormatTime(s.record.updated_at)},
          {"spec_yaml", s.record.spec_yaml}};
}

J TrialJson(const Detailed& d, const store::TrialRecord& t) {
  const hpo::Study& study = *d.search.study;
  const hpo::Trial& trial = study.trials()[static_cast<size_t>(t.number)];
  J out = {
      {"number", t.number},
      {"state", t.state},
      {"params", J::parse(t.params_json, nullptr, false)},
      {"value", t.value ? J(*t.value) : J(nullptr)},
      {"job_id", t.job_id},
      {"reason", t.reason},
      {"last_step", trial.intermediate.empty() ? J(nullptr) : J(trial.intermediate.back().first)},
      {"last_value", trial.intermediate.empty() ? J(nullptr) : Number(study.ValueOf(trial.intermediate.back().second))},
      {"gpu_seconds", d.gpu_seconds[static_cast<size_t>(t.number)]}};
  return out;
}

absl::StatusOr<Reply> Create(ExperimentController& experiments, store::Store& store, ControlPlane& cp,
                             const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"spec_yaml"}));
  ASSIGN_OR_RETURN(const std::string spec_yaml, reader.String("spec_yaml"));
  ASSIGN_OR_RETURN(const store::ExperimentRecord record, experiments.Create(spec_yaml, who.tenant, who.user));
  ASSIGN_OR_RETURN(const Detailed d, Detail(store, cp, record));
  return Reply::Json(Summary(d), 201);
}

absl::StatusOr<Reply> List(store::Store& store, ControlPlane& cp, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const int limit, PageLimit(r));
  store::ExperimentFilter filter{.tenant = who.admin() ? r.query_value("tenant") : who.tenant,
                                 .state = r.query_value("state"),
                                 .after_id = r.query_value("after"),
                                 .limit = limit + 1};
  ASSIGN_OR_RETURN(std::vector<store::ExperimentRecord> page, store.ListExperiments(filter));
  J list = J::array();
  J next = nullptr;
  for (size_t i = 0; i < page.size() && static_cast<int>(i) < limit; ++i) {
    ASSIGN_OR_RETURN(const Detailed d, Detail(store, cp, page[i]));
    J summary = Summary(d);
    summary.erase("spec_yaml");
    list.push_back(std::move(summary));
  }
  if (static_cast<int>(page.size()) > limit) next = page[static_cast<size_t>(limit) - 1].id;
  return Reply::Json({{"experiments", list}, {"next_after", next}});
}

absl::StatusOr<Reply> Get(store::Store& store, ControlPlane& cp, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ExperimentRecord record, Visible(store, who, r.param("id")));
  ASSIGN_OR_RETURN(const Detailed d, Detail(store, cp, record));
  J out = Summary(d);
  const hpo::Study& study = *d.search.study;
  ASSIGN_OR_RETURN(const int limit, PageLimit(r));
  int64_t after = -1;
  if (const std::string a = r.query_value("after"); !a.empty() && !absl::SimpleAtoi(a, &after)) {
    return absl::InvalidArgumentError(fmt::format("query parameter 'after' = '{}' must be a trial number", a));
  }
  J trials = J::array();
  J next = nullptr;
  for (const store::TrialRecord& t : d.search.trials) {
    if (t.number <= after) continue;
    if (static_cast<int>(trials.size()) == limit) {
      next = trials.back()["number"];
      break;
    }
    trials.push_back(TrialJson(d, t));
  }
  out["trials"] = std::move(trials);
  out["next_after"] = std::move(next);
  J best_so_far = J::array();
  for (double loss : hpo::BestSoFar(study.trials())) best_so_far.push_back(Number(study.ValueOf(loss)));
  out["best_so_far"] = std::move(best_so_far);
  J importance = J::array();
  for (const hpo::Importance& i : hpo::ParameterImportance(study.space(), study.trials())) {
    importance.push_back(
        {{"param", i.param}, {"share", i.share}, {"eta_squared", i.eta_squared}, {"trials", i.trials}});
  }
  out["importance"] = std::move(importance);
  if (const hpo::Trial* best = study.Best()) {
    out["best"] = {{"number", best->number},
                   {"value", study.ValueOf(*best->value)},
                   {"params", study.space().PointToJson(best->params)}};
  } else {
    out["best"] = nullptr;
  }
  return Reply::Json(out);
}

absl::StatusOr<Reply> GetTrial(store::Store& store, ControlPlane& cp, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ExperimentRecord record, Visible(store, who, r.param("id")));
  ASSIGN_OR_RETURN(const Detailed d, Detail(store, cp, record));
  int64_t number = -1;
  if (!absl::SimpleAtoi(r.param("number"), &number) || number < 0 ||
      number >= static_cast<int64_t>(d.search.trials.size())) {
    return absl::NotFoundError(fmt::format("experiment {} has no trial '{}'", record.id, r.param("number")));
  }
  J out = TrialJson(d, d.search.trials[static_cast<size_t>(number)]);
  const hpo::Study& study = *d.search.study;
  J intermediate = J::array();
  for (const auto& [step, loss] : study.trials()[static_cast<size_t>(number)].intermediate) {
    intermediate.push_back({step, study.ValueOf(loss)});
  }
  out["intermediate"] = std::move(intermediate);
  return Reply::Json(out);
}

absl::StatusOr<Reply> Export(store::Store& store, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ExperimentRecord record, Visible(store, who, r.param("id")));
  ASSIGN_OR_RETURN(const LoadedSearch s, LoadSearch(store, record));
  return Reply::Text(hpo::TrialsCsv(*s.study), "text/csv; charset=utf-8");
}

absl::StatusOr<Reply> StopExperiment(ExperimentController& experiments, store::Store& store, ControlPlane& cp,
                                     const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ExperimentRecord record, Visible(store, who, r.param("id")));
  ASSIGN_OR_RETURN(const store::ExperimentRecord stopped,
                   experiments.Stop(record.id, fmt::format("stopped by {}", who.user)));
  ASSIGN_OR_RETURN(const Detailed d, Detail(store, cp, stopped));
  return Reply::Json(Summary(d));
}

}  // namespace

void RegisterExperimentRoutes(http::Server& server, Accounts& accounts, ControlPlane& cp, store::Store& store,
                              ExperimentController& experiments) {
  GuardedRoute(server, accounts, "POST", "/v1/experiments",
               [&](const Principal& who, const Request& r) { return Create(experiments, store, cp, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/experiments",
               [&](const Principal& who, const Request& r) { return List(store, cp, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/experiments/{id}",
               [&](const Principal& who, const Request& r) { return Get(store, cp, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/experiments/{id}/trials/{number}",
               [&](const Principal& who, const Request& r) { return GetTrial(store, cp, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/experiments/{id}/export",
               [&](const Principal& who, const Request& r) { return Export(store, who, r); });
  GuardedRoute(server, accounts, "POST", "/v1/experiments/{id}/stop",
               [&](const Principal& who, const Request& r) { return StopExperiment(experiments, store, cp, who, r); });
}

}  // namespace gpugeek::controlplane
