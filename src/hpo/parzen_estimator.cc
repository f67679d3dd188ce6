#include "hpo/parzen_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "hpo/normal.h"

namespace gpugeek::hpo {
namespace {

double LogSumExp(std::span<const double> xs) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : xs) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : xs) s += std::exp(x - m);
  return m + std::log(s);
}

}  // namespace

std::vector<double> TpeDefaultWeights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n < 25) return w;
  const size_t ramp = n - 25;
  for (size_t i = 0; i < ramp; ++i) {
    // numpy.linspace(1/n, 1, num=ramp)
    w[i] = ramp == 1 ? 1.0 / n : 1.0 / n + (1.0 - 1.0 / n) * i / (ramp - 1);
  }
  return w;
}

ParzenEstimator::ParzenEstimator(const SearchSpace& space, std::span<const size_t> params,
                                 std::span<const Point* const> observations, std::span<const double> weights,
                                 const ParzenOptions& options)
    : space_(space) {
  const size_t n = observations.size();
  const size_t kernels = n + 1;  // the prior is the last kernel
  weights_.assign(weights.begin(), weights.end());
  weights_.push_back(options.prior_weight);
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w = total > 0 ? w / total : 1.0 / kernels;
  for (double w : weights_) log_weights_.push_back(std::log(w));

  for (size_t param : params) {
    const ParamSpec& spec = space.params()[param];
    Dim dim{.param = param, .categorical = spec.kind == ParamKind::kCategorical};
    if (dim.categorical) {
      const size_t choices = spec.choices.size();
      dim.probs.assign(kernels, std::vector<double>(choices, options.prior_weight / kernels));
      for (size_t k = 0; k < n; ++k) dim.probs[k][static_cast<size_t>((*observations[k])[param])] += 1;
      for (auto& row : dim.probs) {
        const double s = std::accumulate(row.begin(), row.end(), 0.0);
        for (double& p : row) p /= s;
      }
      for (const auto& row : dim.probs) {
        auto& logs = dim.log_probs.emplace_back();
        for (double p : row) logs.push_back(std::log(p));
      }
      dims_.push_back(std::move(dim));
      continue;
    }
    dim.low = space.TransformedLow(param);
    dim.high = space.TransformedHigh(param);
    const double range = dim.high - dim.low;
    const double prior_mu = 0.5 * (dim.low + dim.high), prior_sigma = range;
    for (size_t k = 0; k < n; ++k) dim.mu.push_back(space.Transform(param, (*observations[k])[param]));
    dim.mu.push_back(prior_mu);
    dim.sigma.assign(kernels, prior_sigma);
    if (options.multivariate) {
      const double sigma0 = 0.2 * std::pow(static_cast<double>(std::max<size_t>(n, 1)), -1.0 / (params.size() + 4));
      for (size_t k = 0; k < n; ++k) dim.sigma[k] = sigma0 * range;
    } else if (n > 0) {
      std::vector<size_t> order(kernels);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dim.mu[a] < dim.mu[b]; });
      for (size_t r = 0; r < kernels; ++r) {
        const double left = r == 0 ? dim.low : dim.mu[order[r - 1]];
        const double right = r + 1 == kernels ? dim.high : dim.mu[order[r + 1]];
        const double here = dim.mu[order[r]];
        double s = std::max(here - left, right - here);
        if (r == 0 && kernels >= 2) s = dim.mu[order[1]] - here;                // consider_endpoints=False
        if (r + 1 == kernels && kernels >= 2) s = here - dim.mu[order[r - 1]];  // likewise at the top
        dim.sigma[order[r]] = s;
      }
    }
    const double min_sigma = range / std::min(100.0, 1.0 + kernels);
    for (double& s : dim.sigma) s = std::clamp(s, min_sigma, range);
    dim.sigma[n] = prior_sigma;
    for (size_t k = 0; k < kernels; ++k) {
      const double mu = dim.mu[k], sigma = dim.sigma[k];
      dim.log_norm.push_back(LogNormalMass((dim.low - mu) / sigma, (dim.high - mu) / sigma));
    }
    dims_.push_back(std::move(dim));
  }
}

std::vector<Point> ParzenEstimator::Sample(int n, const Point& base, Rng& rng) const {
  std::discrete_distribution<size_t> pick(weights_.begin(), weights_.end());
  std::vector<Point> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    const size_t k = pick(rng.engine());
    Point point = base;
    for (const Dim& dim : dims_) {
      if (dim.categorical) {
        std::discrete_distribution<size_t> choice(dim.probs[k].begin(), dim.probs[k].end());
        point[dim.param] = static_cast<double>(choice(rng.engine()));
      } else {
        const double t = SampleTruncatedNormal(dim.mu[k], dim.sigma[k], dim.low, dim.high, rng);
        point[dim.param] = space_.Untransform(dim.param, t);
      }
    }
    out.push_back(std::move(point));
  }
  return out;
}

double ParzenEstimator::LogPdf(const Point& point) const {
  std::vector<double> per_kernel(log_weights_);
  for (const Dim& dim : dims_) {
    if (dim.categorical) {
      const size_t c = static_cast<size_t>(point[dim.param]);
      for (size_t k = 0; k < per_kernel.size(); ++k) per_kernel[k] += dim.log_probs[k][c];
    } else {
      const double x = std::clamp(space_.Transform(dim.param, point[dim.param]), dim.low, dim.high);
      for (size_t k = 0; k < per_kernel.size(); ++k) {
        const double z = (x - dim.mu[k]) / dim.sigma[k];
        per_kernel[k] += NormalLogPdf(z) - dim.log_norm[k];
      }
    }
  }
  return LogSumExp(per_kernel);
}

}  // namespace gpugeek::hpo
