#include "data/dedup_eval.h"

#include <algorithm>
#include <utility>

#include "data/minhash.h"
#include "data/parallel.h"

namespace gpugeek::data {

DedupEvaluation EvaluateNearDuplicates(const std::vector<DocumentSketch>& sketches, const NearDuplicateResult& found,
                                       const NearDuplicateOptions& options, int bins) {
  bins = std::max(1, bins);
  // The distinct documents, in order: exact duplicates are the exact stage's business.
  std::vector<uint32_t> docs;
  for (uint32_t d = 0; d < sketches.size(); ++d) {
    if (found.verdicts[d].verdict != Verdict::kExactDuplicate) docs.push_back(d);
  }
  std::vector<std::vector<uint64_t>> keys(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) keys[i] = sketches[docs[i]].band_keys;
  const std::vector<std::pair<uint32_t, uint32_t>> candidates = CandidatePairs(keys);

  DedupEvaluation e;
  e.documents = docs.size();
  e.pairs = e.documents * (e.documents ? e.documents - 1 : 0) / 2;
  struct Partial {
    std::vector<JaccardBin> bins;
    uint64_t true_pairs = 0;
    uint64_t true_candidates = 0;
    std::vector<std::pair<uint32_t, uint32_t>> true_edges;  // (i, j), i < j, as indexes into docs
  };
  const int workers = WorkerCount(options.threads, docs.size());
  std::vector<Partial> partial(static_cast<size_t>(workers));
  for (Partial& p : partial) p.bins.resize(static_cast<size_t>(bins));
  // Row i has docs.size() - i - 1 pairs: small chunks keep the triangle balanced across workers.
  ParallelFor(docs.size(), workers, 4, [&](size_t begin, size_t end, int worker) {
    Partial& p = partial[static_cast<size_t>(worker)];
    for (size_t i = begin; i < end; ++i) {
      const auto& a = sketches[docs[i]].shingles;
      auto candidate = std::lower_bound(candidates.begin(), candidates.end(),
                                        std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(i), 0u));
      for (size_t j = i + 1; j < docs.size(); ++j) {
        const double jac = Jaccard(a, sketches[docs[j]].shingles);
        while (candidate != candidates.end() && candidate->first == i && candidate->second < j) ++candidate;
        const bool is_candidate = candidate != candidates.end() && candidate->first == i && candidate->second == j;
        JaccardBin& bin = p.bins[std::min(static_cast<size_t>(jac * bins), static_cast<size_t>(bins - 1))];
        ++bin.pairs;
        bin.candidates += is_candidate;
        bin.theoretical_sum += CandidateProbability(jac, options.lsh.bands, options.lsh.rows);
        if (jac >= options.threshold) {
          ++p.true_pairs;
          p.true_candidates += is_candidate;
          p.true_edges.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(j));
        }
      }
    }
  });
  e.s_curve.resize(static_cast<size_t>(bins));
  std::vector<std::vector<uint32_t>> earlier(docs.size());  // true-pair partners before each document
  uint64_t true_pairs = 0, true_candidates = 0;
  for (size_t b = 0; b < e.s_curve.size(); ++b) {
    e.s_curve[b].lo = static_cast<double>(b) / bins;
    e.s_curve[b].hi = static_cast<double>(b + 1) / bins;
  }
  for (const Partial& p : partial) {
    for (size_t b = 0; b < e.s_curve.size(); ++b) {
      e.s_curve[b].pairs += p.bins[b].pairs;
      e.s_curve[b].candidates += p.bins[b].candidates;
      e.s_curve[b].theoretical_sum += p.bins[b].theoretical_sum;
    }
    true_pairs += p.true_pairs;
    true_candidates += p.true_candidates;
    for (auto [i, j] : p.true_edges) earlier[j].push_back(i);
  }
  e.lsh_pairs = {.truth = true_pairs, .found = candidates.size(), .both = true_candidates};
  e.finder_pairs = {.truth = true_pairs, .found = true_candidates, .both = true_candidates};

  // Brute force's removals: the finder's rule, with every earlier kept document compared exactly.
  std::vector<bool> kept(docs.size(), false);
  for (size_t j = 0; j < docs.size(); ++j) {
    const bool removed_bf = std::any_of(earlier[j].begin(), earlier[j].end(), [&](uint32_t i) { return kept[i]; });
    kept[j] = !removed_bf;
    const bool removed_finder = found.verdicts[docs[j]].verdict == Verdict::kNearDuplicate;
    e.removed.truth += removed_bf;
    e.removed.found += removed_finder;
    e.removed.both += removed_bf && removed_finder;
  }
  return e;
}

}  // namespace gpugeek::data
