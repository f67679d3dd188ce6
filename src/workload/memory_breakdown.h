#pragma once
// MemoryBreakdown: per-GPU memory as labelled terms in bytes, each with the formula that produced
// it, so a report can show where every byte comes from.

#include <cstdint>
#include <string>
#include <vector>

namespace gpugeek::workload {

struct MemoryTerm {
  std::string label;  // short name: "weights", "kv_cache", "optimizer", ...
  uint64_t bytes = 0;
  std::string formula;  // how it was computed, with the numbers, e.g. "2 B x 3.4e10 params / TP 4"
};

struct MemoryBreakdown {
  std::vector<MemoryTerm> terms;

  uint64_t Total() const {
    uint64_t sum = 0;
    for (const MemoryTerm& t : terms) sum += t.bytes;
    return sum;
  }
  // Bytes of the term labelled `label`; 0 when absent.
  uint64_t Bytes(const std::string& label) const {
    for (const MemoryTerm& t : terms) {
      if (t.label == label) return t.bytes;
    }
    return 0;
  }
  void Add(std::string label, double bytes, std::string formula) {
    terms.push_back(
        MemoryTerm{std::move(label), bytes <= 0 ? 0 : static_cast<uint64_t>(bytes + 0.5), std::move(formula)});
  }
};

}  // namespace gpugeek::workload
