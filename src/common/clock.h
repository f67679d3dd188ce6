#pragma once
// Clock: the one source of time for code that must also run under a virtual clock (the simulator,
// tests). Nothing outside common/ reads the wall clock directly.

#include <chrono>

namespace gpugeek {

// A point in time on a Clock: nanoseconds since the clock's epoch (Unix epoch for RealClock).
using Duration = std::chrono::nanoseconds;
// Wall time: what users see (created_at, event times, "last heartbeat at"). It can step (NTP, an
// operator's `date -s`), so it never measures an interval.
using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;
// Monotonic time: every interval and deadline (heartbeat leases, node timeouts, SIGKILL after grace,
// backoff). Never steps; its epoch is arbitrary (boot for RealClock), so it is never shown or stored.
using MonoTime = std::chrono::time_point<std::chrono::steady_clock, Duration>;

// Thread-safety: implementations must be safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time, for display and stored timestamps.
  virtual TimePoint Now() const = 0;
  // Monotonic time, for intervals and deadlines.
  virtual MonoTime Monotonic() const = 0;
};

// The system (wall) clock. Returns a process-wide instance that lives forever.
Clock& RealClock();

}  // namespace gpugeek
