#pragma once
// Is the grace period of early stopping too small? Successive halving ranks trials by their loss at the
// first rung; that only works if those ranks agree with the ranks at the end. This check measures the
// agreement on the trials that ran on: Spearman's rank correlation between the loss at the grace step and
// the loss at `final_step`, over every trial that reported both, and the same for each later rung step, so
// it can name the smallest step whose ranks do agree.

#include <optional>
#include <string>
#include <vector>

#include "hpo/trial.h"

namespace gpugeek::hpo {

struct GraceCheck {
  struct Rung {
    int64_t step;
    int pairs;   // trials with a loss at this step and at the final step
    double rho;  // Spearman's rank correlation of the two
  };
  std::vector<Rung> rungs;                 // the grace step first, then each later rung step
  bool too_small = false;                  // rho at the grace step < kMinAgreement over >= kMinPairs trials
  std::optional<int64_t> suggested_grace;  // the smallest rung step with rho >= kMinAgreement
  std::string message;                     // one line for people; empty when there is too little data
};

inline constexpr double kMinAgreement = 0.5;
inline constexpr int kMinPairs = 10;

// `rung_steps`: the grace step, then the later rung steps (SuccessiveHalvingPruner::RungSteps).
GraceCheck CheckGracePeriod(Trials history, const std::vector<int64_t>& rung_steps, int64_t final_step);

// Spearman's rho of two equally long samples (average ranks for ties); 0 when either is constant.
double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b);
// 0-based ranks of `x`, ties sharing their average rank: {3, 1, 3} -> {1.5, 0, 1.5}.
std::vector<double> AverageRanks(const std::vector<double>& x);

}  // namespace gpugeek::hpo
