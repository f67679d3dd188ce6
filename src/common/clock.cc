#include "common/clock.h"

namespace gpugeek {
namespace {
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); }
  MonoTime Monotonic() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
  }
};
}  // namespace

Clock& RealClock() {
  static SystemClock* clock = new SystemClock();  // never destroyed: safe during static teardown
  return *clock;
}

}  // namespace gpugeek
