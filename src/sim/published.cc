#include "sim/published.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "common/status_macros.h"

namespace gpugeek::sim {

std::string OurPolicyName(std::string_view authors_name) {
  // "NN-Name": the authors number their policies.
  if (authors_name.size() > 3 && authors_name[2] == '-' && std::isdigit(authors_name[0]) &&
      std::isdigit(authors_name[1])) {
    return std::string(authors_name.substr(3));
  }
  return std::string(authors_name);
}

namespace {

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

absl::StatusOr<PublishedSummary> ParsePublishedSummary(std::string_view text, std::string_view file_name) {
  std::vector<std::string> lines = Split(text, '\n');
  for (std::string& l : lines) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
  }
  if (lines.empty()) return absl::InvalidArgumentError(fmt::format("{}:1:1: empty file", file_name));
  const std::vector<std::string> header = Split(lines[0], ',');
  auto col = [&](std::string_view name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  const std::vector<std::string_view> names = {"workload",
                                               "sc_policy",
                                               "n_seeds",
                                               "unalloc_pct_at_arrival100_mean",
                                               "unalloc_pct_at_arrival100_sd",
                                               "unalloc_pct_at_arrival130_mean",
                                               "unalloc_pct_at_arrival130_sd",
                                               "frag_pct_of_total_at_arrival100_median",
                                               "frag_ratio_pct_of_idle_at_arrival100_median"};
  std::vector<int> idx;
  for (std::string_view n : names) {
    idx.push_back(col(n));
    if (idx.back() < 0) return absl::InvalidArgumentError(fmt::format("{}:1:1: no column '{}'", file_name, n));
  }
  PublishedSummary out;
  for (size_t l = 1; l < lines.size(); ++l) {
    const std::string& line = lines[l];
    if (line.empty()) continue;
    const std::vector<std::string> f = Split(line, ',');
    std::vector<double> v(names.size());
    for (size_t k = 2; k < names.size(); ++k) {
      const size_t c = static_cast<size_t>(idx[k]);
      if (c >= f.size() || !absl::SimpleAtod(f[c], &v[k])) {
        return absl::InvalidArgumentError(fmt::format("{}:{}:{}: '{}' is not a number", file_name, l + 1, c + 1,
                                                      c < f.size() ? f[c] : std::string()));
      }
    }
    if (static_cast<size_t>(idx[1]) >= f.size()) {
      return absl::InvalidArgumentError(fmt::format("{}:{}:1: short row", file_name, l + 1));
    }
    std::string workload = f[idx[0]];
    constexpr std::string_view kPrefix = "openb_pod_list_";
    if (workload.starts_with(kPrefix)) workload = workload.substr(kPrefix.size());
    PublishedRow r;
    r.n_seeds = static_cast<int>(v[2]);
    r.unalloc100_mean = v[3];
    r.unalloc100_sd = v[4];
    r.unalloc130_mean = v[5];
    r.unalloc130_sd = v[6];
    r.frag100_median = v[7];
    r.frag_ratio100_median = v[8];
    out[{workload, OurPolicyName(f[idx[1]])}] = r;
  }
  return out;
}

absl::StatusOr<PublishedSummary> ReadPublishedSummary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot open '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParsePublishedSummary(ss.str(), path);
}

}  // namespace gpugeek::sim
