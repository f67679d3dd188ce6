#pragma once
// GPU GRES strings as Slurm prints them (slurm.conf `Gres=`, slurmrestd node `gres` / `gres_used`).
//
// Grammar (Slurm gres.conf(5), sinfo %G): a comma-separated list of `name[:type]:count[suffix][(detail)]`,
// e.g. "gpu:a100:4", "gpu:a100:4(S:0-1)", "gpu:4", "gpu:a100:0(IDX:N/A)", "gpu:h100:2(IDX:0-1),shard:8".
// Count suffixes K, M, G multiply by 1024^n (Slurm's convention). Only `gpu` entries are kept; "(null)"
// and "N/A" are empty lists.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::backends::slurm {

struct GpuGres {
  std::string type;  // "a100"; empty when the node declares untyped GPUs ("gpu:4")
  int64_t count = 0;

  bool operator==(const GpuGres&) const = default;
};

// The GPU entries of `gres`, in order. InvalidArgument naming the entry when a gpu entry's count is not a
// non-negative integer (with an optional K/M/G suffix) below 2^31.
absl::StatusOr<std::vector<GpuGres>> ParseGpuGres(std::string_view gres);

// Total GPUs of the entries.
int64_t TotalGpus(const std::vector<GpuGres>& gpus);

}  // namespace gpugeek::backends::slurm
