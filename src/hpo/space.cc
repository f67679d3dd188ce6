#include "hpo/space.h"

#include <algorithm>
#include <set>

#include "common/status_macros.h"
#include "common/utf8.h"
#include "fmt/format.h"

namespace gpugeek::hpo {
namespace {

constexpr size_t kMaxParams = 64;
constexpr size_t kMaxChoices = 256;

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

bool IsIntegral(double v) { return std::isfinite(v) && v == std::floor(v) && std::abs(v) <= 9.0e15; }

std::string_view KindName(ParamKind kind) {
  switch (kind) {
    case ParamKind::kFloat:
      return "float";
    case ParamKind::kInt:
      return "int";
    case ParamKind::kCategorical:
      return "categorical";
  }
  return "float";
}

}  // namespace

absl::StatusOr<SearchSpace> SearchSpace::Create(std::vector<ParamSpec> params) {
  if (params.empty()) return Invalid("search space: no parameters; give at least one");
  if (params.size() > kMaxParams) {
    return Invalid(fmt::format("search space: {} parameters; at most {}", params.size(), kMaxParams));
  }
  SearchSpace space;
  std::set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSpec& p = params[i];
    const std::string where = fmt::format("parameter {:?}", p.name);
    if (p.name.empty() || p.name.size() > 128)
      return Invalid(fmt::format("parameter {}: name must be 1-128 characters", i));
    // Names and choices travel as JSON (GPUGEEK_PARAMS, the API): text only.
    if (!IsUtf8(p.name)) return Invalid(fmt::format("parameter {}: name is not UTF-8 text", i));
    if (!names.insert(p.name).second) return Invalid(fmt::format("{}: defined twice", where));
    if (p.kind == ParamKind::kCategorical) {
      if (p.choices.empty()) return Invalid(fmt::format("{}: choices is empty; give at least one", where));
      if (p.choices.size() > kMaxChoices) {
        return Invalid(fmt::format("{}: {} choices; at most {}", where, p.choices.size(), kMaxChoices));
      }
      for (const std::string& c : p.choices) {
        if (!IsUtf8(c)) return Invalid(fmt::format("{}: a choice is not UTF-8 text", where));
      }
      if (std::set<std::string>(p.choices.begin(), p.choices.end()).size() != p.choices.size()) {
        return Invalid(fmt::format("{}: choices repeat a value", where));
      }
    } else {
      if (!std::isfinite(p.low) || !std::isfinite(p.high))
        return Invalid(fmt::format("{}: low and high must be finite", where));
      if (p.low > p.high || (p.kind == ParamKind::kFloat && p.low == p.high)) {
        return Invalid(fmt::format("{}: low {} must be below high {}", where, p.low, p.high));
      }
      if (p.log && p.low <= 0) return Invalid(fmt::format("{}: log scale needs low > 0 (low is {})", where, p.low));
      if (p.kind == ParamKind::kInt && (!IsIntegral(p.low) || !IsIntegral(p.high))) {
        return Invalid(fmt::format("{}: int bounds must be integers", where));
      }
    }
    int parent = -1;
    std::vector<int> allowed;
    if (!p.parent.empty()) {
      for (size_t j = 0; j < i; ++j) {
        if (params[j].name == p.parent) parent = static_cast<int>(j);
      }
      if (parent < 0) return Invalid(fmt::format("{}: parent {:?} is not a parameter before it", where, p.parent));
      const ParamSpec& pp = params[parent];
      if (pp.kind != ParamKind::kCategorical) {
        return Invalid(fmt::format("{}: parent {:?} must be categorical", where, p.parent));
      }
      if (p.when.empty()) return Invalid(fmt::format("{}: a parent needs `when` choices", where));
      for (const std::string& w : p.when) {
        auto it = std::find(pp.choices.begin(), pp.choices.end(), w);
        if (it == pp.choices.end()) {
          return Invalid(fmt::format("{}: when {:?} is not a choice of {:?}", where, w, p.parent));
        }
        allowed.push_back(static_cast<int>(it - pp.choices.begin()));
      }
    } else if (!p.when.empty()) {
      return Invalid(fmt::format("{}: `when` needs a parent", where));
    }
    space.parents_.push_back(parent);
    space.when_index_.push_back(std::move(allowed));
  }
  space.params_ = std::move(params);
  return space;
}

bool SearchSpace::has_conditions() const {
  return std::any_of(parents_.begin(), parents_.end(), [](int p) { return p >= 0; });
}

bool SearchSpace::all_numeric() const {
  return std::none_of(params_.begin(), params_.end(),
                      [](const ParamSpec& p) { return p.kind == ParamKind::kCategorical; });
}

bool SearchSpace::IsActive(size_t i, const Point& point) const {
  for (int p = parents_[i], child = static_cast<int>(i); p >= 0; child = p, p = parents_[p]) {
    const double v = point[p];
    if (IsInactive(v)) return false;
    const auto& allowed = when_index_[child];
    if (std::find(allowed.begin(), allowed.end(), static_cast<int>(v)) == allowed.end()) return false;
  }
  return true;
}

void SearchSpace::Deactivate(Point& point) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (parents_[i] >= 0 && !IsActive(i, point)) point[i] = kInactive;
  }
}

double SearchSpace::TransformedLow(size_t i) const {
  const ParamSpec& p = params_[i];
  const double low = p.kind == ParamKind::kInt ? p.low - 0.5 : p.low;
  return p.log ? std::log(low) : low;
}

double SearchSpace::TransformedHigh(size_t i) const {
  const ParamSpec& p = params_[i];
  const double high = p.kind == ParamKind::kInt ? p.high + 0.5 : p.high;
  return p.log ? std::log(high) : high;
}

double SearchSpace::Transform(size_t i, double value) const { return params_[i].log ? std::log(value) : value; }

double SearchSpace::Untransform(size_t i, double transformed) const {
  const ParamSpec& p = params_[i];
  double v = p.log ? std::exp(transformed) : transformed;
  if (p.kind == ParamKind::kInt) v = std::round(v);
  return std::clamp(v, p.low, p.high);
}

double SearchSpace::ToUnit(size_t i, double value) const {
  const double lo = TransformedLow(i), hi = TransformedHigh(i);
  return std::clamp((Transform(i, value) - lo) / (hi - lo), 0.0, 1.0);
}

double SearchSpace::FromUnit(size_t i, double unit) const {
  const double lo = TransformedLow(i), hi = TransformedHigh(i);
  return Untransform(i, lo + std::clamp(unit, 0.0, 1.0) * (hi - lo));
}

nlohmann::json SearchSpace::PointToJson(const Point& point) const {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (IsInactive(point[i])) continue;
    const ParamSpec& p = params_[i];
    switch (p.kind) {
      case ParamKind::kFloat:
        out[p.name] = point[i];
        break;
      case ParamKind::kInt:
        out[p.name] = static_cast<int64_t>(point[i]);
        break;
      case ParamKind::kCategorical:
        out[p.name] = p.choices[static_cast<size_t>(point[i])];
        break;
    }
  }
  return out;
}

absl::StatusOr<Point> SearchSpace::PointFromJson(const nlohmann::json& json) const {
  if (!json.is_object()) return Invalid("params: must be an object of parameter name to value");
  for (const auto& item : json.items()) {
    const std::string key = item.key();
    if (std::none_of(params_.begin(), params_.end(), [&](const ParamSpec& p) { return p.name == key; })) {
      return Invalid(fmt::format("params.{}: not a parameter of the search space", key));
    }
  }
  Point point(params_.size(), kInactive);
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& p = params_[i];
    if (!IsActive(i, point)) {
      if (json.contains(p.name)) return Invalid(fmt::format("params.{}: given but inactive under its parent", p.name));
      continue;
    }
    if (!json.contains(p.name)) return Invalid(fmt::format("params.{}: missing", p.name));
    const nlohmann::json& v = json[p.name];
    if (p.kind == ParamKind::kCategorical) {
      if (!v.is_string()) return Invalid(fmt::format("params.{}: must be one of the choices (a string)", p.name));
      auto it = std::find(p.choices.begin(), p.choices.end(), v.get<std::string>());
      if (it == p.choices.end())
        return Invalid(fmt::format("params.{}: {} is not one of the choices", p.name, v.dump()));
      point[i] = static_cast<double>(it - p.choices.begin());
      continue;
    }
    if (!v.is_number()) return Invalid(fmt::format("params.{}: must be a number", p.name));
    const double x = v.get<double>();
    if (p.kind == ParamKind::kInt && !IsIntegral(x))
      return Invalid(fmt::format("params.{}: must be an integer", p.name));
    if (!(x >= p.low && x <= p.high)) {
      return Invalid(fmt::format("params.{}: {} is outside [{}, {}]", p.name, x, p.low, p.high));
    }
    point[i] = x;
  }
  return point;
}

absl::StatusOr<SearchSpace> SearchSpace::FromJson(const nlohmann::json& json) {
  if (!json.is_array()) return Invalid("space: must be a list of parameters");
  if (json.size() > kMaxParams)
    return Invalid(fmt::format("space: {} parameters; at most {}", json.size(), kMaxParams));
  std::vector<ParamSpec> params;
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& j = json[i];
    const std::string at = fmt::format("space[{}]", i);
    if (!j.is_object()) return Invalid(at + ": must be an object");
    for (const auto& [key, _] : j.items()) {
      static const std::set<std::string> kKeys = {"name", "type", "low", "high", "log", "choices", "parent", "when"};
      if (!kKeys.contains(key)) {
        return Invalid(
            fmt::format("{}.{}: unknown field; fields are name, type, low, high, log, choices, parent, when", at, key));
      }
    }
    ParamSpec p;
    if (!j.contains("name") || !j["name"].is_string()) return Invalid(at + ".name: must be a string");
    p.name = j["name"].get<std::string>();
    const std::string type = j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
    if (type == "float") {
      p.kind = ParamKind::kFloat;
    } else if (type == "int") {
      p.kind = ParamKind::kInt;
    } else if (type == "categorical") {
      p.kind = ParamKind::kCategorical;
    } else {
      return Invalid(at + ".type: must be float, int or categorical");
    }
    if (p.kind != ParamKind::kCategorical) {
      for (const char* key : {"low", "high"}) {
        if (!j.contains(key) || !j[key].is_number()) return Invalid(fmt::format("{}.{}: must be a number", at, key));
      }
      p.low = j["low"].get<double>();
      p.high = j["high"].get<double>();
      if (j.contains("log")) {
        if (!j["log"].is_boolean()) return Invalid(at + ".log: must be true or false");
        p.log = j["log"].get<bool>();
      }
    } else {
      if (!j.contains("choices") || !j["choices"].is_array())
        return Invalid(at + ".choices: must be a list of strings");
      for (const auto& c : j["choices"]) {
        if (!c.is_string()) return Invalid(at + ".choices: must be a list of strings");
        p.choices.push_back(c.get<std::string>());
        if (p.choices.size() > kMaxChoices) return Invalid(fmt::format("{}.choices: at most {}", at, kMaxChoices));
      }
    }
    if (j.contains("parent")) {
      if (!j["parent"].is_string()) return Invalid(at + ".parent: must be a parameter name");
      p.parent = j["parent"].get<std::string>();
      if (!j.contains("when") || !j["when"].is_array())
        return Invalid(at + ".when: must be a list of the parent's choices");
      for (const auto& w : j["when"]) {
        if (!w.is_string()) return Invalid(at + ".when: must be a list of the parent's choices");
        p.when.push_back(w.get<std::string>());
        if (p.when.size() > kMaxChoices) return Invalid(fmt::format("{}.when: at most {}", at, kMaxChoices));
      }
    }
    params.push_back(std::move(p));
  }
  return Create(std::move(params));
}

nlohmann::json SearchSpace::ToJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (const ParamSpec& p : params_) {
    nlohmann::json j = {{"name", p.name}, {"type", KindName(p.kind)}};
    if (p.kind == ParamKind::kCategorical) {
      j["choices"] = p.choices;
    } else {
      j["low"] = p.low;
      j["high"] = p.high;
      if (p.log) j["log"] = true;
    }
    if (!p.parent.empty()) {
      j["parent"] = p.parent;
      j["when"] = p.when;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace gpugeek::hpo
