#include "data/near_duplicates.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "data/parallel.h"

namespace gpugeek::data {

absl::Status ValidateNearDuplicateOptions(const NearDuplicateOptions& o) {
  if (!(o.threshold > 0.0 && o.threshold <= 1.0)) {
    return absl::InvalidArgumentError(
        fmt::format("threshold: {} is outside (0, 1]; it is a Jaccard index, 0.8 is usual", o.threshold));
  }
  if (o.shingles.n < 1 || o.shingles.n > 64) {
    return absl::InvalidArgumentError(
        fmt::format("ngram: {} is outside 1..64; 5 words (or 5 to 9 characters) is usual", o.shingles.n));
  }
  if (o.lsh.bands < 1 || o.lsh.bands > 1024) {
    return absl::InvalidArgumentError(fmt::format("bands: {} is outside 1..1024; 14 is usual", o.lsh.bands));
  }
  if (o.lsh.rows < 1 || o.lsh.rows > 64) {
    return absl::InvalidArgumentError(fmt::format("rows: {} is outside 1..64; 8 is usual", o.lsh.rows));
  }
  if (o.threads < 0 || o.threads > 1024) {
    return absl::InvalidArgumentError(fmt::format("threads: {} is outside 0..1024 (0: one per core)", o.threads));
  }
  return absl::OkStatus();
}

std::vector<DocumentSketch> SketchDocuments(std::span<const std::string_view> documents,
                                            const NearDuplicateOptions& options, const Progress& progress) {
  const MinHasher hasher(options.lsh);
  std::vector<DocumentSketch> sketches(documents.size());
  std::mutex progress_mu;
  size_t done = 0;
  ParallelFor(documents.size(), WorkerCount(options.threads, documents.size()), 16, [&](size_t begin, size_t end, int) {
    for (size_t d = begin; d < end; ++d) {
      DocumentSketch& s = sketches[d];
      const std::string normalized = NormalizeText(documents[d]);
      s.text_hash = Hash64(normalized);
      s.shingles = Shingles(normalized, options.shingles);
      if (!s.shingles.empty()) s.band_keys = hasher.BandKeys(hasher.Signature(s.shingles));
    }
    if (progress) {
      std::lock_guard lock(progress_mu);
      done += end - begin;
      progress(done, documents.size());
    }
  });
  return sketches;
}

NearDuplicateResult FindNearDuplicates(const std::vector<DocumentSketch>& sketches, double threshold) {
  NearDuplicateResult r;
  r.verdicts.resize(sketches.size());
  std::unordered_map<uint64_t, uint32_t> by_text;               // normalised-text hash -> first document
  std::unordered_map<uint64_t, std::vector<uint32_t>> buckets;  // band key -> kept documents
  std::vector<uint32_t> candidates;
  for (uint32_t d = 0; d < sketches.size(); ++d) {
    const DocumentSketch& s = sketches[d];
    DocumentVerdict& v = r.verdicts[d];
    if (auto it = by_text.find(s.text_hash); it != by_text.end() && sketches[it->second].shingles == s.shingles) {
      v = {Verdict::kExactDuplicate, it->second, 1.0};
      ++r.exact_duplicates;
      continue;
    }
    candidates.clear();
    for (uint64_t key : s.band_keys) {
      if (auto it = buckets.find(key); it != buckets.end()) {
        candidates.insert(candidates.end(), it->second.begin(), it->second.end());
      }
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    double best = -1.0;
    uint32_t best_doc = 0;
    for (uint32_t c : candidates) {
      const double j = Jaccard(s.shingles, sketches[c].shingles);
      ++r.candidates_checked;
      if (j < threshold) {
        ++r.candidates_rejected;
      } else if (j > best) {  // candidates ascend, so a tie keeps the earlier document
        best = j;
        best_doc = c;
      }
    }
    by_text.emplace(s.text_hash, d);
    if (best >= threshold) {
      v = {Verdict::kNearDuplicate, best_doc, best};
      ++r.near_duplicates;
      continue;
    }
    ++r.kept;
    for (uint64_t key : s.band_keys) buckets[key].push_back(d);
  }
  return r;
}

}  // namespace gpugeek::data
