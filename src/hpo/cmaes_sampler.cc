#include "hpo/cmaes_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "Eigen/Dense"
#include "hpo/tpe_sampler.h"

namespace gpugeek::hpo {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr uint64_t kGenerationStream = 0x434d41;  // "CMA"
constexpr double kWorst = std::numeric_limits<double>::infinity();

// The distribution and evolution paths of one generation (Hansen 2016, Table 1 and section 3).
class CmaState {
 public:
  CmaState(const VectorXd& mean, double sigma, int lambda)
      : n_(mean.size()), lambda_(lambda), mean_(mean), sigma_(sigma) {
    const int mu = lambda_ / 2;
    weights_.resize(mu);
    for (int i = 0; i < mu; ++i) weights_[i] = std::log((lambda_ + 1) / 2.0) - std::log(i + 1.0);
    weights_ /= weights_.sum();
    mu_eff_ = 1.0 / weights_.squaredNorm();
    const double n = static_cast<double>(n_);
    c_sigma_ = (mu_eff_ + 2) / (n + mu_eff_ + 5);
    d_sigma_ = 1 + 2 * std::max(0.0, std::sqrt((mu_eff_ - 1) / (n + 1)) - 1) + c_sigma_;
    c_c_ = (4 + mu_eff_ / n) / (n + 4 + 2 * mu_eff_ / n);
    c_1_ = 2 / ((n + 1.3) * (n + 1.3) + mu_eff_);
    c_mu_ = std::min(1 - c_1_, 2 * (mu_eff_ - 2 + 1 / mu_eff_) / ((n + 2) * (n + 2) + mu_eff_));
    chi_n_ = std::sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n));
    C_ = MatrixXd::Identity(n_, n_);
    B_ = MatrixXd::Identity(n_, n_);
    D_ = VectorXd::Ones(n_);
    p_sigma_ = VectorXd::Zero(n_);
    p_c_ = VectorXd::Zero(n_);
  }

  int lambda() const { return lambda_; }
  double sigma() const { return sigma_ * D_.maxCoeff(); }

  // One point in the unit cube: resampled up to 10 times while outside it, then clipped.
  VectorXd Draw(Rng& rng) const {
    std::normal_distribution<double> normal(0.0, 1.0);
    VectorXd x(n_);
    for (int attempt = 0; attempt < 10; ++attempt) {
      VectorXd z(n_);
      for (int i = 0; i < n_; ++i) z[i] = normal(rng.engine());
      x = mean_ + sigma_ * (B_ * D_.asDiagonal() * z);
      if ((x.array() >= 0).all() && (x.array() <= 1).all()) return x;
    }
    return x.cwiseMax(0.0).cwiseMin(1.0);
  }

  // Tells the generation: `points` with their losses (kWorst for pruned and failed).
  void Tell(std::vector<std::pair<double, VectorXd>> ranked) {
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    ++generation_;
    const int mu = static_cast<int>(weights_.size());
    MatrixXd Y(n_, mu);
    for (int i = 0; i < mu; ++i) Y.col(i) = (ranked[i].second - mean_) / sigma_;
    const VectorXd y_w = Y * weights_;
    mean_ += sigma_ * y_w;
    const MatrixXd inv_sqrt_C = B_ * D_.cwiseInverse().asDiagonal() * B_.transpose();
    p_sigma_ = (1 - c_sigma_) * p_sigma_ + std::sqrt(c_sigma_ * (2 - c_sigma_) * mu_eff_) * (inv_sqrt_C * y_w);
    const double norm_ps = p_sigma_.norm();
    const bool h_sigma =
        norm_ps / std::sqrt(1 - std::pow(1 - c_sigma_, 2.0 * generation_)) < (1.4 + 2.0 / (n_ + 1)) * chi_n_;
    p_c_ = (1 - c_c_) * p_c_ + (h_sigma ? std::sqrt(c_c_ * (2 - c_c_) * mu_eff_) : 0.0) * y_w;
    const double delta = h_sigma ? 0.0 : c_c_ * (2 - c_c_);
    C_ = (1 - c_1_ - c_mu_ + c_1_ * delta) * C_ + c_1_ * (p_c_ * p_c_.transpose()) +
         c_mu_ * (Y * weights_.asDiagonal() * Y.transpose());
    sigma_ *= std::exp((c_sigma_ / d_sigma_) * (norm_ps / chi_n_ - 1));
    sigma_ = std::min(sigma_, 2.0);
    C_ = 0.5 * (C_ + C_.transpose());
    Eigen::SelfAdjointEigenSolver<MatrixXd> eig(C_);
    B_ = eig.eigenvectors();
    D_ = eig.eigenvalues().cwiseMax(1e-20).cwiseSqrt();
  }

 private:
  int n_;
  int lambda_;
  int generation_ = 0;
  VectorXd mean_;
  double sigma_;
  VectorXd weights_;
  double mu_eff_, c_sigma_, d_sigma_, c_c_, c_1_, c_mu_, chi_n_;
  MatrixXd C_, B_;
  VectorXd D_, p_sigma_, p_c_;
};

bool Finished(const Trial& t) { return t.state != TrialState::kRunning; }
double LossOf(const Trial& t) { return t.state == TrialState::kComplete && t.value ? *t.value : kWorst; }

}  // namespace

Point CmaEsSampler::Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const {
  std::vector<size_t> dims;
  for (size_t i = 0; i < space.size(); ++i) {
    if (space.params()[i].kind != ParamKind::kCategorical && space.parent(i) < 0) dims.push_back(i);
  }
  // Parameters CMA-ES does not model are TPE's; CMA-ES then overwrites its own dimensions.
  Point point =
      dims.size() == space.size() ? Point(space.size(), kInactive) : TpeSampler().Suggest(space, history, seed, number);
  const int startup = std::max(1, options_.startup_trials);
  if (dims.empty() || static_cast<int64_t>(history.size()) < startup ||
      !std::all_of(history.begin(), history.begin() + startup, Finished)) {
    if (!dims.empty()) {
      Rng rng = StreamRng(seed, static_cast<uint64_t>(number), 1);
      const Point uniform = SampleUniform(space, rng);
      for (size_t i : dims) point[i] = uniform[i];
    }
    return point;
  }
  const int n = static_cast<int>(dims.size());
  auto key_of = [&](const Point& p) {
    std::vector<double> key;
    for (size_t i : dims) key.push_back(p[i]);
    return key;
  };
  auto unit_of = [&](const Point& p) {
    VectorXd u(n);
    for (int j = 0; j < n; ++j) u[j] = space.ToUnit(dims[j], p[dims[j]]);
    return u;
  };
  auto user_of = [&](const VectorXd& u) {
    std::vector<double> key;
    for (int j = 0; j < n; ++j) key.push_back(space.FromUnit(dims[j], u[j]));
    return key;
  };
  std::multimap<std::vector<double>, const Trial*> by_point;
  for (const Trial& t : history.subspan(startup)) by_point.emplace(key_of(t.params), &t);

  // The best finished trial of a set, as the start of a (re)start.
  auto best_of = [&](Trials trials) -> std::optional<VectorXd> {
    const Trial* best = nullptr;
    for (const Trial& t : trials) {
      if (t.state == TrialState::kComplete && t.value && (!best || *t.value < *best->value)) best = &t;
    }
    if (!best) return std::nullopt;
    return unit_of(best->params);
  };
  const int lambda0 = options_.population > 0 ? options_.population : 4 + static_cast<int>(std::floor(3 * std::log(n)));
  // The best point told so far: where a restart begins (only what replay has reached, so that a later
  // call replays the same restarts).
  VectorXd best_u = best_of(history.first(startup)).value_or(VectorXd::Constant(n, 0.5));
  double best_loss = kWorst;
  for (const Trial& t : history.first(startup)) best_loss = std::min(best_loss, LossOf(t));
  CmaState state(best_u, options_.sigma0, lambda0);
  for (uint64_t g = 0;; ++g) {
    Rng rng = StreamRng(seed, kGenerationStream, g);
    std::vector<VectorXd> slots;
    for (int k = 0; k < state.lambda(); ++k) slots.push_back(state.Draw(rng));
    std::vector<std::pair<double, VectorXd>> told;
    std::optional<VectorXd> free_slot;
    bool all_finished = true;
    for (const VectorXd& u : slots) {
      auto it = by_point.find(user_of(u));
      if (it == by_point.end()) {
        if (!free_slot) free_slot = u;
        all_finished = false;
        continue;
      }
      const Trial* t = it->second;
      by_point.erase(it);
      if (!Finished(*t)) all_finished = false;
      told.emplace_back(LossOf(*t), u);
    }
    if (!all_finished) {
      VectorXd u;
      if (free_slot) {
        u = *free_slot;
      } else {
        Rng extra = StreamRng(seed, static_cast<uint64_t>(number), 2);
        u = state.Draw(extra);
      }
      const std::vector<double> user = user_of(u);
      for (int j = 0; j < n; ++j) point[dims[j]] = user[j];
      return point;
    }
    for (const auto& [loss, u] : told) {
      if (loss < best_loss) best_loss = loss, best_u = u;
    }
    state.Tell(std::move(told));
    if (state.sigma() < 1e-8) state = CmaState(best_u, options_.sigma0, 2 * state.lambda());
  }
}

}  // namespace gpugeek::hpo
