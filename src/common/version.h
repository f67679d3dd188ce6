#pragma once
// The gpugeek release: `gpugeek --version` and the gpugeek_build_info metric (docs/metrics.md).

namespace gpugeek {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace gpugeek
