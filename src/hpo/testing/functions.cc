#include "hpo/testing/functions.h"

#include <cmath>
#include <numbers>

namespace gpugeek::hpo::testing {
namespace {

constexpr double kPi = std::numbers::pi;

SearchSpace Box(int dims, double low, double high) {
  std::vector<ParamSpec> params;
  for (int i = 0; i < dims; ++i) {
    params.push_back({.name = "x" + std::to_string(i), .kind = ParamKind::kFloat, .low = low, .high = high});
  }
  return *SearchSpace::Create(std::move(params));
}

double Branin(const Point& x) {
  const double a = 1, b = 5.1 / (4 * kPi * kPi), c = 5 / kPi, r = 6, s = 10, t = 1 / (8 * kPi);
  const double u = x[1] - b * x[0] * x[0] + c * x[0] - r;
  return a * u * u + s * (1 - t) * std::cos(x[0]) + s;
}

double Hartmann6(const Point& x) {
  static constexpr double A[4][6] = {
      {10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14}, {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                     {2329, 4135, 8307, 3736, 1004, 9991},
                                     {2348, 1451, 3522, 2883, 3047, 6650},
                                     {4047, 8828, 8732, 5743, 1091, 381}};
  static constexpr double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += A[i][j] * (x[j] - 1e-4 * P[i][j]) * (x[j] - 1e-4 * P[i][j]);
    sum += alpha[i] * std::exp(-inner);
  }
  return -sum;
}

double Levy(const Point& x) {
  const size_t d = x.size();
  auto w = [&](size_t i) { return 1 + (x[i] - 1) / 4; };
  double s = std::pow(std::sin(kPi * w(0)), 2);
  for (size_t i = 0; i + 1 < d; ++i) {
    s += (w(i) - 1) * (w(i) - 1) * (1 + 10 * std::pow(std::sin(kPi * w(i) + 1), 2));
  }
  s += (w(d - 1) - 1) * (w(d - 1) - 1) * (1 + std::pow(std::sin(2 * kPi * w(d - 1)), 2));
  return s;
}

double Rosenbrock(const Point& x) {
  double s = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) s += 100 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1 - x[i], 2);
  return s;
}

// optimizer: (best log10 lr, offset); activation: offset. Optimum 0 at adam, lr 1e-3, 4 layers, batch 2^6, relu.
double Mixed(const Point& x) {
  static constexpr double kBestLr[] = {-1.5, -2.0, -3.0, -3.5};
  static constexpr double kOptOffset[] = {0.30, 0.15, 0.0, 0.10};
  static constexpr double kActOffset[] = {0.0, 0.02, 0.25, 0.6};
  const auto opt = static_cast<size_t>(x[0]);
  const double lr = std::log10(x[1]) - kBestLr[opt];
  return lr * lr + kOptOffset[opt] + 0.05 * (x[2] - 4) * (x[2] - 4) + 0.03 * (x[3] - 6) * (x[3] - 6) +
         kActOffset[static_cast<size_t>(x[4])];
}

}  // namespace

std::vector<TestFunction> ReferenceFunctions() {
  std::vector<TestFunction> out;
  out.push_back({"branin",
                 *SearchSpace::Create({{.name = "x0", .low = -5, .high = 10}, {.name = "x1", .low = 0, .high = 15}}),
                 Branin, 0.397887357729738});
  out.push_back({"hartmann6", Box(6, 0, 1), Hartmann6, -3.32236801141551});
  out.push_back({"levy10", Box(10, -10, 10), Levy, 0.0});
  out.push_back({"rosenbrock10", Box(10, -5, 10), Rosenbrock, 0.0});
  out.push_back(
      {"mixed",
       *SearchSpace::Create({
           {.name = "optimizer", .kind = ParamKind::kCategorical, .choices = {"sgd", "momentum", "adam", "rmsprop"}},
           {.name = "lr", .kind = ParamKind::kFloat, .low = 1e-6, .high = 1.0, .log = true},
           {.name = "layers", .kind = ParamKind::kInt, .low = 1, .high = 12},
           {.name = "log2_batch", .kind = ParamKind::kInt, .low = 3, .high = 10},
           {.name = "activation", .kind = ParamKind::kCategorical, .choices = {"relu", "gelu", "tanh", "sigmoid"}},
       }),
       Mixed, 0.0});
  return out;
}

}  // namespace gpugeek::hpo::testing
