#include "hpo/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fmt/format.h"
#include "hpo/grace_check.h"

namespace gpugeek::hpo {
namespace {

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : ""; }

}  // namespace

std::string_view TrialStateName(TrialState state) {
  switch (state) {
    case TrialState::kRunning:
      return "running";
    case TrialState::kComplete:
      return "complete";
    case TrialState::kPruned:
      return "pruned";
    case TrialState::kFailed:
      return "failed";
  }
  return "running";
}

std::vector<double> BestSoFar(Trials trials) {
  std::vector<double> out;
  double best = std::numeric_limits<double>::quiet_NaN();
  for (const Trial& t : trials) {
    if (t.state == TrialState::kComplete && t.value && !(*t.value >= best)) best = *t.value;
    out.push_back(best);
  }
  return out;
}

std::vector<Importance> ParameterImportance(const SearchSpace& space, Trials trials) {
  std::vector<Importance> out;
  double total = 0;
  for (size_t i = 0; i < space.size(); ++i) {
    const ParamSpec& spec = space.params()[i];
    std::vector<double> x, y;
    for (const Trial& t : trials) {
      if (t.state != TrialState::kComplete || !t.value || IsInactive(t.params[i])) continue;
      x.push_back(t.params[i]);
      y.push_back(*t.value);
    }
    Importance imp{.param = spec.name, .trials = static_cast<int>(x.size())};
    if (x.size() >= 4) {
      const std::vector<double> r = AverageRanks(y);
      const double n = static_cast<double>(r.size());
      const double mean = std::accumulate(r.begin(), r.end(), 0.0) / n;
      double ss_total = 0;
      for (double v : r) ss_total += (v - mean) * (v - mean);
      // Group: the choice index, or the equal-count bin of the value's rank.
      std::vector<int> group(x.size());
      int groups;
      if (spec.kind == ParamKind::kCategorical) {
        groups = static_cast<int>(spec.choices.size());
        for (size_t k = 0; k < x.size(); ++k) group[k] = static_cast<int>(x[k]);
      } else {
        groups = std::min(10, static_cast<int>(std::ceil(std::sqrt(n))));
        const std::vector<double> xr = AverageRanks(x);
        for (size_t k = 0; k < x.size(); ++k) group[k] = std::min(groups - 1, static_cast<int>(xr[k] * groups / n));
      }
      std::vector<double> sum(groups, 0), count(groups, 0);
      for (size_t k = 0; k < r.size(); ++k) sum[group[k]] += r[k], count[group[k]] += 1;
      double ss_between = 0;
      for (int g = 0; g < groups; ++g) {
        if (count[g] > 0) ss_between += count[g] * std::pow(sum[g] / count[g] - mean, 2);
      }
      imp.eta_squared = ss_total > 0 ? ss_between / ss_total : 0;
    }
    total += imp.eta_squared;
    out.push_back(imp);
  }
  for (Importance& imp : out) imp.share = total > 0 ? imp.eta_squared / total : 0;
  std::stable_sort(out.begin(), out.end(), [](const Importance& a, const Importance& b) { return a.share > b.share; });
  return out;
}

std::string TrialsCsv(const Study& study) {
  const SearchSpace& space = study.space();
  std::string out = "number,state,value";
  for (const ParamSpec& p : space.params()) out += "," + CsvField(p.name);
  out += ",last_step,last_intermediate\n";
  for (const Trial& t : study.trials()) {
    out += fmt::format("{},{},{}", t.number, TrialStateName(t.state), t.value ? Number(study.ValueOf(*t.value)) : "");
    for (size_t i = 0; i < space.size(); ++i) {
      const ParamSpec& p = space.params()[i];
      out += ",";
      if (IsInactive(t.params[i])) continue;
      if (p.kind == ParamKind::kCategorical) {
        out += CsvField(p.choices[static_cast<size_t>(t.params[i])]);
      } else if (p.kind == ParamKind::kInt) {
        out += fmt::format("{}", static_cast<int64_t>(t.params[i]));
      } else {
        out += Number(t.params[i]);
      }
    }
    if (t.intermediate.empty()) {
      out += ",,\n";
    } else {
      out += fmt::format(",{},{}\n", t.intermediate.back().first, Number(study.ValueOf(t.intermediate.back().second)));
    }
  }
  return out;
}

}  // namespace gpugeek::hpo
