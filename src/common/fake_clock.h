#pragma once
// FakeClock: a manually advanced clock for tests and the simulator's virtual time.

#include <atomic>

#include "common/clock.h"

namespace gpugeek {

// Thread-safety: Now/Advance/Set may be called concurrently.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{}) : now_(start.time_since_epoch().count()) {}
  TimePoint Now() const override { return TimePoint(Duration(now_.load())); }
  void Advance(Duration d) { now_ += d.count(); }
  void Set(TimePoint t) { now_ = t.time_since_epoch().count(); }

 private:
  std::atomic<Duration::rep> now_;
};

}  // namespace gpugeek
