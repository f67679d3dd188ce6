#pragma once
// A trial of a search as samplers and pruners see it: its point, its state, its reported values.
// Values are losses: lower is better. A study that maximises hands its samplers negated values.

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "hpo/space.h"

namespace gpugeek::hpo {

enum class TrialState { kRunning, kComplete, kPruned, kFailed };

struct Trial {
  int64_t number = 0;  // 0, 1, 2, ... in the order trials were asked for
  TrialState state = TrialState::kRunning;
  Point params;
  std::optional<double> value;  // the final loss, complete trials only
  // (step, loss) in the order reported; steps strictly increase (epochs, optimizer steps, ...).
  std::vector<std::pair<int64_t, double>> intermediate;

  // The loss reported at `step`, or the first one after it; nullopt if none reached it.
  std::optional<double> ValueAtOrAfter(int64_t step) const {
    for (const auto& [s, v] : intermediate) {
      if (s >= step) return v;
    }
    return std::nullopt;
  }
  int64_t last_step() const { return intermediate.empty() ? -1 : intermediate.back().first; }
};

using Trials = std::span<const Trial>;

}  // namespace gpugeek::hpo
