#include "backends/slurm/gres.h"

#include <fmt/format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace gpugeek::backends::slurm {
namespace {

absl::StatusOr<int64_t> ParseCount(std::string_view entry, std::string_view text) {
  int64_t multiplier = 1;
  if (!text.empty()) {
    const char last = static_cast<char>(absl::ascii_toupper(static_cast<unsigned char>(text.back())));
    if (last == 'K' || last == 'M' || last == 'G') {
      multiplier = last == 'K' ? 1024 : last == 'M' ? 1024 * 1024 : 1024 * 1024 * 1024;
      text.remove_suffix(1);
    }
  }
  int64_t n = 0;
  if (text.empty() || !absl::SimpleAtoi(std::string(text), &n) || n < 0 || n > (int64_t{1} << 31) / multiplier) {
    return absl::InvalidArgumentError(
        fmt::format("gres entry '{}': the count is not a whole number of GPUs (e.g. gpu:a100:4)", std::string(entry)));
  }
  return n * multiplier;
}

}  // namespace

absl::StatusOr<std::vector<GpuGres>> ParseGpuGres(std::string_view gres) {
  std::vector<GpuGres> out;
  if (gres.empty() || gres == "(null)" || gres == "N/A") return out;
  // Commas also appear inside "(S:0,1)" details: split at top-level commas only.
  std::vector<std::string_view> entries;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= gres.size(); ++i) {
    if (i == gres.size() || (gres[i] == ',' && depth == 0)) {
      entries.push_back(gres.substr(start, i - start));
      start = i + 1;
    } else if (gres[i] == '(') {
      ++depth;
    } else if (gres[i] == ')' && depth > 0) {
      --depth;
    }
  }
  for (std::string_view entry : entries) {
    std::string_view spec = entry.substr(0, entry.find('('));
    std::vector<std::string> parts = absl::StrSplit(std::string(spec), ':');
    if (parts.empty() || parts[0] != "gpu") continue;
    GpuGres g;
    if (parts.size() == 1) {
      g.count = 1;  // "gpu" alone: one
    } else if (parts.size() == 2) {
      // "gpu:4" (untyped count) or "gpu:a100" (typed, count 1)
      auto n = ParseCount(entry, parts[1]);
      if (n.ok()) {
        g.count = *n;
      } else {
        g.type = std::string(parts[1]);
        g.count = 1;
      }
    } else if (parts.size() == 3) {
      g.type = parts[1];
      auto n = ParseCount(entry, parts[2]);
      if (!n.ok()) return n.status();
      g.count = *n;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("gres entry '{}': expected gpu[:type]:count (e.g. gpu:a100:4)", std::string(entry)));
    }
    out.push_back(std::move(g));
  }
  return out;
}

int64_t TotalGpus(const std::vector<GpuGres>& gpus) {
  int64_t n = 0;
  for (const GpuGres& g : gpus) n += g.count;
  return n;
}

}  // namespace gpugeek::backends::slurm
