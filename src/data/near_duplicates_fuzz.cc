// libFuzzer target: documents of arbitrary bytes through sketching, the finder and the evaluation. The
// first two bytes choose the n-gram unit and size; the rest is documents separated by NUL bytes.
// Aborts when an invariant of near_duplicates.h breaks: a near duplicate copies an earlier kept document
// and reaches the threshold; an exact one copies an earlier document that is not itself an exact copy.

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "data/dedup_eval.h"
#include "data/near_duplicates.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::data;
  if (size < 2) return 0;
  NearDuplicateOptions o;
  o.shingles.unit = data[0] & 1 ? ShingleUnit::kChar : ShingleUnit::kWord;
  o.shingles.n = 1 + data[1] % 8;
  o.lsh = {.bands = 4, .rows = 2, .seed = 1};
  o.threshold = 0.5;
  o.threads = 1;
  std::vector<std::string_view> docs;
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  for (size_t at; (at = rest.find('\0')) != std::string_view::npos; rest.remove_prefix(at + 1)) {
    docs.push_back(rest.substr(0, at));
  }
  docs.push_back(rest);
  if (docs.size() > 64) return 0;
  const std::vector<DocumentSketch> sketches = SketchDocuments(docs, o);
  const NearDuplicateResult found = FindNearDuplicates(sketches, o.threshold);
  for (size_t d = 0; d < found.verdicts.size(); ++d) {
    const DocumentVerdict& v = found.verdicts[d];
    if (v.verdict == Verdict::kKept) continue;
    if (v.duplicate_of >= d) std::abort();
    const Verdict of = found.verdicts[v.duplicate_of].verdict;
    if (v.verdict == Verdict::kNearDuplicate ? of != Verdict::kKept : of == Verdict::kExactDuplicate) std::abort();
    if (v.verdict == Verdict::kNearDuplicate && v.jaccard < o.threshold) std::abort();
  }
  if (found.kept + found.exact_duplicates + found.near_duplicates != docs.size()) std::abort();
  const DedupEvaluation e = EvaluateNearDuplicates(sketches, found, o, 10);
  if (e.finder_pairs.both > e.finder_pairs.truth || e.removed.both > e.removed.found) std::abort();
  return 0;
}
