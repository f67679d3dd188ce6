#include "workload/lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "workload/param_count.h"

namespace gpugeek::workload {

absl::StatusOr<LoraParams> CountLoraParams(const ModelConfig& config, const LoraConfig& lora) {
  if (lora.rank < 1) return absl::InvalidArgumentError("LoRA rank must be at least 1");
  const bool all = std::find(lora.targets.begin(), lora.targets.end(), "all-linear") != lora.targets.end();
  std::set<std::string> wanted(lora.targets.begin(), lora.targets.end());
  std::set<std::string> seen, available;
  LoraParams p;
  for (const ParamGroup& g : ParamInventory(config)) {
    if (g.kind != TensorKind::kLinear || !g.in_layers) continue;
    available.insert(g.name);
    if (!all && wanted.count(g.name) == 0) continue;
    seen.insert(g.name);
    p.trainable += lora.rank * (g.in_features + g.out_features) * g.copies;
    p.adapted_matrices += g.copies;
    p.adapted_inputs_per_token += g.in_features * g.active_copies;
  }
  if (!all) {
    for (const std::string& w : wanted) {
      if (seen.count(w) == 0) {
        return absl::InvalidArgumentError(
            fmt::format("LoRA target '{}' is not a projection of model_type '{}' (has: {})", w, config.model_type,
                        absl::StrJoin(available, ", ")));
      }
    }
  }
  return p;
}

}  // namespace gpugeek::workload
