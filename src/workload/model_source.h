#pragma once
// What `gpugeek plan MODEL` names, resolved into a ModelConfig: a config.json, a model directory
// (config.json and/or safetensors), a `*.safetensors` file or a `model.safetensors.index.json`.
//
// A config.json of an accepted model_type is read natively (workload/model_config.h); its
// safetensors, when present beside it, are summarized as a cross-check. For any other architecture
// the checkpoint's safetensors headers give the tensors (workload/model_weights.h): parameter counts
// and weight bytes are then exact, "from safetensors headers", while hidden size, layers, heads and
// vocabulary, which size activations and the KV cache, come from whatever config.json fields exist
// (or the embedding's shape), and the plan marks them as estimates.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "workload/model_config.h"
#include "workload/model_weights.h"

namespace gpugeek::workload {

struct LoadedModel {
  ModelConfig config;
  std::optional<WeightsSummary> weights;  // when safetensors were found
  bool from_headers = false;              // the generic path: tensors from the headers
  std::string note;                       // one paragraph for the plan: what is exact, what is estimated
};

// NotFound when `path` holds neither a readable config.json nor safetensors; InvalidArgument for a
// malformed config or header, or a checkpoint without parameter tensors; a config of an unknown
// model_type without safetensors beside it returns the config reader's error, which names the type;
// FailedPrecondition for an unknown model_type whose index names shard files that are absent.
absl::StatusOr<LoadedModel> LoadModelForPlan(const std::string& path);

}  // namespace gpugeek::workload
