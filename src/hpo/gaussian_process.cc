#include "hpo/gaussian_process.h"

#include <cmath>
#include <exception>
#include <numbers>

#include "nlopt.hpp"

namespace gpugeek::hpo {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr double kSqrt5 = 2.2360679774997896964;
constexpr double kLogLengthLow = -4.6, kLogLengthHigh = 4.6;  // l in [0.01, 100]
constexpr double kLogSignalLow = -4.6, kLogSignalHigh = 4.6;
constexpr double kLogNoiseLow = -13.8, kLogNoiseHigh = -2.3;  // sigma_n^2 in [1e-6, 0.1]
constexpr double kPriorVariance = 3.0;

struct Problem {
  const MatrixXd* X;
  const VectorXd* y;
  double prior_mean;
};

// Squared differences per input, precomputed: diff[d](i, j) = (X(i,d) - X(j,d))^2; and matrices reused by
// every evaluation of the objective, so that L-BFGS's evaluations allocate nothing.
struct Data {
  std::vector<MatrixXd> diff;
  MatrixXd r2, K, E, Ksig, W;
  VectorXd alpha;
  Eigen::LLT<MatrixXd> llt;
};

// Negative of (log marginal likelihood + log prior) and its gradient in theta =
// [log l_1 .. log l_D, log sigma_f^2, log sigma_n^2].
double Objective(const double* theta, double* grad, const Problem& p, Data& w) {
  const VectorXd& y = *p.y;
  const int n = static_cast<int>(p.X->rows()), D = static_cast<int>(p.X->cols());
  const double signal = std::exp(theta[D]), noise = std::exp(theta[D + 1]);
  w.r2.setZero(n, n);
  for (int d = 0; d < D; ++d) w.r2.noalias() += w.diff[d] * std::exp(-2 * theta[d]);
  w.K.resize(n, n);
  w.E.resize(n, n);  // exp(-sqrt5 r) (1 + sqrt5 r) 5/3 sigma_f^2: the common factor of dK/dlog l
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      const double r = std::sqrt(w.r2(i, j));
      const double e = signal * std::exp(-kSqrt5 * r);
      w.K(i, j) = (1 + kSqrt5 * r + 5.0 / 3.0 * w.r2(i, j)) * e;
      w.E(i, j) = (5.0 / 3.0) * (1 + kSqrt5 * r) * e;
    }
  }
  w.Ksig = w.K;
  w.K.diagonal().array() += noise;
  w.llt.compute(w.K);
  if (w.llt.info() != Eigen::Success) {
    if (grad) std::fill(grad, grad + D + 2, 0.0);
    return 1e10;
  }
  w.alpha = w.llt.solve(y);
  double log_det = 0;
  for (int i = 0; i < n; ++i) log_det += 2 * std::log(w.llt.matrixLLT()(i, i));
  double lml = -0.5 * y.dot(w.alpha) - 0.5 * log_det - 0.5 * n * std::log(2 * std::numbers::pi);
  for (int d = 0; d < D; ++d) {
    const double z = theta[d] - p.prior_mean;
    lml += -0.5 * z * z / kPriorVariance;
  }
  if (grad) {
    // W = alpha alpha^T - K^-1; dLML/dtheta = tr(W dK/dtheta) / 2.
    w.W.setIdentity(n, n);
    w.llt.solveInPlace(w.W);
    w.W = (w.alpha * w.alpha.transpose() - w.W).eval();
    for (int d = 0; d < D; ++d) {
      // dK/dlog l_d = E * diff_d / l_d^2
      const double g = 0.5 * (w.W.array() * w.E.array() * w.diff[d].array()).sum() * std::exp(-2 * theta[d]);
      grad[d] = -(g - (theta[d] - p.prior_mean) / kPriorVariance);
    }
    grad[D] = -0.5 * (w.W.array() * w.Ksig.array()).sum();
    grad[D + 1] = -0.5 * w.W.trace() * noise;
  }
  return -lml;
}

}  // namespace

double Matern52(double r) { return (1 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r); }

std::optional<GaussianProcess> GaussianProcess::WithHyper(const MatrixXd& X, const VectorXd& y, const GpHyper& h) {
  GaussianProcess gp;
  gp.X_ = X;
  gp.hyper_ = h;
  gp.inv_lengthscale_ = (-h.log_lengthscale.array()).exp();
  gp.signal_ = std::exp(h.log_signal);
  const int n = static_cast<int>(X.rows());
  MatrixXd K(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double r = ((X.row(i) - X.row(j)).transpose().array() * gp.inv_lengthscale_.array()).matrix().norm();
      K(i, j) = gp.signal_ * Matern52(r);
    }
  }
  K.diagonal().array() += std::exp(h.log_noise);
  gp.chol_.compute(K);
  if (gp.chol_.info() != Eigen::Success) return std::nullopt;
  gp.alpha_ = gp.chol_.solve(y);
  const MatrixXd L = gp.chol_.matrixL();
  gp.lml_ = -0.5 * y.dot(gp.alpha_) - 0.5 * n * std::log(2 * std::numbers::pi);
  for (int i = 0; i < n; ++i) gp.lml_ -= std::log(L(i, i));
  return gp;
}

GaussianProcess GaussianProcess::Fit(const MatrixXd& X, const VectorXd& y) {
  const int n = static_cast<int>(X.rows()), D = static_cast<int>(X.cols());
  Data data;
  for (int d = 0; d < D; ++d) {
    MatrixXd m(n, n);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) m(i, j) = (X(i, d) - X(j, d)) * (X(i, d) - X(j, d));
    }
    data.diff.push_back(std::move(m));
  }
  const Problem problem{.X = &X, .y = &y, .prior_mean = std::numbers::sqrt2 + 0.5 * std::log(D)};
  std::vector<double> lower(D + 2, kLogLengthLow), upper(D + 2, kLogLengthHigh);
  lower[D] = kLogSignalLow, upper[D] = kLogSignalHigh;
  lower[D + 1] = kLogNoiseLow, upper[D + 1] = kLogNoiseHigh;
  // Two starts: the prior's mode, and length scales a quarter of it (a rougher function).
  std::vector<std::vector<double>> starts;
  for (double shift : {0.0, -1.4}) {
    std::vector<double> t(D + 2, std::clamp(problem.prior_mean + shift, kLogLengthLow, kLogLengthHigh));
    t[D] = 0.0;
    t[D + 1] = std::log(1e-3);
    starts.push_back(std::move(t));
  }
  std::vector<double> best_theta = starts[0];
  double best = std::numeric_limits<double>::infinity();
  for (std::vector<double> theta : starts) {
    nlopt::opt opt(nlopt::LD_LBFGS, static_cast<unsigned>(D + 2));
    opt.set_lower_bounds(lower);
    opt.set_upper_bounds(upper);
    opt.set_maxeval(150);
    opt.set_ftol_rel(1e-7);
    auto f = [](unsigned, const double* x, double* g, void* ctx) -> double {
      auto* c = static_cast<std::pair<const Problem*, Data*>*>(ctx);
      return Objective(x, g, *c->first, *c->second);
    };
    std::pair<const Problem*, Data*> ctx{&problem, &data};
    opt.set_min_objective(f, &ctx);
    double value = std::numeric_limits<double>::infinity();
    try {
      opt.optimize(theta, value);
    } catch (const std::exception&) {
      // NLopt throws on round-off limits; theta holds the best point it reached.
      value = Objective(theta.data(), nullptr, problem, data);
    }
    if (value < best) best = value, best_theta = theta;
  }
  GpHyper h;
  h.log_lengthscale = Eigen::Map<const VectorXd>(best_theta.data(), D);
  h.log_signal = best_theta[D];
  h.log_noise = best_theta[D + 1];
  for (double noise = h.log_noise;; noise += 2.3) {
    h.log_noise = noise;
    if (auto gp = WithHyper(X, y, h)) return *std::move(gp);
  }
}

void GaussianProcess::Predict(const VectorXd& x, double& mean, double& variance) const {
  const int n = static_cast<int>(X_.rows());
  VectorXd k(n);
  for (int i = 0; i < n; ++i) {
    const double r = ((X_.row(i).transpose() - x).array() * inv_lengthscale_.array()).matrix().norm();
    k[i] = signal_ * Matern52(r);
  }
  mean = k.dot(alpha_);
  const VectorXd v = chol_.matrixL().solve(k);
  variance = std::max(signal_ - v.squaredNorm(), 1e-12 * signal_);
}

}  // namespace gpugeek::hpo
