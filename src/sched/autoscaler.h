#pragma once
// Autoscaler: how many replicas a service should run, from the load it reports. Pure (no clock of its own, no
// I/O, no threads), so the deployment controller and the simulator run the same decisions.
//
// The model is Knative Serving's KPA (pkg/autoscaler/scaling/autoscaler.go, defaults from config-autoscaler):
//   - the load signal (in-flight requests by default) is averaged per second over a stable window (60 s) and a
//     panic window (10 % of it, 6 s);
//   - desired = ceil(average / target per replica) for each window, bounded by the rates: at most
//     ceil(max_scale_up_rate x ready) up and at least floor(ready / max_scale_down_rate) down (ready counted as
//     1 when none is);
//   - panic starts when the panic window's desired count is at least panic_threshold (2.0) times the replicas
//     ready; while it lasts the panic window decides and the count never goes down; it ends a stable window
//     after the last time the threshold was crossed;
//   - scale to zero: 0 only once the stable window saw no load at all and scale_to_zero_grace (30 s) has passed
//     since the last decision above zero.
// LLM services scale on what saturates them rather than request counts (queue depth, tokens in flight, KV-cache
// use): each signal with a target gets its own desired count, computed as the concurrency one, and the largest
// wins. min_replicas / max_replicas bound the result (as Knative's min-scale / max-scale annotations).
//
// Units: times are the caller's monotonic clock; every signal is a sum over the service's replicas (requests
// in flight, requests queued, tokens in flight, KV-cache use as a fraction per replica, so 3 replicas at 90 %
// report 2.7). Not thread-safe: one Autoscaler per service, on the controller's thread.

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"

namespace gpugeek::sched {

// The load signals a service reports; a Sample holds each summed over its replicas at one moment.
enum class ScaleSignal { kConcurrency = 0, kQueueDepth, kTokensInFlight, kKvCacheUse };
inline constexpr int kScaleSignals = 4;
std::string_view ScaleSignalName(ScaleSignal s);  // "concurrency", "queue_depth", "tokens_in_flight", "kv_cache_use"

struct AutoscalerSpec {
  // Target per replica for each signal; 0 = the signal is not used. Concurrency: Knative's
  // container-concurrency-target-default 100 x target-utilization 70 %.
  std::array<double, kScaleSignals> target = {70.0, 0.0, 0.0, 0.0};
  Duration stable_window = std::chrono::seconds(60);  // 6 s .. 1 h, whole seconds
  double panic_window_percentage = 10.0;              // of the stable window, 1 .. 100
  double panic_threshold = 2.0;                       // 200 %: desired (panic window) / ready
  double max_scale_up_rate = 1000.0;                  // > 1
  double max_scale_down_rate = 2.0;                   // > 1
  Duration scale_to_zero_grace = std::chrono::seconds(30);
  int min_replicas = 0;  // 0 = may scale to zero
  int max_replicas = 0;  // 0 = no bound
};

// InvalidArgument naming the field and its range when `spec` is outside the ranges above (a target below 0,
// no target above 0, max_replicas below min_replicas, ...).
absl::Status ValidateAutoscalerSpec(const AutoscalerSpec& spec);

struct ScaleSample {
  MonoTime at;
  std::array<double, kScaleSignals> value{};  // indexed by ScaleSignal; negative values count as 0
};

struct ScaleDecision {
  int desired = 0;  // replicas to run
  bool panicking = false;
  ScaleSignal deciding = ScaleSignal::kConcurrency;  // the signal whose count won
  double stable_average = 0;                         // of the deciding signal, over the stable window
  double panic_average = 0;                          // ... over the panic window
  std::string reason;  // for events and `gpugeek replicas`, e.g. "panic: 350.0 in flight over 6 s"
};

class Autoscaler {
 public:
  // `spec` must pass ValidateAutoscalerSpec (a broken invariant otherwise).
  explicit Autoscaler(const AutoscalerSpec& spec);

  // Adds a sample. Samples within one second are averaged into that second; samples older than the newest
  // by more than the stable window are dropped, as are samples older than the last one recorded.
  void Record(const ScaleSample& sample);
  // The count for `now`, with `ready` replicas serving and `current` asked for already (ready or starting; -1:
  // unknown, taken as `ready`). Without any sample yet: the current count (max(current, min_replicas)), bounded by
  // max_replicas. An idle service is not scaled to zero before its samples span a whole stable window (a new
  // service keeps its initial replicas that long: Knative's scale-to-zero needs a stable window without traffic).
  ScaleDecision Decide(MonoTime now, int ready, int current = -1);

 private:
  struct Second {
    int64_t second = 0;  // since the monotonic epoch
    int samples = 0;
    std::array<double, kScaleSignals> sum{};
  };
  // The per-second average of `signal` over the `window` ending at `now` (seconds with no sample count as 0;
  // a window longer than the history is cut to it).
  double Average(ScaleSignal signal, MonoTime now, Duration window) const;

  AutoscalerSpec spec_;
  std::deque<Second> seconds_;  // oldest first
  std::optional<int64_t> first_second_;
  std::optional<MonoTime> panic_since_;  // the last time the panic threshold was crossed
  int max_panic_replicas_ = 0;
  std::optional<MonoTime> last_above_zero_;
};

}  // namespace gpugeek::sched
