#pragma once
// Learning curves of the LCBench surrogate table (../shared/bench/hpo/data/lcbench_surrogate_curves.csv.gz:
// YAHPO Gym's LCBench surrogate, 5 OpenML tasks x 1,000 configurations x 52 epochs), for early-stopping
// experiments without training anything.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::hpo::testing {

struct LearningCurves {
  // Per configuration: validation accuracy in % after epochs 1..52, and cumulative training seconds.
  std::vector<std::vector<double>> accuracy;
  std::vector<std::vector<double>> seconds;
};

// task id -> curves. Reads the gzip CSV (zlib). Errors name the line.
absl::StatusOr<std::map<std::string, LearningCurves>> LoadLcBench(const std::string& path);

}  // namespace gpugeek::hpo::testing
