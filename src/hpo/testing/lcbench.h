#pragma once
// Learning curves of the LCBench surrogate table (../shared/bench/hpo/data/lcbench_surrogate_curves.csv.gz:
// YAHPO Gym's LCBench surrogate, 5 OpenML tasks x 1,000 configurations x 52 epochs), for early-stopping
// experiments without training anything.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hpo/pruner.h"
#include "hpo/trial.h"

namespace gpugeek::hpo::testing {

struct LearningCurves {
  // Per configuration: validation accuracy in % after epochs 1..52, and cumulative training seconds.
  std::vector<std::vector<double>> accuracy;
  std::vector<std::vector<double>> seconds;
};

// task id -> curves. Reads the gzip CSV (zlib). Errors name the line.
absl::StatusOr<std::map<std::string, LearningCurves>> LoadLcBench(const std::string& path);

// One search of the early-stopping protocol of ../shared/bench/hpo/optuna_reference.py (random sampling as
// in the ASHA paper): configurations drawn uniformly, each trained epoch by epoch (its accuracy reported,
// maximised) until `pruner` stops it or it completes 52 epochs, until `budget_epochs` epochs are spent.
struct LcBenchSearch {
  // Per entry of `marks`: the best final accuracy among complete trials when that many epochs had been
  // spent; -1 when none had completed.
  std::vector<double> best_at;
  double best = -1;           // the same at the end
  double gpu_seconds = 0;     // surrogate training seconds of every trial, pruned ones up to their stop
  std::vector<Trial> trials;  // as the study holds them (losses: negated accuracies)
};
LcBenchSearch RunLcBenchSearch(const LearningCurves& curves, const PrunerConfig& pruner, uint64_t seed,
                               int64_t budget_epochs, const std::vector<int64_t>& marks = {});

}  // namespace gpugeek::hpo::testing
