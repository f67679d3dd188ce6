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

}  // namespace

absl::Status Simulator::Run(const std::vector<SimPod>& pods, const Observer& observer) {
  std::priority_queue<QueuedEvent, std::vector<QueuedEvent>, std::greater<>> queue;
  size_t seq = 0;
  for (size_t i = 0; i < pods.size(); ++i) queue.push({pods[i].arrival, 1, seq++, SimEvent::Kind::kArrival, i});
  std::vector<std::vector<sched::Placement>> running(pods.size());
  const TimePoint start = clock_.Now();
  sched::AcceptAllBinder binder;
  sched::Request request;
  request.alternatives.resize(1);
  while (!queue.empty()) {
    const QueuedEvent e = queue.top();
    queue.pop();
    clock_.Set(start + e.time);
    SimEvent event{e.kind, e.pod, nullptr};
    if (e.kind == SimEvent::Kind::kDeparture) {
      framework_.Release(running[e.pod]);
      running[e.pod].clear();
      if (observer) observer(event);
      continue;
    }
    const SimPod& pod = pods[e.pod];
    request.id = pod.id;
    request.alternatives[0] = pod.shape;
    absl::StatusOr<sched::Decision> d = framework_.Schedule(request, binder);
    if (!d.ok()) {
      return absl::Status(d.status().code(), fmt::format("pod '{}': {}", pod.id, std::string(d.status().message())));
    }
    if (d->scheduled && pod.runtime) {
      running[e.pod] = d->placements;
      queue.push({e.time + *pod.runtime, 0, seq++, SimEvent::Kind::kDeparture, e.pod});
    }
    event.decision = &*d;
    if (observer) observer(event);
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::sim
