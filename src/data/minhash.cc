#include "data/minhash.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xxhash.h>

#include "common/rng.h"

namespace gpugeek::data {

double CandidateProbability(double j, int bands, int rows) { return 1.0 - std::pow(1.0 - std::pow(j, rows), bands); }

LshOptions ChooseLsh(double threshold, int max_hashes, double min_candidate_probability) {
  constexpr int kSteps = 400;  // midpoint rule over [0, threshold]
  auto false_positive_area = [&](int bands, int rows) {
    double sum = 0;
    for (int i = 0; i < kSteps; ++i) sum += CandidateProbability((i + 0.5) * threshold / kSteps, bands, rows);
    return sum * threshold / kSteps;
  };
  LshOptions best{.bands = 1, .rows = 1};
  double best_area = std::numeric_limits<double>::infinity();
  double best_at_threshold = -1;
  for (int bands = 1; bands <= max_hashes; ++bands) {
    for (int rows = 1; bands * rows <= max_hashes; ++rows) {
      const double at_threshold = CandidateProbability(threshold, bands, rows);
      if (at_threshold < min_candidate_probability) {
        // Only while nothing reaches the target: the most likely to catch a pair at the threshold.
        if (best_area == std::numeric_limits<double>::infinity() && at_threshold > best_at_threshold) {
          best = {.bands = bands, .rows = rows};
          best_at_threshold = at_threshold;
        }
        continue;
      }
      const double area = false_positive_area(bands, rows);
      if (area < best_area) {
        best = {.bands = bands, .rows = rows};
        best_area = area;
      }
    }
  }
  return best;
}

MinHasher::MinHasher(const LshOptions& options) : bands_(options.bands), rows_(options.rows) {
  const size_t k = static_cast<size_t>(std::max(1, bands_)) * static_cast<size_t>(std::max(1, rows_));
  Rng rng(options.seed);
  a_.reserve(k);
  b_.reserve(k);
  for (size_t i = 0; i < k; ++i) {
    a_.push_back(rng.engine()() | 1);  // multiply-shift wants an odd multiplier
    b_.push_back(rng.engine()());
  }
}

std::vector<uint32_t> MinHasher::Signature(std::span<const uint64_t> shingles) const {
  const size_t k = a_.size();
  std::vector<uint32_t> sig(k, std::numeric_limits<uint32_t>::max());
  const uint64_t* a = a_.data();
  const uint64_t* b = b_.data();
  uint32_t* s = sig.data();
  for (uint64_t shingle : shingles) {
    const uint64_t x = static_cast<uint32_t>(shingle);
    for (size_t i = 0; i < k; ++i) {
      const uint32_t h = static_cast<uint32_t>((a[i] * x + b[i]) >> 32);
      s[i] = std::min(s[i], h);
    }
  }
  return sig;
}

std::vector<uint64_t> MinHasher::BandKeys(std::span<const uint32_t> signature) const {
  std::vector<uint64_t> keys;
  keys.reserve(static_cast<size_t>(bands_));
  const size_t rows = static_cast<size_t>(rows_);
  for (size_t band = 0; band < static_cast<size_t>(bands_); ++band) {
    // The band's index seeds the hash, so equal values in different bands never share a bucket.
    keys.push_back(XXH3_64bits_withSeed(signature.data() + band * rows, rows * sizeof(uint32_t), band));
  }
  return keys;
}

std::vector<std::pair<uint32_t, uint32_t>> CandidatePairs(const std::vector<std::vector<uint64_t>>& band_keys) {
  size_t bands = 0;
  for (const auto& keys : band_keys) bands = std::max(bands, keys.size());
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<std::pair<uint64_t, uint32_t>> bucket;  // (key, document), sorted: buckets are runs
  for (size_t band = 0; band < bands; ++band) {
    bucket.clear();
    for (size_t d = 0; d < band_keys.size(); ++d) {
      if (band < band_keys[d].size()) bucket.emplace_back(band_keys[d][band], static_cast<uint32_t>(d));
    }
    std::sort(bucket.begin(), bucket.end());
    for (size_t start = 0; start < bucket.size();) {
      size_t end = start + 1;
      while (end < bucket.size() && bucket[end].first == bucket[start].first) ++end;
      for (size_t i = start; i < end; ++i) {
        for (size_t j = i + 1; j < end; ++j) pairs.emplace_back(bucket[i].second, bucket[j].second);
      }
      start = end;
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

}  // namespace gpugeek::data
