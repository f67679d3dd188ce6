#pragma once
// FakeClock: a manually advanced clock for tests and the simulator's virtual time.
//
// Advance moves wall and monotonic time together, as time passing does. StepWall moves only the wall
// clock, as NTP or `date -s` would: intervals measured on Monotonic() must not notice.

#include <atomic>

#include "common/clock.h"

namespace gpugeek {

// Thread-safety: every method may be called concurrently.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{}) : wall_(start.time_since_epoch().count()) {}
  TimePoint Now() const override { return TimePoint(Duration(wall_.load())); }
  MonoTime Monotonic() const override { return MonoTime(Duration(mono_.load())); }
  void Advance(Duration d) {
    wall_ += d.count();
    mono_ += d.count();
  }
  // Sets the wall clock only (a step); monotonic time does not move.
  void Set(TimePoint t) { wall_ = t.time_since_epoch().count(); }
  // Steps the wall clock by `d` (may be negative); monotonic time does not move.
  void StepWall(Duration d) { wall_ += d.count(); }

 private:
  std::atomic<Duration::rep> wall_;
  std::atomic<Duration::rep> mono_{0};
};

}  // namespace gpugeek
