#include "hpo/grace_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fmt/format.h"

namespace gpugeek::hpo {

std::vector<double> AverageRanks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = 0.5 * static_cast<double>(i + j);
    i = j + 1;
  }
  return rank;
}

double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = AverageRanks(a), rb = AverageRanks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

GraceCheck CheckGracePeriod(Trials history, const std::vector<int64_t>& rung_steps, int64_t final_step) {
  GraceCheck check;
  for (int64_t step : rung_steps) {
    if (step >= final_step) break;
    std::vector<double> at, end;
    for (const Trial& t : history) {
      if (t.intermediate.empty() || t.last_step() < final_step) continue;
      const auto a = t.ValueAtOrAfter(step), b = t.ValueAtOrAfter(final_step);
      if (a && b && std::isfinite(*a) && std::isfinite(*b)) at.push_back(*a), end.push_back(*b);
    }
    check.rungs.push_back({.step = step, .pairs = static_cast<int>(at.size()), .rho = SpearmanRho(at, end)});
  }
  if (check.rungs.empty() || check.rungs.front().pairs < kMinPairs) return check;
  for (const GraceCheck::Rung& r : check.rungs) {
    if (r.pairs >= kMinPairs && r.rho >= kMinAgreement) {
      check.suggested_grace = r.step;
      break;
    }
  }
  const GraceCheck::Rung& grace = check.rungs.front();
  check.too_small = grace.rho < kMinAgreement;
  if (check.too_small) {
    check.message = fmt::format(
        "grace period {} is too small: ranks at step {} agree with ranks at step {} only by rho = {:.2f} over {} "
        "trials (want >= {:.1f}); {}",
        grace.step, grace.step, final_step, grace.rho, grace.pairs, kMinAgreement,
        check.suggested_grace ? fmt::format("step {} agrees (raise min_resource to it)", *check.suggested_grace)
                              : std::string("no rung agrees yet"));
  } else {
    check.message = fmt::format("grace period {} ranks agree with step {}: rho = {:.2f} over {} trials", grace.step,
                                final_step, grace.rho, grace.pairs);
  }
  return check;
}

}  // namespace gpugeek::hpo
