#pragma once
// The standard normal distribution: density, CDF, quantile, and the truncated normal the Parzen
// estimators of TPE sample from. Tail-accurate: CDFs come from erfc, and a truncated normal on [a, b] with
// a > 0 is handled as its mirror on [-b, -a], where the CDF values are small and exact.

#include "common/rng.h"

namespace gpugeek::hpo {

double NormalPdf(double z);
double NormalLogPdf(double z);
double NormalCdf(double z);
// log Phi(z), accurate far into the lower tail (asymptotic series below z = -30).
double NormalLogCdf(double z);
// Phi^-1(p) for p in (0, 1): Acklam's rational approximation refined by one Halley step (|error| < 1e-14).
double NormalQuantile(double p);

// log(Phi(b) - Phi(a)) for a < b, in standard units.
double LogNormalMass(double a, double b);
// A draw of N(mu, sigma^2) truncated to [low, high] by inverting its CDF.
double SampleTruncatedNormal(double mu, double sigma, double low, double high, Rng& rng);
// Log density at x of N(mu, sigma^2) truncated to [low, high].
double TruncatedNormalLogPdf(double x, double mu, double sigma, double low, double high);

}  // namespace gpugeek::hpo
