#pragma once
// How well the near-duplicate finder (near_duplicates.h) does against brute force: every pair of distinct
// documents compared by exact Jaccard index. O(n^2) pairs, on worker threads: for evaluating on corpora of
// thousands of documents (bench/dedup.sh), not for production runs.
//
// Reported, over the documents that are not exact duplicates:
//   - pairs: the true pairs (exact Jaccard >= threshold), the LSH candidates, and the candidates among
//     the true pairs; the finder's pair recall is that share of the true pairs, its precision 1 (every
//     candidate is checked), and raw LSH's precision the share of candidates that are true pairs;
//   - documents: which documents brute force would remove (the finder's rule, with every earlier kept
//     document compared exactly) against the ones the finder removed: precision, recall and F1;
//   - the S-curve: per band of exact Jaccard index, the share of pairs that became LSH candidates against
//     1 - (1 - J^rows)^bands averaged over the same pairs.

#include <cstdint>
#include <vector>

#include "data/near_duplicates.h"

namespace gpugeek::data {

struct JaccardBin {
  double lo = 0;  // [lo, hi); the last bin includes 1
  double hi = 0;
  uint64_t pairs = 0;
  uint64_t candidates = 0;
  double theoretical_sum = 0;  // sum over the bin's pairs of CandidateProbability

  double measured() const { return pairs ? static_cast<double>(candidates) / static_cast<double>(pairs) : 0.0; }
  double theoretical() const { return pairs ? theoretical_sum / static_cast<double>(pairs) : 0.0; }
};

// Precision, recall and F1 of `found` against `truth` with `both` in common; 1 where a denominator is 0.
struct Score {
  uint64_t truth = 0;
  uint64_t found = 0;
  uint64_t both = 0;
  double precision() const { return found ? static_cast<double>(both) / static_cast<double>(found) : 1.0; }
  double recall() const { return truth ? static_cast<double>(both) / static_cast<double>(truth) : 1.0; }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
};

struct DedupEvaluation {
  uint64_t documents = 0;           // distinct ones compared (not exact duplicates)
  uint64_t pairs = 0;               // documents * (documents - 1) / 2
  Score lsh_pairs;                  // raw LSH candidates against the true pairs
  Score finder_pairs;               // candidates that reach the threshold (the finder's checked pairs)
  Score removed;                    // documents the finder removed as near duplicates, against brute force's
  std::vector<JaccardBin> s_curve;  // `bins` equal bins over [0, 1]
};

// Evaluates `found` (FindNearDuplicates over `sketches` with `options`) by brute force on
// `options.threads` workers; `bins` >= 1 bins in the S-curve.
DedupEvaluation EvaluateNearDuplicates(const std::vector<DocumentSketch>& sketches, const NearDuplicateResult& found,
                                       const NearDuplicateOptions& options, int bins = 20);

}  // namespace gpugeek::data
