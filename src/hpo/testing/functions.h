#pragma once
// The synthetic test functions of ../shared/bench/hpo/optuna_reference.py, with the same spaces and known
// minima, so that our samplers and Optuna's are measured on identical problems:
//   branin       2-D  x1 in [-5, 10], x2 in [0, 15]     f* = 0.397887357729738
//   hartmann6    6-D  [0, 1]^6                          f* = -3.32236801141551
//   levy10       10-D [-10, 10]^10                      f* = 0
//   rosenbrock10 10-D [-5, 10]^10                       f* = 0
//   mixed        optimizer, lr (log), layers, log2_batch, activation   f* = 0
// (Surjanovic & Bingham, Virtual Library of Simulation Experiments, for the first four.)

#include <functional>
#include <string>
#include <vector>

#include "hpo/space.h"

namespace gpugeek::hpo::testing {

struct TestFunction {
  std::string name;
  SearchSpace space;
  std::function<double(const Point&)> f;
  double minimum;
};

// The five functions, in the reference's order.
std::vector<TestFunction> ReferenceFunctions();

}  // namespace gpugeek::hpo::testing
