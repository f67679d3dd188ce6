#pragma once
// Clock: the one source of time for code that must also run under a virtual clock (the simulator,
// tests). Nothing outside common/ reads the wall clock directly.

#include <chrono>

namespace gpugeek {

// A point in time on a Clock: nanoseconds since the clock's epoch (Unix epoch for RealClock).
using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;

// Thread-safety: implementations must be safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// The system (wall) clock. Returns a process-wide instance that lives forever.
Clock& RealClock();

}  // namespace gpugeek
