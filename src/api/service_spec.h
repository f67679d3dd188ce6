#pragma once
// ServiceSpec: what `gpugeek serve spec.yaml` submits, a model server kept running as replicas behind one
// endpoint, scaled on its load and split by weight between versions (reference: docs/service-spec.md).
//
//   kind: service
//   name: gpt-small
//   port: 8000
//   readiness: {path: /healthz, period: 1s}
//   startup_budget: 10m
//   replicas: {min: 0, max: 4, initial: 1}
//   autoscaling: {target_concurrency: 70}
//   traffic: {sticky: {header: X-User}, activator: {queue: 10000, timeout: 60s}, retries: 2}
//   versions:
//     - name: v1
//       weight: 90
//       resources: {accelerators: A100-SXM-80GB:1}
//       run: python3 serve.py --port $PORT
//     - name: v2
//       weight: 10
//       resources: {accelerators: A100-SXM-80GB:1}
//       run: python3 serve.py --port $PORT --checkpoint v2.pt
//
// Each version's run part is a job spec's fields, read by ParseJobSpec itself (model, task, resources, env,
// workdir, files, image, setup, run, ...), less what a replica cannot use: num_nodes other than 1, elastic,
// checkpoint, retry, max_duration, idle_timeout and task.tokens (see ParseServiceSpec). Without `versions`,
// those fields stand at the top level and make one version "v1" of weight 100.
//
// Parsing is strict, as for job specs: an unknown field, a wrong type or a bad value is InvalidArgument whose
// message starts with the field's path ("versions[1].resources.accelerators: ...", "replicas.max: ...") and
// says how to fix it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/job_spec.h"
#include "common/clock.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::api {

// `readiness:` an HTTP GET of `path` on the replica's `port`, answered 200-399 (Kubernetes' httpGet probe). A
// replica receives traffic once `success_threshold` probes in a row succeeded, and leaves the rotation after
// `failure_threshold` in a row failed (no answer within `timeout` counts as a failure).
//
// Defaults are Kubernetes' probe defaults (initialDelaySeconds 0, timeoutSeconds 1, failureThreshold 3,
// successThreshold 1) except `period`: 1 s where Kubernetes has 10 s. A replica scaled up from zero has requests
// waiting in the activator for its first successful probe, so the period adds directly to every cold start; one
// GET a second on a local port costs the server nothing measurable. (Knative makes the same trade: its
// queue-proxy probes a starting container far more often than every 10 s.) `path` defaults to /health, where
// vLLM, TGI and SGLang answer readiness.
struct ReadinessProbe {
  std::string path = "/health";                      // starts with '/'; 1-1024 visible ASCII characters
  Duration initial_delay = std::chrono::seconds(0);  // from the replica's start to the first probe; 0..1h
  Duration period = std::chrono::seconds(1);         // between probes; 100ms..1h
  Duration timeout = std::chrono::seconds(1);        // per probe; 100ms..1h
  int failure_threshold = 3;                         // 1..100
  int success_threshold = 1;                         // 1..100
  bool operator==(const ReadinessProbe&) const = default;
};

// `replicas:` how many replicas the autoscaler may ask for, summed over the versions (0..100000 each).
// min <= initial <= max and max >= 1. Defaults: min 0 (Knative min-scale 0: scale to zero when idle), initial 1
// (Knative initial-scale 1), max = the largest of 1, min and initial. Knative's max-scale default is 0, "no
// bound"; here a replica is a GPU allocation that is paid for, so a service grows past its first replica only up
// to a bound its spec states.
struct ReplicaBounds {
  int min = 0;
  int max = 1;
  int initial = 1;
  bool operator==(const ReplicaBounds&) const = default;
};

// `autoscaling:` the Knative KPA parameters of sched::AutoscalerSpec (src/sched/autoscaler.h), with the same
// defaults (Knative config-autoscaler: container-concurrency-target-default 100 x target-utilization 70 % = 70,
// stable-window 60s, panic-window-percentage 10, panic-threshold-percentage 200, max-scale-up-rate 1000,
// max-scale-down-rate 2, scale-to-zero-grace-period 30s) and the same ranges as sched::ValidateAutoscalerSpec,
// so a spec that parses passes it. api/ does not depend on sched/, so the control plane converts: target_* go
// to AutoscalerSpec::target[ScaleSignal::kConcurrency, kQueueDepth, kTokensInFlight, kKvCacheUse], the other
// fields to their namesakes, and ServiceSpec::replicas min/max to min_replicas/max_replicas.
// Targets are per replica; 0 = the signal is not used; at least one is above 0.
struct ServiceAutoscaling {
  double target_concurrency = 70.0;      // requests in flight; >= 0
  double target_queue_depth = 0.0;       // requests queued in the server; >= 0
  double target_tokens_in_flight = 0.0;  // tokens of the requests in flight; >= 0
  double target_kv_cache_use = 0.0;      // fraction of the KV cache in use, 0..1 (above 1 is never reached)
  Duration stable_window = std::chrono::seconds(60);        // 6s..1h, whole seconds
  double panic_window_percentage = 10.0;                    // of the stable window, 1..100
  double panic_threshold = 2.0;                             // desired / ready that starts panic, 1.1..10
  double max_scale_up_rate = 1000.0;                        // > 1: at most ceil(rate x ready) replicas
  double max_scale_down_rate = 2.0;                         // > 1: at least floor(ready / rate) replicas
  Duration scale_to_zero_grace = std::chrono::seconds(30);  // 0..24h
  bool operator==(const ServiceAutoscaling&) const = default;
};

// What keeps a client on one version and replica: an HTTP request header or a cookie, by name.
enum class StickyKey { kHeader, kCookie };
std::string_view StickyKeyName(StickyKey k);  // "header", "cookie"

// `traffic.sticky: {header: X-User}` or `{cookie: gpugeek-version}`: requests with the same value of it go to
// the same version (and, while it is ready, the same replica). `name` is an HTTP token (RFC 9110 section 5.6.2:
// letters, digits and !#$%&'*+-.^_`|~), 1-256 characters; a cookie name is one too (RFC 6265 section 4.1.1).
struct StickySessions {
  StickyKey key = StickyKey::kHeader;
  std::string name;
  bool operator==(const StickySessions&) const = default;
};

// `traffic.activator:` requests that arrive while no replica is ready (scaled to zero, or all starting) wait
// in the gateway's activator, at most `queue` of them (more are answered 503) and each at most `timeout`
// (then 504). queue 10000 is the Knative activator's breaker queue depth (pkg/activator/net/throttler.go,
// breakerQueueDepth). timeout 60s is our choice, not a Knative figure (Knative bounds the whole request by
// revision-timeout-seconds, 300s): long enough for a replica that was placed to load a model of a few GB,
// shorter than the usual client and load-balancer timeouts so the client sees our answer.
struct ActivatorPolicy {
  int queue = 10'000;                           // requests; 0..1000000 (0: answer 503 at once)
  Duration timeout = std::chrono::seconds(60);  // 1s..1h
  bool operator==(const ActivatorPolicy&) const = default;
};

struct TrafficPolicy {
  std::optional<StickySessions> sticky;  // unset: each request goes where the balancer sends it
  ActivatorPolicy activator;
  // Retries of an idempotent request (GET, HEAD, OPTIONS, PUT, DELETE) on another replica after a connection
  // failure or a 502/503/504; 0..10. Default 2.
  int retries = 2;
  // `auth: token`: every request needs `Authorization: Bearer <gpugeek API token>` of a user of the service's
  // tenant (or an admin); the gateway verifies it (gateway/token_check.h) and names the caller to the replica
  // (Gpugeek-User, Gpugeek-Tenant). `none` (the default): anyone who reaches the gateway may call.
  bool auth_token = false;
  bool operator==(const TrafficPolicy&) const = default;
};

inline constexpr int kMaxServiceVersions = 8;

// One version of the service: what its replicas run, and its share of the requests.
struct ServiceVersion {
  std::string name;        // 1-32 of [a-z0-9-], starting and ending with a letter or digit ("v1")
  int weight_percent = 0;  // 0..100; the versions' weights sum to 100
  // What each replica runs, as ParseJobSpec read it; `run.name` is the service's name, num_nodes is 1 and
  // checkpoint, retry, elastic, max_duration, idle_timeout and task->tokens keep their defaults.
  JobSpec run;
};

struct ServiceSpec {
  std::string name;  // a job's name rule: 1-63 of [a-z0-9-], starting and ending with a letter or digit
  // The port the replica's server listens on inside its allocation (its `run` finds it in $PORT too); 1..65535.
  // Default 8080, Knative's default container port.
  int port = 8080;
  ReadinessProbe readiness;
  // How long a replica may take from its start to its first ready probe before it is stopped and started
  // again; 1s..24h. Unset: the caller sizes it (a model's load time depends on its size and storage).
  std::optional<Duration> startup_budget;
  ReplicaBounds replicas;
  ServiceAutoscaling autoscaling;
  TrafficPolicy traffic;
  std::vector<ServiceVersion> versions;  // 1..kMaxServiceVersions, distinct names, in the spec's order
};

// Parses and validates a service spec from YAML text. `catalog` resolves GPU names (as for ParseJobSpec).
// Bounded as ParseJobSpec is, with the same limits on the whole document (api/bounded_yaml.h): at most 1 MiB
// of text, 10,000 '[' and '{', one document, 100,000 values nested at most 64 deep, aliases counted as copies,
// no key twice in a mapping. `kind: service` is required.
// Each version's run part (its mapping without `name` and `weight`; the top level without the service's own
// fields in the shorthand) is rendered back to YAML with `name:` set to the service's name and read by
// ParseJobSpec; its errors come back with the version's path in front ("versions[1].resources.accelerators:
// ..."). Refused in a version, each with the reason: num_nodes other than 1, elastic, checkpoint, retry,
// max_duration, idle_timeout, a task other than inference and task.tokens.
// Returns the spec, or InvalidArgument whose message starts with the field's path and says how to fix it.
absl::StatusOr<ServiceSpec> ParseServiceSpec(std::string_view yaml_text,
                                             const hw::GpuCatalog& catalog = hw::GpuCatalog::Builtin());

// Renders a spec back to YAML, every field written out and the versions in full form, that ParseServiceSpec
// accepts and that parses to an equal spec (`spec` as ParseServiceSpec returns them).
std::string ServiceSpecToYaml(const ServiceSpec& spec);

}  // namespace gpugeek::api
