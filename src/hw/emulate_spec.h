#pragma once
// The emulate spec: a short text naming the GPUs of an emulated node, e.g. "8xH100-SXM-80GB",
// "4xA100-PCIe-80GB", "8xMI300X", "2xT4", or a comma list "8xH100-SXM-80GB,2xL4".
//
// Grammar: spec := group ("," group)* ; group := [COUNT ("x" | "X")] MODEL. COUNT is 1..64 (1
// when omitted), the total at most 64; MODEL is any name GpuCatalog::Resolve accepts (catalog ids,
// vendor names such as "NVIDIA H100 80GB HBM3", trace codes). Spaces around items are ignored.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::hw {

inline constexpr int kMaxEmulatedGpus = 64;

struct EmulateGroup {
  int count = 0;
  const GpuModel* model = nullptr;  // points into the catalog passed to ParseEmulateSpec
};

struct EmulateSpec {
  std::vector<EmulateGroup> groups;  // in the order written; GPUs are numbered in this order
  int TotalGpus() const;
  // The canonical text: "8xH100-SXM-80GB,2xL4" (catalog ids, explicit counts).
  std::string Canonical() const;
};

// Parses `text`. InvalidArgument with a message that names the fix: an empty spec or entry, a
// count outside 1..64 ("count must be 1..64"), an unknown model ("unknown GPU model 'X'; see
// `gpugeek catalog`"), a model without published figures, more than 64 GPUs in all.
// `catalog` must outlive the result.
absl::StatusOr<EmulateSpec> ParseEmulateSpec(std::string_view text, const GpuCatalog& catalog = GpuCatalog::Builtin());

}  // namespace gpugeek::hw
