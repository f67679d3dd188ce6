#pragma once
// The FGD authors' published results, as recomputed from their cached runs into
// shared/traces/alibaba-gpu-v2023/fgd_expected_results/fgd_summary_derived.csv, for side-by-side
// comparison (`gpugeek sim fgd --compare`).

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace gpugeek::sim {

struct PublishedRow {
  int n_seeds = 0;
  double unalloc100_mean = 0, unalloc100_sd = 0;
  double unalloc130_mean = 0, unalloc130_sd = 0;
  double frag100_median = 0, frag_ratio100_median = 0;
};

// Keyed by (workload, policy) in our names: ("default", "FGD") for
// ("openb_pod_list_default", "06-FGD"). Errors: NotFound (file), InvalidArgument "FILE:LINE:COL: ..."
// (missing column, non-numeric value).
using PublishedSummary = std::map<std::pair<std::string, std::string>, PublishedRow>;
absl::StatusOr<PublishedSummary> ParsePublishedSummary(std::string_view text, std::string_view file_name);
absl::StatusOr<PublishedSummary> ReadPublishedSummary(const std::string& path);
// "06-FGD" -> "FGD", "05-BestFit" -> "BestFit"; other names unchanged.
std::string OurPolicyName(std::string_view authors_name);

}  // namespace gpugeek::sim
