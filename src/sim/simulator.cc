#include "sim/simulator.h"

#include <algorithm>
#include <queue>

#include <fmt/format.h>

namespace gpugeek::sim {
namespace {

// What a queued event does; at equal times they run in this order.
enum class Step : uint8_t { kDeparture, kOutageEnd, kOutageBegin, kArrival };

struct QueuedEvent {
  Duration time;
  Step step;
  size_t seq;
  size_t index;      // the pod (departure, arrival) or the outage
  uint32_t run = 0;  // departures: the run of the pod they end (an eviction ends it earlier)
  bool operator>(const QueuedEvent& o) const {
    if (time != o.time) return time > o.time;
    if (step != o.step) return step > o.step;
    return seq > o.seq;
  }
};

// Everything of a pod that decides where it fits, as text (equal keys fit or fail alike).
std::string ShapeKey(const SimPod& p) {
  const sched::ResourceShape& s = p.shape;
  std::string key = fmt::format("{},{},{},{},{},{}", s.cpu_milli, s.memory_bytes, s.num_gpus, s.gpu_milli,
                                fmt::join(s.allowed_models, "|"), p.gang_size);
  for (sched::CapacityType c : p.capacity) key += fmt::format(",{}", sched::CapacityTypeName(c));
  return key;
}

}  // namespace

absl::Status Simulator::Run(const std::vector<SimPod>& pods, const Observer& observer) {
  const size_t num_nodes = framework_.cluster().size();
  for (const NodeOutage& o : options_.outages) {
    if (o.node < 0 || static_cast<size_t>(o.node) >= num_nodes) {
      return absl::InvalidArgumentError(
          fmt::format("outage of node {}: the cluster has nodes 0..{}", o.node, int64_t(num_nodes) - 1));
    }
    if (o.length <= Duration{0})
      return absl::InvalidArgumentError(fmt::format("outage of node {}: length <= 0", o.node));
  }
  std::priority_queue<QueuedEvent, std::vector<QueuedEvent>, std::greater<>> events;
  size_t seq = 0;
  for (size_t i = 0; i < pods.size(); ++i) events.push({pods[i].arrival, Step::kArrival, seq++, i});
  for (size_t i = 0; i < options_.outages.size(); ++i)
    events.push({options_.outages[i].at, Step::kOutageBegin, seq++, i});
  std::vector<std::vector<sched::Placement>> running(pods.size());
  std::vector<uint32_t> run(pods.size(), 0);  // bumped by each eviction
  std::vector<Duration> started(pods.size()), remaining(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) remaining[i] = pods[i].runtime.value_or(Duration{0});
  std::vector<int> outages_on(num_nodes, 0);
  std::vector<sched::Placement> held(num_nodes);
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

  auto enqueue = [&](size_t i) {
    const SimPod& pod = pods[i];
    // Every key is added once at a time: at arrival, and again only after an eviction.
    (void)queue_.Add(sched::QueueItem{std::to_string(i), pod.priority, i, ShapeKey(pod), i, pod.tenant,
                                      int64_t{pod.shape.num_gpus} * pod.shape.gpu_milli * pod.gang_size});
  };
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
    request.gang_size = pod.gang_size;
    request.distinct_nodes = pod.gang_size > 1;
    std::optional<sched::QuotaAttempt> a;
    for (size_t c = 0; c < std::max<size_t>(1, pod.capacity.size()); ++c) {
      request.capacity_type = pod.capacity.empty() ? std::nullopt : std::optional(pod.capacity[c]);
      absl::StatusOr<sched::QuotaAttempt> tried =
          sched::ScheduleWithinQuota(queue_.ledger(), item.key, pod.tenant, request, framework_, binder, start + now);
      if (!tried.ok()) {
        return absl::Status(tried.status().code(),
                            fmt::format("pod '{}': {}", pod.id, std::string(tried.status().message())));
      }
      a = *std::move(tried);
      if (a->over_quota || a->decision.scheduled) break;
    }
    if (a->over_quota) {
      observe(i, parked_decision, true);
      if (!options_.requeue_unschedulable) return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kDropped, ""};
      return sched::AttemptOutcome{sched::AttemptOutcome::Kind::kOverQuota, std::move(a->reason)};
    }
    const sched::Decision* d = &a->decision;
    if (d->scheduled) {
      running[i] = d->placements;
      started[i] = now;
      if (pod.runtime) events.push({now + remaining[i], Step::kDeparture, seq++, i, run[i]});
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
  // Gives back what pod `i` holds (it departed or was evicted).
  auto release = [&](size_t i) {
    framework_.Release(running[i]);
    running[i].clear();
    queue_.ledger().Release(std::to_string(i), start + now);
    queue_.CapacityChanged();
  };
  auto begin_outage = [&](sched::NodeIndex node) {
    if (outages_on[node]++ > 0) return;  // already out of service
    for (size_t i = 0; i < pods.size(); ++i) {
      if (running[i].empty() || std::none_of(running[i].begin(), running[i].end(),
                                             [&](const sched::Placement& p) { return p.node == node; })) {
        continue;
      }
      const Duration ran = now - started[i];
      remaining[i] =
          options_.remaining_after_eviction ? options_.remaining_after_eviction(i, remaining[i], ran) : remaining[i];
      ++run[i];  // its departure, if any, no longer comes
      release(i);
      if (observer) observer(SimEvent{SimEvent::Kind::kEviction, i, nullptr});
      enqueue(i);
    }
    held[node] = framework_.Hold(node);
  };
  auto end_outage = [&](sched::NodeIndex node) {
    if (--outages_on[node] > 0) return;
    framework_.Release({&held[node], 1});
    queue_.CapacityChanged();
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
      switch (e.step) {
        case Step::kDeparture:
          if (e.run != run[e.index]) break;  // evicted before its end
          release(e.index);
          if (observer) observer(SimEvent{SimEvent::Kind::kDeparture, e.index, nullptr});
          break;
        case Step::kOutageBegin: {
          const NodeOutage& o = options_.outages[e.index];
          begin_outage(o.node);
          events.push({now + o.length, Step::kOutageEnd, seq++, e.index});
          break;
        }
        case Step::kOutageEnd:
          end_outage(options_.outages[e.index].node);
          break;
        case Step::kArrival:
          enqueue(e.index);
          break;
      }
    }
    absl::StatusOr<sched::CycleStats> cycle = queue_.RunCycle(start + now, attempt, parked);
    if (!cycle.ok()) return cycle.status();
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::sim
