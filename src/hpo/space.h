#pragma once
// Search spaces of a hyper-parameter search: the parameters a trial draws, their kinds and bounds.
//
// A trial's parameters are one double per parameter, in the space's order ("a point"):
//   float        the value itself, in [low, high]
//   int          the integer value, in [low, high]
//   categorical  the index of the choice, 0 .. choices.size() - 1
//   inactive     NaN: a conditional parameter whose parent does not take one of its `when` choices
// Samplers that work in a continuous cube (CMA-ES, the GP) use the unit coordinate of a numeric parameter:
// the value mapped to [0, 1], through log for log-scaled parameters, with an integer's bounds widened by 0.5
// on each side so every integer owns an interval of equal width (as Optuna's TPE does).

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gpugeek::hpo {

enum class ParamKind { kFloat, kInt, kCategorical };

struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::kFloat;
  double low = 0;  // float and int, inclusive
  double high = 0;
  bool log = false;                  // sampled on a log scale; requires low > 0
  std::vector<std::string> choices;  // categorical
  // Conditional parameter: active only when the categorical parameter `parent` (earlier in the space) is
  // active and takes one of `when`.
  std::string parent;
  std::vector<std::string> when;
};

using Point = std::vector<double>;

inline constexpr double kInactive = std::numeric_limits<double>::quiet_NaN();
inline bool IsInactive(double v) { return std::isnan(v); }

class SearchSpace {
 public:
  // Checks every parameter: a non-empty unique name; low <= high (low < high for floats); low > 0 when log;
  // integral bounds for ints; at least one choice, no duplicates; a parent that is an earlier categorical
  // parameter and `when` choices it has. Errors name the parameter and the field.
  static absl::StatusOr<SearchSpace> Create(std::vector<ParamSpec> params);

  // The JSON form of a spec list, as an experiment spec holds it:
  //   [{"name": "lr", "type": "float", "low": 1e-5, "high": 1e-1, "log": true},
  //    {"name": "layers", "type": "int", "low": 1, "high": 12},
  //    {"name": "opt", "type": "categorical", "choices": ["adam", "sgd"]},
  //    {"name": "momentum", "type": "float", "low": 0, "high": 0.99, "parent": "opt", "when": ["sgd"]}]
  // At most 64 parameters and 256 choices each.
  static absl::StatusOr<SearchSpace> FromJson(const nlohmann::json& json);
  nlohmann::json ToJson() const;

  const std::vector<ParamSpec>& params() const { return params_; }
  size_t size() const { return params_.size(); }
  // Index of the parent of parameter i, or -1.
  int parent(size_t i) const { return parents_[i]; }
  bool has_conditions() const;
  bool all_numeric() const;

  // Whether parameter i is active in `point` (its parent chain takes allowed choices).
  bool IsActive(size_t i, const Point& point) const;
  // Sets every parameter that is inactive in `point` to kInactive, in order (parents come first).
  void Deactivate(Point& point) const;

  // Unit coordinate of a numeric parameter's value, in [0, 1]; and back (clamped, integers rounded).
  double ToUnit(size_t i, double value) const;
  double FromUnit(size_t i, double unit) const;
  // Bounds of a numeric parameter in its transformed scale (log for log-scaled; integers widened by 0.5).
  double TransformedLow(size_t i) const;
  double TransformedHigh(size_t i) const;
  double Transform(size_t i, double value) const;
  double Untransform(size_t i, double transformed) const;  // clamped to the bounds, integers rounded

  // {"lr": 0.001, "layers": 4, "opt": "adam"}; inactive parameters are left out.
  nlohmann::json PointToJson(const Point& point) const;
  // The inverse of PointToJson. Errors name the parameter: unknown, missing though active, wrong type,
  // out of bounds, not an integer, not one of the choices.
  absl::StatusOr<Point> PointFromJson(const nlohmann::json& json) const;

 private:
  std::vector<ParamSpec> params_;
  std::vector<int> parents_;
  std::vector<std::vector<int>> when_index_;  // allowed parent choice indices per parameter
};

}  // namespace gpugeek::hpo
