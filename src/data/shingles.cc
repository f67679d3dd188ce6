#include "data/shingles.h"

#include <algorithm>

#include <xxhash.h>

namespace gpugeek::data {

std::string NormalizeText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    const bool word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80 || (c >= 'A' && c <= 'Z');
    if (!word) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : static_cast<char>(c));
  }
  return out;
}

uint64_t Hash64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::vector<uint64_t> Shingles(std::string_view normalized, const ShingleOptions& options) {
  std::vector<uint64_t> out;
  if (normalized.empty()) return out;
  const size_t n = static_cast<size_t>(std::max(1, options.n));
  if (options.unit == ShingleUnit::kChar) {
    if (normalized.size() <= n) return {Hash64(normalized)};
    out.reserve(normalized.size() - n + 1);
    for (size_t i = 0; i + n <= normalized.size(); ++i) out.push_back(Hash64(normalized.substr(i, n)));
  } else {
    // Normalised text has exactly one space between words, so an n-gram is the substring from the start
    // of its first word to the end of its last.
    std::vector<size_t> starts{0};
    for (size_t i = 0; i < normalized.size(); ++i) {
      if (normalized[i] == ' ') starts.push_back(i + 1);
    }
    if (starts.size() <= n) return {Hash64(normalized)};
    out.reserve(starts.size() - n + 1);
    for (size_t w = 0; w + n <= starts.size(); ++w) {
      const size_t end = w + n < starts.size() ? starts[w + n] - 1 : normalized.size();
      out.push_back(Hash64(normalized.substr(starts[w], end - starts[w])));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t i = 0, j = 0, common = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

}  // namespace gpugeek::data
