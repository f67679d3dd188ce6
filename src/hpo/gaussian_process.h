#pragma once
// Gaussian-process regression for Bayesian optimisation (Rasmussen & Williams, "Gaussian Processes for
// Machine Learning", 2006, algorithm 2.1 and eq. 5.9): a Matern-5/2 kernel with one length scale per input
// (ARD), a signal variance and a noise variance, on inputs in the unit cube and standardised outputs.
//
// Hyper-parameters are fitted by maximising the log marginal likelihood plus a log-normal prior on each
// length scale, log l ~ N(sqrt(2) + log(D)/2, 3) (Hvarfner, Hellsten & Nardi 2024, "Vanilla Bayesian
// Optimization Performs Great in High Dimensions": it scales length scales with the dimension D), with
// L-BFGS (NLopt) on the log-parameters from two starts.

#include <optional>
#include <vector>

#include "Eigen/Dense"

namespace gpugeek::hpo {

struct GpHyper {
  Eigen::VectorXd log_lengthscale;    // per input
  double log_signal = 0;              // log sigma_f^2
  double log_noise = std::log(1e-4);  // log sigma_n^2
};

class GaussianProcess {
 public:
  // Fits to inputs X (n x D, in [0, 1]) and outputs y (n; standardised by the caller). n >= 1.
  static GaussianProcess Fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y);
  // With fixed hyper-parameters (tests); nullopt if the kernel matrix is not positive definite.
  static std::optional<GaussianProcess> WithHyper(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper& h);

  // Posterior mean and variance (of the latent function, without noise) at x (D).
  void Predict(const Eigen::VectorXd& x, double& mean, double& variance) const;
  // Log marginal likelihood of the data under the fitted hyper-parameters (R&W eq. 5.8).
  double log_marginal_likelihood() const { return lml_; }
  const GpHyper& hyper() const { return hyper_; }

 private:
  Eigen::MatrixXd X_;
  Eigen::VectorXd inv_lengthscale_;
  GpHyper hyper_;
  Eigen::LLT<Eigen::MatrixXd> chol_;
  Eigen::VectorXd alpha_;
  double signal_ = 1;
  double lml_ = 0;
};

// Matern-5/2 correlation at scaled distance r: (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r).
double Matern52(double r);

}  // namespace gpugeek::hpo
