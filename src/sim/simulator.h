#pragma once
// Simulator: a discrete-event loop on a virtual clock that drives sched::Framework.
//
// Each pod arrives at its arrival time and gets exactly one scheduling attempt (failure is final,
// as in the FGD experiments); a placed pod with a runtime departs after it and its resources are
// released. Events at equal times: departures first, then arrivals in list order. The virtual clock
// (a FakeClock) is set to each event's time before the event runs.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/fake_clock.h"
#include "sched/framework.h"

namespace gpugeek::sim {

struct SimPod {
  std::string id;
  sched::ResourceShape shape;
  Duration arrival{};               // since the start of the simulation
  std::optional<Duration> runtime;  // none: never departs
};

struct SimEvent {
  enum class Kind { kArrival, kDeparture };
  Kind kind = Kind::kArrival;
  size_t pod = 0;                             // index into the pod list
  const sched::Decision* decision = nullptr;  // arrivals: the scheduling decision
};

class Simulator {
 public:
  // Borrows both; they must outlive the Simulator.
  Simulator(sched::Framework& framework, FakeClock& clock) : framework_(framework), clock_(clock) {}

  // Called after each event has been applied.
  using Observer = std::function<void(const SimEvent&)>;
  // Runs all events. Errors: a scheduling error (an invalid pod, a binder failure) names the pod.
  absl::Status Run(const std::vector<SimPod>& pods, const Observer& observer);

 private:
  sched::Framework& framework_;
  FakeClock& clock_;
};

}  // namespace gpugeek::sim
