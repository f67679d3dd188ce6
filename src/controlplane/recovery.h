#pragma once
// The phases of one job's recovery, from a failure to RUNNING again (State::Recovery holds the moments;
// controllers/transitions.h PhasesOf turns them into these).

#include <string>

#include <fmt/format.h>

namespace gpugeek::controlplane {

// Seconds: failure -> detected (the job requeued), -> every member stopped (its allocation released),
// -> placed again, -> running; and the whole, failure -> running.
struct RecoveryPhases {
  double detect_s = 0, stop_s = 0, place_s = 0, start_s = 0, total_s = 0;
  // "recovered in 3.9 s: detected 3.0 s after the failure, stopped +0.0 s, placed +0.1 s, running +0.8 s".
  std::string Text() const {
    return fmt::format(
        "recovered in {:.1f} s: detected {:.1f} s after the failure, stopped +{:.1f} s, placed +{:.1f} s, "
        "running +{:.1f} s",
        total_s, detect_s, stop_s, place_s, start_s);
  }
};

}  // namespace gpugeek::controlplane
