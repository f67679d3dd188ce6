#include "hpo/normal.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gpugeek::hpo {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log(sqrt(2 pi))

}  // namespace

double NormalPdf(double z) { return std::exp(-0.5 * z * z - kLogSqrt2Pi); }
double NormalLogPdf(double z) { return -0.5 * z * z - kLogSqrt2Pi; }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

double NormalLogCdf(double z) {
  if (z > -30) return std::log(NormalCdf(z));
  // Phi(z) ~ phi(z) / -z * (1 - 1/z^2 + 3/z^4): Abramowitz & Stegun 26.2.12.
  const double z2 = z * z;
  return NormalLogPdf(z) - std::log(-z) + std::log1p(-1 / z2 + 3 / (z2 * z2));
}

double NormalQuantile(double p) {
  // P. J. Acklam, "An algorithm for computing the inverse normal cumulative distribution function" (2003).
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  p = std::clamp(p, 1e-300, 1 - 1e-16);
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step on Phi(x) - p.
  const double e = NormalCdf(x) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(0.5 * x * x);
  return x - u / (1 + 0.5 * x * u);
}

double LogNormalMass(double a, double b) {
  if (a > 0) return LogNormalMass(-b, -a);  // mirror into the lower tail
  const double la = NormalLogCdf(a), lb = NormalLogCdf(b);
  // log(e^lb - e^la) = lb + log1p(-e^(la - lb))
  return lb + std::log1p(-std::exp(std::min(la - lb, -1e-300)));
}

double SampleTruncatedNormal(double mu, double sigma, double low, double high, Rng& rng) {
  double a = (low - mu) / sigma, b = (high - mu) / sigma;
  const bool mirror = a > 0;
  if (mirror) std::swap(a, b), a = -a, b = -b;
  const double pa = NormalCdf(a), pb = NormalCdf(b);
  double z = NormalQuantile(pa + rng.UniformDouble() * (pb - pa));
  z = std::clamp(z, a, b);
  if (mirror) z = -z;
  return std::clamp(mu + sigma * z, low, high);
}

double TruncatedNormalLogPdf(double x, double mu, double sigma, double low, double high) {
  const double z = (x - mu) / sigma;
  return NormalLogPdf(z) - std::log(sigma) - LogNormalMass((low - mu) / sigma, (high - mu) / sigma);
}

}  // namespace gpugeek::hpo
