#include "sim/simulator.h"

#include <queue>

#include <fmt/format.h>

namespace gpugeek::sim {
namespace {

struct QueuedEvent {
  Duration time;
  int kind_order;  // departures (0) before arrivals (1) at equal times
  size_t seq;
  SimEvent::Kind kind;
  size_t pod;
  bool operator>(const QueuedEvent& o) const {
    if (time != o.time) return time > o.time;
    if (kind_order != o.kind_order) return kind_order > o.kind_order;
    return seq > o.seq;
  }
};

// Everything of a shape that decides where it fits, as text (equal keys fit or fail alike).
std::string ShapeKey(const sched::ResourceShape& s) {
  return fmt::format("{},{},{},{},{}", s.cpu_milli, s.memory_bytes, s.num_gpus, s.gpu_milli,
                     fmt::join(s.allowed_models, "|"));
}

}  // namespace

absl::Status Simulator::Run(const std::vector<SimPod>& pods, const Observer& observer) {
  std::priority_queue<QueuedEvent, std::vector<QueuedEvent>, std::greater<>> events;
  size_t seq = 0;
  for (size_t i = 0; i < pods.size(); ++i) events.push({pods[i].arrival, 1, seq++, SimEvent::Kind::kArrival, i});
  std::vector<std::vector<sched::Placement>> running(pods.size());
  std::vector<bool> attempted(pods.size(), false);
  queue_ = sched::SchedulingQueue(options_.queue);
  for (const auto& [tenant, config] : options_.tenants) {
    if (absl::Status st = queue_.ledger().SetTenant(tenant, config); !st.ok()) return st;
  }
  const MonoTime start = clock_.Monotonic();
  Duration now{0};
  sched::AcceptAllBinder binder;
  sched::Request request;
  request.alternatives.resize(1);
  const sched::Decision parked_decision;  // unschedulable, no reasons

  // The observer's view of an attempt (or of a pod parked by shape) of pod `i`.
  auto observe = [&](size_t i, const sched::Decision& decision, bool over_quota) {
    SimEvent event{attempted[i] ? SimEvent::Kind::kRetry : SimEvent::Kind::kArrival, i, &decision, over_quota};
    attempted[i] = true;
    if (observer) observer(event);
  };
  const sched::SchedulingQueue::AttemptFn attempt =
      [&](const sched::QueueItem& item) -> absl::StatusOr<sched::AttemptOutcome> {
    const size_t i = item.payload;
    const SimPod& pod = pods[i];
    request.id = pod.id;
    request.priority = pod.priority;
    request.alternatives[0] = pod.shape;
    absl::StatusOr<sched::QuotaAttempt> a =
        sched::ScheduleWithinQuota(queue_.ledger(), item.key, pod.tenant, request, framework_, binder, start + now);
    if (!a.ok()) {
      return absl::Status(a.status().code(), fmt::format("pod '{}': {}", pod.id, std::string(a.status().message())));
    }
    if (a->over_quota) {
      observe(i, parked_decision, true);
      if (!options_.requeue_unschedulable) return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kDropped, ""};
      return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kOverQuota, std::move(a->reason)};
    }
    const sched::Decision* d = &a->decision;
    if (d->scheduled && pod.runtime) {
      running[i] = d->placements;
      events.push({now + *pod.runtime, 0, seq++, SimEvent::Kind::kDeparture, i});
    }
    observe(i, *d, false);
    if (d->scheduled) return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kPlaced, ""};
    if (!options_.requeue_unschedulable) return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kDropped, ""};
    return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kUnschedulable,
                                 d->reasons.empty() ? "no node fits" : d->reasons.front().reason};
  };
  const sched::SchedulingQueue::ParkedFn parked = [&](const sched::QueueItem& item, const std::string&) {
    const bool over_quota = queue_.State(item.key) == sched::QueueState::kOverQuota;
    observe(item.payload, parked_decision, over_quota);
    // Without requeueing a failure is final, over quota too (shapes are never parked then).
    if (!options_.requeue_unschedulable) queue_.Remove(item.key);
  };

  while (true) {
    std::optional<Duration> next;
    if (!events.empty()) next = events.top().time;
    if (auto b = queue_.NextBackoffExpiry(); b && (!next || *b - start < *next)) next = *b - start;
    if (!next) break;
    clock_.Advance(*next - now);
    now = *next;
    while (!events.empty() && events.top().time == now) {
      const QueuedEvent e = events.top();
      events.pop();
      if (e.kind == SimEvent::Kind::kDeparture) {
        framework_.Release(running[e.pod]);
        running[e.pod].clear();
        queue_.ledger().Release(std::to_string(e.pod), start + now);
        queue_.CapacityChanged();
        if (observer) observer(SimEvent{e.kind, e.pod, nullptr});
        continue;
      }
      const SimPod& pod = pods[e.pod];
      // Every key is new: pods are added once, by index.
      (void)queue_.Add(sched::QueueItem{std::to_string(e.pod), pod.priority, e.pod, ShapeKey(pod.shape), e.pod,
                                        pod.tenant, int64_t{pod.shape.num_gpus} * pod.shape.gpu_milli});
    }
    absl::StatusOr<sched::CycleStats> cycle = queue_.RunCycle(start + now, attempt, parked);
    if (!cycle.ok()) return cycle.status();
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::sim
