#pragma once
// Near-duplicate documents: exact copies by normalised text, then near copies by MinHash LSH candidates
// that the exact Jaccard index of their shingle sets confirms.
//
// Documents are taken in order. An exact copy is removed as a copy of the first document with its
// normalised text; any other document is removed only as a near duplicate of an earlier document that is
// kept: LSH buckets hold kept documents only, and a candidate counts only when its exact Jaccard index
// reaches the threshold. So every removed document is within the threshold of a kept one, and neither an
// LSH collision nor a chain of pairwise-similar documents (A~B, B~C, A and C unlike) can remove a document
// unlike everything kept; the union-find clustering of raw LSH buckets does exactly that (marin issue
// 6854: 859,091 unrelated documents glued into one cluster). Buckets stay small for the same reason: a
// near copy never enters one.
//
// Sketching (normalising, shingling, MinHash) runs on worker threads; the pass over the sketches is
// sequential and cheap (hash lookups and a few exact Jaccard indexes per document).

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "data/minhash.h"
#include "data/shingles.h"

namespace gpugeek::data {

struct NearDuplicateOptions {
  ShingleOptions shingles;
  LshOptions lsh;
  double threshold = 0.8;  // the exact Jaccard index that makes a near duplicate, (0, 1]
  int threads = 0;         // worker threads for sketching; 0: one per hardware thread
};

// InvalidArgument naming the field and its range when an option is out of range.
absl::Status ValidateNearDuplicateOptions(const NearDuplicateOptions& options);

// What sketching keeps of one document.
struct DocumentSketch {
  uint64_t text_hash = 0;           // Hash64 of the normalised text
  std::vector<uint64_t> shingles;   // sorted, distinct (Shingles)
  std::vector<uint64_t> band_keys;  // MinHasher::BandKeys; empty when the document has no shingle
};

// Called with (documents done, documents in all), from any one thread at a time.
using Progress = std::function<void(size_t, size_t)>;

// Sketches of `documents`, in their order, on `options.threads` workers. The options must be valid.
std::vector<DocumentSketch> SketchDocuments(std::span<const std::string_view> documents,
                                            const NearDuplicateOptions& options, const Progress& progress = {});

enum class Verdict { kKept, kExactDuplicate, kNearDuplicate };

struct DocumentVerdict {
  Verdict verdict = Verdict::kKept;
  // The earlier document it copies (duplicates only): for a near duplicate a kept one; for an exact
  // duplicate the first with its normalised text, kept or itself a near duplicate.
  uint32_t duplicate_of = 0;
  double jaccard = 1.0;  // exact Jaccard index with that document (duplicates only)
};

struct NearDuplicateResult {
  std::vector<DocumentVerdict> verdicts;  // one per document, in order
  size_t kept = 0;
  size_t exact_duplicates = 0;
  size_t near_duplicates = 0;
  size_t candidates_checked = 0;   // exact Jaccard indexes computed for LSH candidates
  size_t candidates_rejected = 0;  // of those, below the threshold (LSH false positives)
};

// The verdict on each document of `sketches` at `threshold` (0, 1] (see the file comment). An exact
// duplicate has the same normalised text (64-bit hash and shingle set) as an earlier document, so the
// exact count does not depend on the threshold; a near duplicate shares an LSH band with an earlier kept
// document and has the highest exact Jaccard index >= threshold among such. Ties go to the earlier one.
NearDuplicateResult FindNearDuplicates(const std::vector<DocumentSketch>& sketches, double threshold);

}  // namespace gpugeek::data
