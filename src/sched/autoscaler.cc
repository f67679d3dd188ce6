#include "sched/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace gpugeek::sched {
namespace {

int64_t SecondOf(MonoTime t) { return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count(); }

int64_t WholeSeconds(Duration d) {
  return std::max<int64_t>(1, std::llround(std::chrono::duration<double>(d).count()));
}

constexpr std::array<const char*, kScaleSignals> kUnits = {"in flight", "queued", "tokens in flight", "KV-cache use"};

}  // namespace

std::string_view ScaleSignalName(ScaleSignal s) {
  switch (s) {
    case ScaleSignal::kConcurrency:
      return "concurrency";
    case ScaleSignal::kQueueDepth:
      return "queue_depth";
    case ScaleSignal::kTokensInFlight:
      return "tokens_in_flight";
    case ScaleSignal::kKvCacheUse:
      return "kv_cache_use";
  }
  return "?";
}

absl::Status ValidateAutoscalerSpec(const AutoscalerSpec& spec) {
  bool any = false;
  for (int i = 0; i < kScaleSignals; ++i) {
    const double t = spec.target[i];
    if (!(t >= 0) || !std::isfinite(t)) {
      return absl::InvalidArgumentError(fmt::format("autoscaling.target.{}: {} must be a number >= 0 (0 = not used)",
                                                    ScaleSignalName(ScaleSignal(i)), t));
    }
    any = any || t > 0;
  }
  if (!any) return absl::InvalidArgumentError("autoscaling.target: give at least one signal a target above 0");
  if (spec.stable_window < std::chrono::seconds(6) || spec.stable_window > std::chrono::hours(1)) {
    return absl::InvalidArgumentError("autoscaling.stable_window: must be between 6s and 1h");
  }
  if (!(spec.panic_window_percentage >= 1 && spec.panic_window_percentage <= 100)) {
    return absl::InvalidArgumentError("autoscaling.panic_window_percentage: must be between 1 and 100");
  }
  if (!(spec.panic_threshold >= 1.1 && spec.panic_threshold <= 10)) {
    return absl::InvalidArgumentError("autoscaling.panic_threshold: must be between 1.1 and 10 (2 = 200 %)");
  }
  if (!(spec.max_scale_up_rate > 1 && std::isfinite(spec.max_scale_up_rate))) {
    return absl::InvalidArgumentError("autoscaling.max_scale_up_rate: must be above 1");
  }
  if (!(spec.max_scale_down_rate > 1 && std::isfinite(spec.max_scale_down_rate))) {
    return absl::InvalidArgumentError("autoscaling.max_scale_down_rate: must be above 1");
  }
  if (spec.scale_to_zero_grace < Duration::zero() || spec.scale_to_zero_grace > std::chrono::hours(24)) {
    return absl::InvalidArgumentError("autoscaling.scale_to_zero_grace: must be between 0s and 24h");
  }
  if (spec.min_replicas < 0 || spec.max_replicas < 0 || spec.max_replicas > 100000) {
    return absl::InvalidArgumentError("autoscaling: min_replicas and max_replicas must be between 0 and 100000");
  }
  if (spec.max_replicas > 0 && spec.max_replicas < spec.min_replicas) {
    return absl::InvalidArgumentError(
        fmt::format("autoscaling.max_replicas: {} is below min_replicas {}", spec.max_replicas, spec.min_replicas));
  }
  return absl::OkStatus();
}

Autoscaler::Autoscaler(const AutoscalerSpec& spec) : spec_(spec) {
  if (const absl::Status valid = ValidateAutoscalerSpec(spec); !valid.ok()) {
    // Callers validate specs where they come in (the service spec's parser): this one was not.
    fmt::print(stderr, "sched::Autoscaler: an unvalidated spec: {}\n", std::string(valid.message()));
    std::abort();
  }
}

void Autoscaler::Record(const ScaleSample& sample) {
  const int64_t second = SecondOf(sample.at);
  if (!seconds_.empty() && second < seconds_.back().second) return;  // out of order: dropped
  if (seconds_.empty() || seconds_.back().second != second) seconds_.push_back(Second{.second = second});
  Second& s = seconds_.back();
  ++s.samples;
  for (int i = 0; i < kScaleSignals; ++i)
    s.sum[i] += std::max(0.0, std::isfinite(sample.value[i]) ? sample.value[i] : 0);
  if (!first_second_) first_second_ = second;
  const int64_t keep = WholeSeconds(spec_.stable_window);
  while (!seconds_.empty() && seconds_.front().second <= second - keep) seconds_.pop_front();
}

double Autoscaler::Average(ScaleSignal signal, MonoTime now, Duration window) const {
  if (!first_second_) return 0;
  const int64_t last = SecondOf(now);
  const int64_t length = std::min(WholeSeconds(window), std::max<int64_t>(1, last - *first_second_ + 1));
  double total = 0;
  for (const Second& s : seconds_) {
    if (s.second > last - length && s.second <= last) total += s.sum[static_cast<int>(signal)] / s.samples;
  }
  return total / static_cast<double>(length);
}

ScaleDecision Autoscaler::Decide(MonoTime now, int ready, int current) {
  if (current < 0) current = ready;
  ScaleDecision d;
  auto bounded = [&](int n) {
    n = std::max(n, spec_.min_replicas);
    return spec_.max_replicas > 0 ? std::min(n, spec_.max_replicas) : n;
  };
  if (!first_second_) {
    d.desired = bounded(std::max(current, 0));
    d.reason = "no load reported yet";
    return d;
  }
  const double ready_count = std::max(1, ready);  // Knative: 1 when none is ready
  const int max_up = static_cast<int>(std::ceil(spec_.max_scale_up_rate * ready_count));
  const int max_down = static_cast<int>(std::floor(ready_count / spec_.max_scale_down_rate));
  const Duration panic_window =
      std::chrono::duration_cast<Duration>(spec_.stable_window * (spec_.panic_window_percentage / 100.0));
  int stable_count = 0, panic_count = 0;
  ScaleSignal stable_by = ScaleSignal::kConcurrency, panic_by = ScaleSignal::kConcurrency;
  std::array<double, kScaleSignals> stable{}, panic{};
  for (int i = 0; i < kScaleSignals; ++i) {
    if (spec_.target[i] <= 0) continue;
    const auto s = static_cast<ScaleSignal>(i);
    stable[i] = Average(s, now, spec_.stable_window);
    panic[i] = Average(s, now, panic_window);
    const int dspc = static_cast<int>(std::min(1e9, std::ceil(stable[i] / spec_.target[i])));
    const int dppc = static_cast<int>(std::min(1e9, std::ceil(panic[i] / spec_.target[i])));
    if (dspc > stable_count) stable_count = dspc, stable_by = s;
    if (dppc > panic_count) panic_count = dppc, panic_by = s;
  }
  const int desired_stable = std::clamp(stable_count, max_down, std::max(max_down, max_up));
  const int desired_panic = std::clamp(panic_count, max_down, std::max(max_down, max_up));

  if (panic_count / ready_count >= spec_.panic_threshold) {
    panic_since_ = now;  // enter, or extend
  } else if (panic_since_ && now > *panic_since_ + spec_.stable_window) {
    panic_since_.reset();
    max_panic_replicas_ = 0;
  }
  d.desired = desired_stable;
  d.deciding = stable_by;
  if (panic_since_) {
    d.panicking = true;
    if (desired_panic > d.desired) d.desired = desired_panic, d.deciding = panic_by;
    d.desired = std::max(d.desired, max_panic_replicas_);  // never down while panicking
    max_panic_replicas_ = d.desired;
  }
  const int signal = static_cast<int>(d.deciding);
  d.stable_average = stable[signal];
  d.panic_average = panic[signal];
  const auto window_s = d.panicking ? WholeSeconds(panic_window) : WholeSeconds(spec_.stable_window);
  d.reason =
      fmt::format("{}{:.1f} {} over {} s (target {} per replica)", d.panicking ? "panic: " : "",
                  d.panicking ? d.panic_average : d.stable_average, kUnits[signal], window_s, spec_.target[signal]);

  const bool window_full = SecondOf(now) - *first_second_ + 1 >= WholeSeconds(spec_.stable_window);
  if (d.desired == 0 && !window_full && current > 0) {
    d.desired = current;  // not a whole stable window of samples yet: too early to call the service idle
    d.reason = "idle so far, for less than the stable window";
  }
  if (d.desired > 0) {
    last_above_zero_ = now;
  } else if (ready > 0 && last_above_zero_ && now - *last_above_zero_ < spec_.scale_to_zero_grace) {
    d.desired = 1;  // idle, but within the grace period
    d.reason = fmt::format("idle for less than the scale-to-zero grace ({} s)",
                           std::chrono::duration_cast<std::chrono::seconds>(spec_.scale_to_zero_grace).count());
  } else {
    d.reason = "idle: no load over the stable window";
  }
  d.desired = bounded(d.desired);
  return d;
}

}  // namespace gpugeek::sched
