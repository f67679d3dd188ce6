#include "hpo/tpe_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "hpo/parzen_estimator.h"

namespace gpugeek::hpo {
namespace {

// Sort key of an observation: lower is better.
std::tuple<int, double, double> Rank(const Trial& t) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (t.state == TrialState::kComplete && t.value) return {0, 0.0, *t.value};
  if (t.state == TrialState::kPruned && !t.intermediate.empty()) {
    return {1, -static_cast<double>(t.intermediate.back().first), t.intermediate.back().second};
  }
  return {2, kInf, kInf};
}

bool Observable(const Trial& t) { return t.state != TrialState::kFailed; }

}  // namespace

size_t TpeGamma(size_t n) { return std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * n)), 25); }

void TpeSampler::SampleGroup(const SearchSpace& space, Trials history, const std::vector<size_t>& group, Point& point,
                             Rng& rng) const {
  std::vector<const Trial*> obs;
  for (const Trial& t : history) {
    if (!Observable(t)) continue;
    if (std::all_of(group.begin(), group.end(), [&](size_t i) { return !IsInactive(t.params[i]); })) obs.push_back(&t);
  }
  // Split into the good (below) and bad (above) groups, each kept in trial order for the weights.
  std::vector<size_t> order(obs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return Rank(*obs[a]) < Rank(*obs[b]); });
  const size_t n_below = TpeGamma(obs.size());
  std::vector<bool> below(obs.size(), false);
  for (size_t r = 0; r < n_below; ++r) below[order[r]] = true;
  std::vector<const Point*> below_pts, above_pts;
  for (size_t i = 0; i < obs.size(); ++i) (below[i] ? below_pts : above_pts).push_back(&obs[i]->params);
  const std::vector<double> below_w = TpeDefaultWeights(below_pts.size());
  const std::vector<double> above_w = TpeDefaultWeights(above_pts.size());

  const ParzenOptions po{.multivariate = options_.multivariate, .prior_weight = options_.prior_weight};
  const ParzenEstimator l(space, group, below_pts, below_w, po);
  const ParzenEstimator g(space, group, above_pts, above_w, po);
  const std::vector<Point> candidates = l.Sample(options_.ei_candidates, point, rng);
  double best = -std::numeric_limits<double>::infinity();
  for (const Point& c : candidates) {
    const double score = l.LogPdf(c) - g.LogPdf(c);
    if (score > best) {
      best = score;
      for (size_t i : group) point[i] = c[i];
    }
  }
}

Point TpeSampler::Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const {
  Rng rng = StreamRng(seed, static_cast<uint64_t>(number));
  int observed = 0;
  for (const Trial& t : history) {
    observed += t.state == TrialState::kComplete || t.state == TrialState::kPruned;
  }
  if (observed < options_.startup_trials) return SampleUniform(space, rng);

  Point point(space.size(), kInactive);
  if (options_.multivariate) {
    std::vector<size_t> joint;
    for (size_t i = 0; i < space.size(); ++i) {
      if (space.parent(i) < 0) joint.push_back(i);
    }
    SampleGroup(space, history, joint, point, rng);
  }
  for (size_t i = 0; i < space.size(); ++i) {
    if (options_.multivariate && space.parent(i) < 0) continue;
    if (!space.IsActive(i, point)) continue;
    SampleGroup(space, history, {i}, point, rng);
  }
  space.Deactivate(point);
  return point;
}

}  // namespace gpugeek::hpo
