#include "hpo/experiment_spec.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <limits>
#include <set>

#include "api/bounded_yaml.h"
#include "api/quantity.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "fmt/format.h"

namespace gpugeek::hpo {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", field, what));
}

absl::Status CheckKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& allowed) {
  if (!map.IsMap()) return Invalid(path.empty() ? "(document)" : path, "must be a mapping");
  for (const auto& item : map) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    if (!allowed.contains(key)) {
      std::string names;
      for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
      return Invalid((path.empty() ? "" : path + ".") + EscapeForMessage(key.substr(0, 64)),
                     "is not a known field; fields are " + names);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return Invalid(path, "must be a single value");
  return n.Scalar();
}

absl::StatusOr<int64_t> Integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(const std::string text, Scalar(n, path));
  int64_t v = 0;
  size_t used = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < lo || v > hi) {
    return Invalid(path, fmt::format("must be a whole number {}..{}", lo, hi));
  }
  return v;
}

// A YAML tree as JSON: mappings, lists, and scalars as numbers when they read as one (YAML's plain
// scalars), true/false, else strings. Quoted scalars stay strings.
nlohmann::json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& item : n) out[item.first.Scalar()] = ToJson(item.second);
    return out;
  }
  if (n.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : n) out.push_back(ToJson(item));
    return out;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s == "true") return true;
  if (s == "false") return false;
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ValueText(const SearchSpace& space, size_t i, double v) {
  const ParamSpec& p = space.params()[i];
  if (IsInactive(v)) return "";
  if (p.kind == ParamKind::kCategorical) return p.choices[static_cast<size_t>(v)];
  if (p.kind == ParamKind::kInt) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

// Calls `f(name, begin, end)` for each {{NAME}} in `run`; stops at the first error.
absl::Status ForEachPlaceholder(const std::string& run,
                                const std::function<absl::Status(const std::string&, size_t, size_t)>& f) {
  for (size_t at = run.find("{{"); at != std::string::npos; at = run.find("{{", at)) {
    const size_t close = run.find("}}", at + 2);
    if (close == std::string::npos) return Invalid("trial.run", "a {{ without its }}");
    RETURN_IF_ERROR(f(run.substr(at + 2, close - at - 2), at, close + 2));
    at = close + 2;
  }
  return absl::OkStatus();
}

absl::StatusOr<ExperimentSpec> ParseDocument(const YAML::Node& doc, const hw::GpuCatalog& catalog) {
  RETURN_IF_ERROR(CheckKeys(
      doc, "", {"name", "objective", "space", "budget", "parallelism", "sampler", "pruner", "seed", "trial"}));
  ExperimentSpec spec;
  if (!doc["name"]) return Invalid("name", "is required");
  ASSIGN_OR_RETURN(spec.name, Scalar(doc["name"], "name"));
  if (spec.name.empty() || spec.name.size() > 48 ||
      spec.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos ||
      spec.name.front() == '-') {
    return Invalid("name", "must be 1-48 of a-z, 0-9 and '-', not starting with '-'");
  }
  if (const YAML::Node o = doc["objective"]) {
    RETURN_IF_ERROR(CheckKeys(o, "objective", {"metric", "direction"}));
    if (o["metric"]) {
      ASSIGN_OR_RETURN(spec.metric, Scalar(o["metric"], "objective.metric"));
      if (spec.metric.empty() || spec.metric.size() > 64) return Invalid("objective.metric", "must be 1-64 characters");
    }
    if (o["direction"]) {
      ASSIGN_OR_RETURN(const std::string d, Scalar(o["direction"], "objective.direction"));
      if (d != "minimize" && d != "maximize") return Invalid("objective.direction", "must be minimize or maximize");
      spec.direction = d == "maximize" ? Direction::kMaximize : Direction::kMinimize;
    }
  }
  if (!doc["space"]) return Invalid("space", "is required: the parameters to search");
  auto space = SearchSpace::FromJson(ToJson(doc["space"]));
  if (!space.ok()) return space.status();
  spec.space = *std::move(space);
  if (!doc["budget"]) return Invalid("budget", "is required: at least {trials: N}");
  RETURN_IF_ERROR(CheckKeys(doc["budget"], "budget", {"trials", "gpu_time"}));
  if (!doc["budget"]["trials"]) return Invalid("budget.trials", "is required");
  ASSIGN_OR_RETURN(spec.trials, Integer(doc["budget"]["trials"], "budget.trials", 1, kMaxExperimentTrials));
  if (doc["budget"]["gpu_time"]) {
    ASSIGN_OR_RETURN(const std::string text, Scalar(doc["budget"]["gpu_time"], "budget.gpu_time"));
    auto d = api::ParseDuration(text);
    if (!d.ok() || *d < std::chrono::seconds(1)) {
      return Invalid("budget.gpu_time", "must be GPU time like 8h or 90m (the GPU-seconds of all trials together)");
    }
    spec.max_gpu_seconds = std::chrono::duration_cast<std::chrono::seconds>(*d).count();
  }
  if (doc["parallelism"]) {
    ASSIGN_OR_RETURN(spec.parallelism, Integer(doc["parallelism"], "parallelism", 1, kMaxParallelism));
    if (spec.parallelism > spec.trials) {
      return Invalid("parallelism", fmt::format("{} is more than budget.trials ({})", spec.parallelism, spec.trials));
    }
  }
  if (doc["sampler"]) {
    ASSIGN_OR_RETURN(spec.sampler, Scalar(doc["sampler"], "sampler"));
    if (auto s = MakeSampler(spec.sampler, spec.trials); !s.ok()) return s.status();
  }
  if (const YAML::Node p = doc["pruner"]) {
    RETURN_IF_ERROR(CheckKeys(
        p, "pruner", {"name", "min_resource", "max_resource", "reduction_factor", "startup_trials", "warmup_steps"}));
    if (p["name"]) {
      ASSIGN_OR_RETURN(spec.pruner.name, Scalar(p["name"], "pruner.name"));
    }
    constexpr int64_t kBig = int64_t{1} << 53;
    if (p["min_resource"]) {
      ASSIGN_OR_RETURN(spec.pruner.min_resource, Integer(p["min_resource"], "pruner.min_resource", 1, kBig));
    }
    if (p["max_resource"]) {
      ASSIGN_OR_RETURN(spec.pruner.max_resource, Integer(p["max_resource"], "pruner.max_resource", 0, kBig));
    }
    if (p["reduction_factor"]) {
      ASSIGN_OR_RETURN(const int64_t eta, Integer(p["reduction_factor"], "pruner.reduction_factor", 2, 100));
      spec.pruner.reduction_factor = static_cast<int>(eta);
    }
    if (p["startup_trials"]) {
      ASSIGN_OR_RETURN(const int64_t n, Integer(p["startup_trials"], "pruner.startup_trials", 0, kMaxExperimentTrials));
      spec.pruner.startup_trials = static_cast<int>(n);
    }
    if (p["warmup_steps"]) {
      ASSIGN_OR_RETURN(spec.pruner.warmup_steps, Integer(p["warmup_steps"], "pruner.warmup_steps", 0, kBig));
    }
    if (auto made = MakePruner(spec.pruner); !made.ok()) return made.status();
  }
  if (doc["seed"]) {
    ASSIGN_OR_RETURN(const int64_t seed, Integer(doc["seed"], "seed", 0, std::numeric_limits<int64_t>::max()));
    spec.seed = static_cast<uint64_t>(seed);
  }
  if (!doc["trial"]) return Invalid("trial", "is required: the job spec each trial runs");
  if (!doc["trial"].IsMap()) return Invalid("trial", "must be a job spec (a mapping with at least run)");
  YAML::Node trial = YAML::Clone(doc["trial"]);
  if (!trial["name"]) trial["name"] = spec.name;
  YAML::Emitter out;
  out << trial;
  auto job = api::ParseJobSpec(out.c_str(), catalog);
  if (!job.ok()) return absl::InvalidArgumentError(fmt::format("trial.{}", std::string(job.status().message())));
  spec.trial = *std::move(job);
  RETURN_IF_ERROR(ForEachPlaceholder(spec.trial.run, [&](const std::string& name, size_t, size_t) {
    for (const ParamSpec& p : spec.space.params()) {
      if (p.name == name) return absl::OkStatus();
    }
    return Invalid("trial.run",
                   fmt::format("{{{{{}}}}} names no parameter of the space", EscapeForMessage(name.substr(0, 64))));
  }));
  return spec;
}

}  // namespace

absl::StatusOr<ExperimentSpec> ParseExperimentSpec(std::string_view yaml_text, const hw::GpuCatalog& catalog) {
  // Its names, values and commands end up in JSON (GPUGEEK_PARAMS, the API): UTF-8 text only.
  if (!IsUtf8(yaml_text)) return absl::InvalidArgumentError("experiment spec: not UTF-8 text; send UTF-8");
  ASSIGN_OR_RETURN(const YAML::Node doc, api::LoadBoundedYaml(yaml_text, "experiment spec", "experiment"));
  try {
    return ParseDocument(doc, catalog);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("experiment spec: {}", e.what()));
  }
}

api::JobSpec TrialJob(const ExperimentSpec& spec, int64_t number, const Point& point) {
  api::JobSpec job = spec.trial;
  job.name = fmt::format("{}-t{}", spec.name, number);
  std::string run;
  size_t from = 0;
  (void)ForEachPlaceholder(spec.trial.run, [&](const std::string& name, size_t begin, size_t end) {
    run += spec.trial.run.substr(from, begin - from);
    for (size_t i = 0; i < spec.space.size(); ++i) {
      if (spec.space.params()[i].name == name) run += ShellQuote(ValueText(spec.space, i, point[i]));
    }
    from = end;
    return absl::OkStatus();
  });
  job.run = run + spec.trial.run.substr(from);
  return job;
}

std::map<std::string, std::string> TrialEnv(const ExperimentSpec& spec, const std::string& experiment_id,
                                            int64_t number, const Point& point) {
  return {{"GPUGEEK_EXPERIMENT", experiment_id},
          {"GPUGEEK_TRIAL_ID", std::to_string(number)},
          {"GPUGEEK_PARAMS", spec.space.PointToJson(point).dump()}};
}

}  // namespace gpugeek::hpo
