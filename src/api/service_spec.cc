#include "api/service_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "api/bounded_yaml.h"
#include "api/quantity.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace gpugeek::api {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The service's own top-level fields; in the shorthand every other top-level field is the one version's.
const std::initializer_list<std::string_view> kServiceKeys = {
    "kind", "name", "port", "readiness", "startup_budget", "replicas", "autoscaling", "traffic", "versions"};
// A version's own fields beside its run part.
const std::initializer_list<std::string_view> kVersionKeys = {"name", "weight"};

// Job spec fields a replica cannot use, and why. Refused before ParseJobSpec reads the run part, so the
// reason is the service's rather than a job's.
struct NotForReplicas {
  std::string_view key;
  std::string_view why;
};
constexpr NotForReplicas kNotForReplicas[] = {
    {"checkpoint", "a replica keeps no training state to checkpoint; remove it"},
    {"elastic", "a replica runs on one node; remove it (more replicas: replicas.max)"},
    {"retry", "the service restarts its replicas itself (after a failed readiness probe or startup_budget); remove it"},
    {"max_duration", "a service runs until it is stopped (gpugeek serve --stop); remove it"},
    {"idle_timeout",
     "an idle service scales to zero instead (replicas.min: 0, autoscaling.scale_to_zero_grace); remove it"},
};

constexpr int kMaxReplicas = 100'000;  // sched::ValidateAutoscalerSpec's bound on min/max_replicas

absl::Status FieldError(const std::string& path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path, what));
}

template <typename Range>
std::string CommaList(const Range& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

std::string Join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

std::string KindName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "empty";
  }
}

// Every key of `map` is a plain string (the lookups below and the re-rendering of a version's run part
// read keys as strings).
absl::Status CheckScalarKeys(const YAML::Node& map, const std::string& path) {
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return FieldError(path.empty() ? "(document)" : path, "keys must be plain strings");
  }
  return absl::OkStatus();
}

absl::Status CheckKeys(const YAML::Node& map, const std::string& path, std::initializer_list<std::string_view> allowed,
                       std::string_view hint = "") {
  RETURN_IF_ERROR(CheckScalarKeys(map, path));
  for (const auto& kv : map) {
    const std::string& key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const std::string shown = key.size() <= 64 ? EscapeForMessage(key) : EscapeForMessage(key.substr(0, 64)) + "...";
    return FieldError(Join(path, shown), fmt::format("unknown field; allowed here: {}{}", CommaList(allowed), hint));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return FieldError(path, fmt::format("must be a single value, not {}", KindName(n)));
  return n.Scalar();
}

// A whole number as job specs write them (ParseCount: "2e3" too), optionally negative, within lo..hi.
absl::StatusOr<int64_t> Integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(const std::string s, Scalar(n, path));
  const bool negative = !s.empty() && s[0] == '-';
  auto v = ParseCount(negative ? std::string_view(s).substr(1) : std::string_view(s));
  if (!v.ok()) {
    return FieldError(path, fmt::format("= {} must be a whole number between {} and {}", QuoteForMessage(s), lo, hi));
  }
  const int64_t value = negative ? -*v : *v;
  if (value < lo || value > hi) return FieldError(path, fmt::format("= {} must be between {} and {}", value, lo, hi));
  return value;
}

// A finite decimal number ("70", "0.5", "1e3"); ranges are checked by the caller.
absl::StatusOr<double> Number(const YAML::Node& n, const std::string& path) {
  ASSIGN_OR_RETURN(const std::string s, Scalar(n, path));
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    return FieldError(path, fmt::format("= {} must be a number like 70 or 0.5", QuoteForMessage(s)));
  }
  return v;
}

// A duration as job specs write them (api/quantity.h ParseDuration: "30s", "1h30m", "250ms"), within lo..hi.
// Whole milliseconds only, the resolution FormatDuration renders, so that a spec round-trips.
absl::StatusOr<Duration> DurationIn(const YAML::Node& n, const std::string& path, Duration lo, Duration hi) {
  ASSIGN_OR_RETURN(const std::string s, Scalar(n, path));
  absl::StatusOr<Duration> d = ParseDuration(s);
  if (!d.ok()) {
    return FieldError(path,
                      fmt::format("= {} is not a duration; write e.g. 30s, 5m, 1h30m or 250ms", QuoteForMessage(s)));
  }
  if (*d % milliseconds(1) != Duration::zero()) return FieldError(path, "must be a whole number of milliseconds");
  if (*d < lo || *d > hi) {
    return FieldError(path, fmt::format("= {} must be between {} and {}", FormatDuration(*d), FormatDuration(lo),
                                        FormatDuration(hi)));
  }
  return *d;
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9-]{1,max}, starting and ending with a letter or digit: a DNS label (RFC 1123), so names fit in host
// names, metric labels and paths.
bool IsLabel(std::string_view s, size_t max) {
  return !s.empty() && s.size() <= max && IsLowerAlnum(s.front()) && IsLowerAlnum(s.back()) &&
         std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// The rule ParseJobSpec applies to JobSpec::name (job_spec.cc CheckName), which each version's run part
// carries: checked here first so the message names the service.
absl::Status CheckServiceName(const std::string& name) {
  if (IsLabel(name, 63)) return absl::OkStatus();
  return FieldError("name", fmt::format("= {} must be 1-63 lower-case letters, digits or '-', starting and ending "
                                        "with a letter or digit, as a job's name (e.g. gpt-small)",
                                        QuoteForMessage(name)));
}

// RFC 9110 section 5.6.2 token: the characters of a header field name and (RFC 6265 section 4.1.1) a cookie name.
bool IsHttpToken(std::string_view s) {
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return !s.empty() && s.size() <= 256 && std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           kSymbols.find(c) != std::string_view::npos;
  });
}

absl::StatusOr<ReadinessProbe> ParseReadiness(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("readiness", "must be a mapping like {path: /health, period: 1s}");
  RETURN_IF_ERROR(CheckKeys(n, "readiness",
                            {"path", "initial_delay", "period", "timeout", "failure_threshold", "success_threshold"}));
  ReadinessProbe r;
  if (n["path"]) {
    ASSIGN_OR_RETURN(r.path, Scalar(n["path"], "readiness.path"));
    const bool visible = std::all_of(r.path.begin(), r.path.end(), [](char c) { return c > ' ' && c < 0x7f; });
    if (r.path.empty() || r.path[0] != '/' || r.path.size() > 1024 || !visible) {
      return FieldError("readiness.path",
                        fmt::format("= {} must be a URL path starting with '/', 1-1024 visible ASCII characters "
                                    "without spaces (e.g. /health)",
                                    QuoteForMessage(r.path)));
    }
  }
  if (n["initial_delay"]) {
    ASSIGN_OR_RETURN(r.initial_delay, DurationIn(n["initial_delay"], "readiness.initial_delay", seconds(0), hours(1)));
  }
  if (n["period"]) {
    ASSIGN_OR_RETURN(r.period, DurationIn(n["period"], "readiness.period", milliseconds(100), hours(1)));
  }
  if (n["timeout"]) {
    ASSIGN_OR_RETURN(r.timeout, DurationIn(n["timeout"], "readiness.timeout", milliseconds(100), hours(1)));
  }
  if (n["failure_threshold"]) {
    ASSIGN_OR_RETURN(const int64_t v, Integer(n["failure_threshold"], "readiness.failure_threshold", 1, 100));
    r.failure_threshold = static_cast<int>(v);
  }
  if (n["success_threshold"]) {
    ASSIGN_OR_RETURN(const int64_t v, Integer(n["success_threshold"], "readiness.success_threshold", 1, 100));
    r.success_threshold = static_cast<int>(v);
  }
  return r;
}

absl::StatusOr<ReplicaBounds> ParseReplicas(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("replicas", "must be a mapping like {min: 0, max: 4, initial: 1}");
  RETURN_IF_ERROR(CheckKeys(n, "replicas", {"min", "max", "initial"}));
  std::optional<int64_t> min, max, initial;
  if (n["min"]) {
    ASSIGN_OR_RETURN(min, Integer(n["min"], "replicas.min", 0, kMaxReplicas));
  }
  if (n["max"]) {
    ASSIGN_OR_RETURN(max, Integer(n["max"], "replicas.max", 0, kMaxReplicas));
  }
  if (n["initial"]) {
    ASSIGN_OR_RETURN(initial, Integer(n["initial"], "replicas.initial", 0, kMaxReplicas));
  }
  ReplicaBounds r;
  r.min = static_cast<int>(min.value_or(0));
  if (max && *max < r.min) {
    return FieldError("replicas.max", fmt::format("{} is below replicas.min {}; raise max or lower min", *max, r.min));
  }
  if (max && *max == 0) {
    return FieldError("replicas.max", "must be at least 1: a service that may run no replica serves nothing");
  }
  if (initial && *initial < r.min) {
    return FieldError("replicas.initial", fmt::format("{} is below replicas.min {}", *initial, r.min));
  }
  if (initial && max && *initial > *max) {
    return FieldError("replicas.initial", fmt::format("{} is above replicas.max {}", *initial, *max));
  }
  // Knative starts max(initial-scale, min-scale) replicas; with neither given, one.
  r.initial = static_cast<int>(initial.value_or(std::max<int64_t>(1, r.min)));
  r.max = static_cast<int>(max.value_or(std::max<int64_t>({1, r.min, r.initial})));
  return r;
}

// Ranges copied from sched::ValidateAutoscalerSpec (src/sched/autoscaler.cc), so that every spec that parses
// converts to an AutoscalerSpec that passes it; target_kv_cache_use is further bounded by 1, a fraction.
absl::StatusOr<ServiceAutoscaling> ParseAutoscaling(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("autoscaling", "must be a mapping like {target_concurrency: 70}");
  RETURN_IF_ERROR(CheckKeys(n, "autoscaling",
                            {"target_concurrency", "target_queue_depth", "target_tokens_in_flight",
                             "target_kv_cache_use", "stable_window", "panic_window_percentage", "panic_threshold",
                             "max_scale_up_rate", "max_scale_down_rate", "scale_to_zero_grace"}));
  ServiceAutoscaling a;
  const std::pair<std::string_view, double*> targets[] = {
      {"target_concurrency", &a.target_concurrency},
      {"target_queue_depth", &a.target_queue_depth},
      {"target_tokens_in_flight", &a.target_tokens_in_flight},
      {"target_kv_cache_use", &a.target_kv_cache_use},
  };
  for (const auto& [key, field] : targets) {
    if (!n[std::string(key)]) continue;
    const std::string path = Join("autoscaling", key);
    ASSIGN_OR_RETURN(*field, Number(n[std::string(key)], path));
    if (*field < 0) return FieldError(path, fmt::format("= {} must be >= 0 (0 = the signal is not used)", *field));
  }
  if (a.target_kv_cache_use > 1) {
    return FieldError("autoscaling.target_kv_cache_use",
                      fmt::format("= {} must be between 0 and 1, the fraction of a replica's KV cache in use (0.8 = "
                                  "80 %)",
                                  a.target_kv_cache_use));
  }
  if (a.target_concurrency <= 0 && a.target_queue_depth <= 0 && a.target_tokens_in_flight <= 0 &&
      a.target_kv_cache_use <= 0) {
    return FieldError("autoscaling",
                      "give at least one target above 0 (target_concurrency, target_queue_depth, "
                      "target_tokens_in_flight or target_kv_cache_use)");
  }
  if (n["stable_window"]) {
    ASSIGN_OR_RETURN(a.stable_window,
                     DurationIn(n["stable_window"], "autoscaling.stable_window", seconds(6), hours(1)));
    // The autoscaler averages per whole second (sched::Autoscaler keeps one bucket per second).
    if (a.stable_window % seconds(1) != Duration::zero()) {
      return FieldError("autoscaling.stable_window", "must be a whole number of seconds");
    }
  }
  if (n["panic_window_percentage"]) {
    ASSIGN_OR_RETURN(a.panic_window_percentage,
                     Number(n["panic_window_percentage"], "autoscaling.panic_window_percentage"));
    if (!(a.panic_window_percentage >= 1 && a.panic_window_percentage <= 100)) {
      return FieldError(
          "autoscaling.panic_window_percentage",
          fmt::format("= {} must be between 1 and 100 (percent of stable_window)", a.panic_window_percentage));
    }
  }
  if (n["panic_threshold"]) {
    ASSIGN_OR_RETURN(a.panic_threshold, Number(n["panic_threshold"], "autoscaling.panic_threshold"));
    if (!(a.panic_threshold >= 1.1 && a.panic_threshold <= 10)) {
      return FieldError("autoscaling.panic_threshold",
                        fmt::format("= {} must be between 1.1 and 10 (2 = 200 %)", a.panic_threshold));
    }
  }
  for (const auto& [key, field] :
       {std::pair<std::string_view, double*>{"max_scale_up_rate", &a.max_scale_up_rate},
        std::pair<std::string_view, double*>{"max_scale_down_rate", &a.max_scale_down_rate}}) {
    if (!n[std::string(key)]) continue;
    const std::string path = Join("autoscaling", key);
    ASSIGN_OR_RETURN(*field, Number(n[std::string(key)], path));
    if (!(*field > 1)) return FieldError(path, fmt::format("= {} must be above 1", *field));
  }
  if (n["scale_to_zero_grace"]) {
    ASSIGN_OR_RETURN(a.scale_to_zero_grace,
                     DurationIn(n["scale_to_zero_grace"], "autoscaling.scale_to_zero_grace", seconds(0), hours(24)));
  }
  return a;
}

absl::StatusOr<TrafficPolicy> ParseTraffic(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("traffic", "must be a mapping like {sticky: {header: X-User}, retries: 2}");
  RETURN_IF_ERROR(CheckKeys(n, "traffic", {"sticky", "activator", "retries", "auth"}));
  TrafficPolicy t;
  if (const YAML::Node sticky = n["sticky"]) {
    if (!sticky.IsMap()) return FieldError("traffic.sticky", "must be a mapping: {header: NAME} or {cookie: NAME}");
    RETURN_IF_ERROR(CheckKeys(sticky, "traffic.sticky", {"header", "cookie"}));
    if (sticky.size() != 1) return FieldError("traffic.sticky", "give exactly one of header or cookie");
    StickySessions s;
    s.key = sticky["header"] ? StickyKey::kHeader : StickyKey::kCookie;
    const std::string path = Join("traffic.sticky", StickyKeyName(s.key));
    ASSIGN_OR_RETURN(s.name, Scalar(sticky[std::string(StickyKeyName(s.key))], path));
    if (!IsHttpToken(s.name)) {
      return FieldError(path, fmt::format("= {} is not an HTTP {} name: 1-256 letters, digits or !#$%&'*+-.^_`|~ "
                                          "(e.g. {})",
                                          QuoteForMessage(s.name), StickyKeyName(s.key),
                                          s.key == StickyKey::kHeader ? "X-User" : "gpugeek-version"));
    }
    t.sticky = std::move(s);
  }
  if (const YAML::Node activator = n["activator"]) {
    if (!activator.IsMap())
      return FieldError("traffic.activator", "must be a mapping like {queue: 10000, timeout: 60s}");
    RETURN_IF_ERROR(CheckKeys(activator, "traffic.activator", {"queue", "timeout"}));
    if (activator["queue"]) {
      ASSIGN_OR_RETURN(const int64_t q, Integer(activator["queue"], "traffic.activator.queue", 0, 1'000'000));
      t.activator.queue = static_cast<int>(q);
    }
    if (activator["timeout"]) {
      ASSIGN_OR_RETURN(t.activator.timeout,
                       DurationIn(activator["timeout"], "traffic.activator.timeout", seconds(1), hours(1)));
    }
  }
  if (n["retries"]) {
    ASSIGN_OR_RETURN(const int64_t r, Integer(n["retries"], "traffic.retries", 0, 10));
    t.retries = static_cast<int>(r);
  }
  if (n["auth"]) {
    ASSIGN_OR_RETURN(const std::string auth, Scalar(n["auth"], "traffic.auth"));
    if (auth != "token" && auth != "none") {
      return FieldError("traffic.auth", fmt::format("= {}: give token (callers send a gpugeek API token) or none",
                                                    QuoteForMessage(auth)));
    }
    t.auth_token = auth == "token";
  }
  return t;
}

// ParseJobSpec names a job's fields when it meets an unknown one at the top of its document; where that
// document is a version, the version's own fields (`own`) are allowed instead of `name` and those refused
// for replicas.
std::string WithVersionFields(std::string message, std::initializer_list<std::string_view> own) {
  constexpr std::string_view kMarker = "unknown field; allowed here: ";
  const size_t at = message.find(kMarker);
  if (at == std::string::npos) return message;
  std::vector<std::string> allowed(own.begin(), own.end());
  const std::string listed = message.substr(at + kMarker.size());
  for (size_t start = 0; start <= listed.size();) {
    const size_t comma = std::min(listed.find(", ", start), listed.size());
    const std::string_view key = std::string_view(listed).substr(start, comma - start);
    start = comma + 2;
    if (key.empty()) continue;
    const bool refused = std::any_of(std::begin(kNotForReplicas), std::end(kNotForReplicas),
                                     [&](const NotForReplicas& f) { return f.key == key; });
    if (key != "name" && !refused && std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      allowed.emplace_back(key);
    }
  }
  return message.substr(0, at + kMarker.size()) + CommaList(allowed);
}

// A ParseJobSpec error about a version's run part, as an error about the service spec: `prefix` ("versions[1]",
// or "" for the shorthand) goes in front of the field path it starts with.
absl::Status InVersion(const absl::Status& status, const std::string& prefix,
                       std::initializer_list<std::string_view> own) {
  std::string message(status.message());
  const size_t colon = message.find(": ");
  const std::string head = colon == std::string::npos ? "" : message.substr(0, colon);
  // A field path ("resources.accelerators[1]", "env.X") rather than a sentence about the document ("job spec
  // is not valid YAML ...", "spec: ... over the 1 MiB limit").
  const bool field = !head.empty() && head != "spec" && head[0] != '(' && head.find(' ') == std::string::npos;
  if (field && head.find_first_of(".[") == std::string::npos) message = WithVersionFields(std::move(message), own);
  if (!prefix.empty()) message = field ? fmt::format("{}.{}", prefix, message) : fmt::format("{}: {}", prefix, message);
  return absl::Status(status.code(), message);
}

// The run part of one version: `map` without the `own` keys, read by ParseJobSpec under the service's name.
absl::StatusOr<JobSpec> ParseVersionRun(const YAML::Node& map, const std::string& prefix,
                                        std::initializer_list<std::string_view> own, const std::string& service_name,
                                        const hw::GpuCatalog& catalog) {
  YAML::Node job(YAML::NodeType::Map);
  job["name"] = service_name;
  for (const auto& kv : map) {
    const std::string& key = kv.first.Scalar();
    if (std::find(own.begin(), own.end(), key) != own.end()) continue;
    for (const NotForReplicas& f : kNotForReplicas) {
      if (key == f.key) return FieldError(Join(prefix, key), f.why);
    }
    job[key] = kv.second;
  }
  YAML::Emitter out;
  // Every string double-quoted: left to yaml-cpp, a string read from a quoted scalar may be written plain
  // and read back otherwise ("serve\r" loses its \r, "" becomes null). Aliases stay aliases.
  out.SetStringFormat(YAML::DoubleQuoted);
  out << job;
  if (!out.good()) {
    return FieldError(prefix.empty() ? "(document)" : prefix,
                      fmt::format("cannot be read as a job's run fields: {}", out.GetLastError()));
  }
  absl::StatusOr<JobSpec> run = ParseJobSpec(out.c_str(), catalog);
  if (!run.ok()) return InVersion(run.status(), prefix, own);
  if (run->num_nodes != 1) {
    return FieldError(Join(prefix, "num_nodes"),
                      fmt::format("= {}: a replica runs on one node; remove num_nodes or set it to 1 (more replicas: "
                                  "replicas.max)",
                                  run->num_nodes));
  }
  if (run->task && run->task->kind != TaskKind::kInference) {
    return FieldError(Join(prefix, "task.kind"),
                      fmt::format("= {}: a service serves a model; use inference, or submit training as a job "
                                  "(gpugeek submit)",
                                  TaskKindName(run->task->kind)));
  }
  if (run->task && run->task->tokens != 0) {
    return FieldError(Join(prefix, "task.tokens"), "a service has no token budget; remove it");
  }
  return run;
}

absl::StatusOr<std::vector<ServiceVersion>> ParseVersions(const YAML::Node& list, const std::string& service_name,
                                                          const hw::GpuCatalog& catalog) {
  if (!list.IsSequence() || list.size() == 0 || list.size() > static_cast<size_t>(kMaxServiceVersions)) {
    return FieldError("versions",
                      fmt::format("must be a list of 1 to {} versions, each a mapping with name, weight and run",
                                  kMaxServiceVersions));
  }
  std::vector<ServiceVersion> versions(list.size());
  // Names and weights first: a wrong sum is reported before the run parts are read.
  int sum = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = fmt::format("versions[{}]", i);
    const YAML::Node v = list[i];
    if (!v.IsMap()) return FieldError(path, "must be a mapping like {name: v1, weight: 100, run: ...}");
    RETURN_IF_ERROR(CheckScalarKeys(v, path));
    if (!v["name"]) return FieldError(path + ".name", "is required: name the version, e.g. v1");
    ASSIGN_OR_RETURN(versions[i].name, Scalar(v["name"], path + ".name"));
    if (!IsLabel(versions[i].name, 32)) {
      return FieldError(path + ".name", fmt::format("= {} must be 1-32 lower-case letters, digits or '-', starting "
                                                    "and ending with a letter or digit (e.g. v1, canary)",
                                                    QuoteForMessage(versions[i].name)));
    }
    for (size_t j = 0; j < i; ++j) {
      if (versions[j].name == versions[i].name) {
        return FieldError(path + ".name", fmt::format("= {} is also the name of versions[{}]; give each version its "
                                                      "own name",
                                                      versions[i].name, j));
      }
    }
    if (v["weight"]) {
      ASSIGN_OR_RETURN(const int64_t w, Integer(v["weight"], path + ".weight", 0, 100));
      versions[i].weight_percent = static_cast<int>(w);
    } else if (list.size() == 1) {
      versions[i].weight_percent = 100;
    } else {
      return FieldError(path + ".weight",
                        "is required with several versions: the percent of requests it gets (the weights sum to 100)");
    }
    sum += versions[i].weight_percent;
  }
  if (sum != 100) return FieldError("versions", fmt::format("weights sum to {}; they must sum to 100", sum));
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(versions[i].run,
                     ParseVersionRun(list[i], fmt::format("versions[{}]", i), kVersionKeys, service_name, catalog));
  }
  return versions;
}

absl::StatusOr<ServiceSpec> ParseDocument(const YAML::Node& doc, const hw::GpuCatalog& catalog) {
  if (!doc.IsMap()) {
    return FieldError("(document)", "a service spec must be a YAML mapping with kind: service, name and versions");
  }
  RETURN_IF_ERROR(CheckScalarKeys(doc, ""));
  // Without `versions`, the other top-level fields are the one version's run part and ParseJobSpec judges them.
  const bool shorthand = !doc["versions"];
  if (!shorthand) {
    RETURN_IF_ERROR(CheckKeys(doc, "", kServiceKeys,
                              " (with versions, the run fields such as run, resources and image go in each version)"));
  }
  if (!doc["kind"]) return FieldError("kind", "is required: write kind: service (a job spec goes to gpugeek submit)");
  ASSIGN_OR_RETURN(const std::string kind, Scalar(doc["kind"], "kind"));
  if (kind != "service") {
    return FieldError("kind", fmt::format("= {} must be service (a job spec goes to gpugeek submit, without kind)",
                                          QuoteForMessage(kind)));
  }
  ServiceSpec spec;
  if (!doc["name"]) return FieldError("name", "is required: the service's name, e.g. gpt-small");
  ASSIGN_OR_RETURN(spec.name, Scalar(doc["name"], "name"));
  RETURN_IF_ERROR(CheckServiceName(spec.name));
  if (doc["port"]) {
    ASSIGN_OR_RETURN(const int64_t port, Integer(doc["port"], "port", 1, 65535));
    spec.port = static_cast<int>(port);
  }
  if (doc["readiness"]) {
    ASSIGN_OR_RETURN(spec.readiness, ParseReadiness(doc["readiness"]));
  }
  if (doc["startup_budget"]) {
    ASSIGN_OR_RETURN(spec.startup_budget, DurationIn(doc["startup_budget"], "startup_budget", seconds(1), hours(24)));
  }
  if (doc["replicas"]) {
    ASSIGN_OR_RETURN(spec.replicas, ParseReplicas(doc["replicas"]));
  }
  if (doc["autoscaling"]) {
    ASSIGN_OR_RETURN(spec.autoscaling, ParseAutoscaling(doc["autoscaling"]));
  }
  if (doc["traffic"]) {
    ASSIGN_OR_RETURN(spec.traffic, ParseTraffic(doc["traffic"]));
  }
  if (!shorthand) {
    ASSIGN_OR_RETURN(spec.versions, ParseVersions(doc["versions"], spec.name, catalog));
    return spec;
  }
  if (!doc["run"]) {
    return FieldError("versions",
                      "is required: a list of versions, each with its run fields (or, for one version, "
                      "run and resources at the top level)");
  }
  ServiceVersion only{.name = "v1", .weight_percent = 100, .run = {}};
  ASSIGN_OR_RETURN(only.run, ParseVersionRun(doc, "", kServiceKeys, spec.name, catalog));
  spec.versions.push_back(std::move(only));
  return spec;
}

// Whether yaml-cpp writes `s` plain and reads it back as the same string: letters, digits and a few
// punctuation marks inside, a letter or digit at each end (no "key: " or "- " to misread), not null.
bool PlainIsSafe(const std::string& s) {
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (s.empty() || !alnum(s.front()) || !alnum(s.back()) || s == "null" || s == "Null" || s == "NULL") return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return alnum(c) || c == '_' || c == '.' || c == ':' || c == '/' || c == '@' || c == '-';
  });
}

void EmitText(YAML::Emitter& out, const std::string& s) {
  if (PlainIsSafe(s)) {
    out << s;
  } else {
    out << YAML::DoubleQuoted << s;
  }
}

// A value of JobSpecToYaml's output (which has no anchors), with each string quoted unless plain reads back
// the same: that output, loaded, no longer knows which strings were quoted.
void EmitRunValue(YAML::Emitter& out, const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      out << (n.Style() == YAML::EmitterStyle::Flow ? YAML::Flow : YAML::Block) << YAML::BeginMap;
      for (const auto& kv : n) {
        out << YAML::Key;
        EmitText(out, kv.first.Scalar());
        out << YAML::Value;
        EmitRunValue(out, kv.second);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      out << (n.Style() == YAML::EmitterStyle::Flow ? YAML::Flow : YAML::Block) << YAML::BeginSeq;
      for (const auto& item : n) EmitRunValue(out, item);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar:
      EmitText(out, n.Scalar());
      return;
    default:
      out << YAML::Null;
  }
}

// Numbers as Number reads them back: fmt's shortest form that round-trips ("70", "0.5", "1e+300").
std::string NumberText(double v) { return fmt::format("{}", v); }

}  // namespace

std::string_view StickyKeyName(StickyKey k) {
  switch (k) {
    case StickyKey::kHeader:
      return "header";
    case StickyKey::kCookie:
      return "cookie";
  }
  return "header";
}

absl::StatusOr<ServiceSpec> ParseServiceSpec(std::string_view yaml_text, const hw::GpuCatalog& catalog) {
  ASSIGN_OR_RETURN(const YAML::Node doc, LoadBoundedYaml(yaml_text, "service spec", "service"));
  try {
    return ParseDocument(doc, catalog);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed shapes while reading (as in ParseJobSpec).
    return absl::InvalidArgumentError(fmt::format("service spec: {}", e.what()));
  }
}

std::string ServiceSpecToYaml(const ServiceSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << "service";
  out << YAML::Key << "name" << YAML::Value << spec.name;
  out << YAML::Key << "port" << YAML::Value << spec.port;

  const ReadinessProbe& r = spec.readiness;
  out << YAML::Key << "readiness" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "path" << YAML::Value << YAML::DoubleQuoted << r.path;
  out << YAML::Key << "initial_delay" << YAML::Value << FormatDuration(r.initial_delay);
  out << YAML::Key << "period" << YAML::Value << FormatDuration(r.period);
  out << YAML::Key << "timeout" << YAML::Value << FormatDuration(r.timeout);
  out << YAML::Key << "failure_threshold" << YAML::Value << r.failure_threshold;
  out << YAML::Key << "success_threshold" << YAML::Value << r.success_threshold;
  out << YAML::EndMap;
  if (spec.startup_budget) {
    out << YAML::Key << "startup_budget" << YAML::Value << FormatDuration(*spec.startup_budget);
  }

  out << YAML::Key << "replicas" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "min" << YAML::Value << spec.replicas.min;
  out << YAML::Key << "max" << YAML::Value << spec.replicas.max;
  out << YAML::Key << "initial" << YAML::Value << spec.replicas.initial;
  out << YAML::EndMap;

  const ServiceAutoscaling& a = spec.autoscaling;
  out << YAML::Key << "autoscaling" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "target_concurrency" << YAML::Value << NumberText(a.target_concurrency);
  out << YAML::Key << "target_queue_depth" << YAML::Value << NumberText(a.target_queue_depth);
  out << YAML::Key << "target_tokens_in_flight" << YAML::Value << NumberText(a.target_tokens_in_flight);
  out << YAML::Key << "target_kv_cache_use" << YAML::Value << NumberText(a.target_kv_cache_use);
  out << YAML::Key << "stable_window" << YAML::Value << FormatDuration(a.stable_window);
  out << YAML::Key << "panic_window_percentage" << YAML::Value << NumberText(a.panic_window_percentage);
  out << YAML::Key << "panic_threshold" << YAML::Value << NumberText(a.panic_threshold);
  out << YAML::Key << "max_scale_up_rate" << YAML::Value << NumberText(a.max_scale_up_rate);
  out << YAML::Key << "max_scale_down_rate" << YAML::Value << NumberText(a.max_scale_down_rate);
  out << YAML::Key << "scale_to_zero_grace" << YAML::Value << FormatDuration(a.scale_to_zero_grace);
  out << YAML::EndMap;

  const TrafficPolicy& t = spec.traffic;
  out << YAML::Key << "traffic" << YAML::Value << YAML::BeginMap;
  if (t.sticky) {
    out << YAML::Key << "sticky" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << std::string(StickyKeyName(t.sticky->key)) << YAML::Value << YAML::DoubleQuoted
        << t.sticky->name;
    out << YAML::EndMap;
  }
  out << YAML::Key << "activator" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "queue" << YAML::Value << t.activator.queue;
  out << YAML::Key << "timeout" << YAML::Value << FormatDuration(t.activator.timeout);
  out << YAML::EndMap;
  out << YAML::Key << "retries" << YAML::Value << t.retries;
  out << YAML::Key << "auth" << YAML::Value << (t.auth_token ? "token" : "none");
  out << YAML::EndMap;

  out << YAML::Key << "versions" << YAML::Value << YAML::BeginSeq;
  for (const ServiceVersion& v : spec.versions) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << v.name;
    out << YAML::Key << "weight" << YAML::Value << v.weight_percent;
    // The run part as JobSpecToYaml writes it, less `name` (the service's) and `checkpoint` (always the
    // default here, and refused in a version).
    const YAML::Node run = YAML::Load(JobSpecToYaml(v.run));
    for (const auto& kv : run) {
      const std::string& key = kv.first.Scalar();
      if (key == "name" || key == "checkpoint") continue;
      out << YAML::Key << key << YAML::Value;
      EmitRunValue(out, kv.second);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace gpugeek::api
