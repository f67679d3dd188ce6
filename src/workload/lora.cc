#include "workload/lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "workload/lora_targets.h"
#include "workload/param_count.h"

namespace gpugeek::workload {

absl::StatusOr<LoraParams> CountLoraParams(const ModelConfig& config, const LoraConfig& lora) {
  if (lora.rank < 1) return absl::InvalidArgumentError("LoRA rank must be at least 1");
  const bool all = std::find(lora.targets.begin(), lora.targets.end(), "all-linear") != lora.targets.end();
  // Resolve each target: the family's PEFT name (lora_targets.h) or an inventory name.
  const std::vector<LoraModuleAlias> aliases = LoraModuleAliases(config.model_type);
  std::set<std::string> wanted, available;
  std::vector<const LoraModuleAlias*> fused;
  for (const LoraModuleAlias& a : aliases) available.insert(a.name);
  for (const std::string& t : lora.targets) {
    if (t == "all-linear") continue;
    auto a = std::find_if(aliases.begin(), aliases.end(), [&](const LoraModuleAlias& x) { return x.name == t; });
    if (a == aliases.end()) {
      wanted.insert(t);
    } else if (a->fused) {
      fused.push_back(&*a);
    } else {
      wanted.insert(a->members.begin(), a->members.end());
    }
  }
  const std::vector<ParamGroup> inventory = ParamInventory(config);
  std::set<std::string> seen;
  LoraParams p;
  for (const ParamGroup& g : inventory) {
    if (g.kind != TensorKind::kLinear || !g.in_layers) continue;
    available.insert(g.name);
    if (!all && wanted.count(g.name) == 0) continue;
    seen.insert(g.name);
    p.trainable += lora.rank * (g.in_features + g.out_features) * g.copies;
    p.adapted_matrices += g.copies;
    p.adapted_inputs_per_token += g.in_features * g.active_copies;
  }
  if (!all) {
    // A fused module (query_key_value, c_attn, Wqkv, ...) is one nn.Linear: one adapter over the
    // members' common input and concatenated outputs.
    for (const LoraModuleAlias* a : fused) {
      int64_t in = 0, out = 0, copies = 0, active = 0;
      for (const ParamGroup& g : inventory) {
        if (g.kind != TensorKind::kLinear || !g.in_layers) continue;
        if (std::find(a->members.begin(), a->members.end(), g.name) == a->members.end()) continue;
        in = g.in_features;
        out += g.out_features;
        copies = g.copies;
        active = g.active_copies;
      }
      if (copies == 0) continue;
      seen.insert(a->name);
      p.trainable += lora.rank * (in + out) * copies;
      p.adapted_matrices += copies;
      p.adapted_inputs_per_token += in * active;
    }
    for (const std::string& t : lora.targets) {
      const bool alias = std::any_of(aliases.begin(), aliases.end(), [&](const LoraModuleAlias& x) {
        return x.name == t && (x.fused ? seen.count(t) > 0
                                       : std::any_of(x.members.begin(), x.members.end(),
                                                     [&](const std::string& m) { return seen.count(m) > 0; }));
      });
      if (!alias && seen.count(t) == 0) {
        return absl::InvalidArgumentError(
            fmt::format("LoRA target '{}' is not a projection of model_type '{}' (has: {})", t, config.model_type,
                        absl::StrJoin(available, ", ")));
      }
    }
  }
  return p;
}

}  // namespace gpugeek::workload
