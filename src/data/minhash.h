#pragma once
// MinHash signatures and their banding (locality-sensitive hashing) for near-duplicate candidates.
//
// A signature holds, for each of K = bands x rows hash functions h_k, the minimum of h_k over a document's
// shingles; two documents agree on one position with probability equal to their Jaccard index J (Broder
// 1997). h_k is multiply-shift on the shingle hash's low 32 bits, h_k(x) = (a_k x + b_k mod 2^64) >> 32
// with a_k, b_k drawn from a seeded generator (Dietzfelbinger et al., "A reliable randomized algorithm for
// the closest-pair problem", 1997: strongly universal): one multiply and one shift a value, 32-bit
// signatures. Cut into `bands` bands of `rows` values, two documents become candidates when any band
// agrees whole: probability 1 - (1 - J^rows)^bands (Leskovec, Rajaraman, Ullman, "Mining of Massive
// Datasets", ch. 3.4). datatrove's default, 14 bands x 8 rows, catches pairs at J = 0.8 with probability
// 0.924 and pairs at J = 0.5 with 0.053.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace gpugeek::data {

struct LshOptions {
  int bands = 14;  // 1..1024
  int rows = 8;    // hash values per band, 1..64
  uint64_t seed = 1;
};

// 1 - (1 - j^rows)^bands: the probability that a pair at Jaccard index `j` (0..1) becomes a candidate.
double CandidateProbability(double j, int bands, int rows);

// The bands x rows (at most `max_hashes` hash functions) for a near-duplicate threshold: among those under
// which a pair at J = `threshold` becomes a candidate with probability >= `min_candidate_probability`, the
// one with the least false-positive area, the integral of 1 - (1 - s^rows)^bands over s in [0, threshold]
// (datasketch's MinHashLSH chooses by the same areas, weighting false negatives alike; every candidate
// is checked exactly here, so a false positive costs one Jaccard index and a false negative a missed
// duplicate). When none reaches it, the one most likely to catch a pair at the threshold. Examples at 128:
// 0.8 -> 16 x 6 (0.992 at 0.8), 0.7 -> 17 x 4, 0.5 -> 35 x 3. `threshold` in (0, 1], max_hashes >= 1.
LshOptions ChooseLsh(double threshold, int max_hashes = 128, double min_candidate_probability = 0.99);

// K = bands x rows hash functions, fixed by the seed. Immutable; safe to share between threads.
class MinHasher {
 public:
  explicit MinHasher(const LshOptions& options);

  int bands() const { return bands_; }
  int rows() const { return rows_; }
  size_t size() const { return a_.size(); }  // K

  // The K minima over `shingles` (hashes from Shingles()); all 0xFFFFFFFF for an empty set.
  std::vector<uint32_t> Signature(std::span<const uint64_t> shingles) const;
  // One 64-bit key per band (XXH3 of its `rows` values): equal keys, equal bands (but for 2^-64).
  std::vector<uint64_t> BandKeys(std::span<const uint32_t> signature) const;

 private:
  int bands_;
  int rows_;
  std::vector<uint64_t> a_;  // odd multipliers
  std::vector<uint64_t> b_;
};

// Every pair (i < j) of documents whose band keys agree in at least one band, sorted and distinct.
// `band_keys[d]` holds document d's keys (empty: the document takes no part). Worst case quadratic in the
// size of the largest bucket; for evaluation and small sets (near_duplicates.h finds duplicates without it).
std::vector<std::pair<uint32_t, uint32_t>> CandidatePairs(const std::vector<std::vector<uint64_t>>& band_keys);

}  // namespace gpugeek::data
