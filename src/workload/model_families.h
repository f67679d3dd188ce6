#pragma once
// Internal to workload/: the family readers added beside model_config.cc's original ones, and the
// helpers they share with it. Each reader maps one Hugging Face `model_type` onto ModelConfig as
// the family's transformers modelling file (`modeling_<family>.py`, or the checkpoint's own
// remote code where transformers has none) builds its modules; the comment on each reader names it.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "workload/config_reader.h"
#include "workload/model_config.h"

namespace gpugeek::workload::config_internal {

// Shared with model_config.cc's readers.
absl::Status ReadHeads(const Reader& r, ModelConfig& c);
absl::Status ReadSlidingWindow(const Reader& r, ModelConfig& c);
absl::Status ReadTieDefault(const Reader& r, bool fallback, ModelConfig& c);

using FamilyReader = absl::Status (*)(const Reader& r, ModelConfig& c);

// The reader for one of the families in model_families.cc, or nullptr.
FamilyReader FindFamilyReader(std::string_view model_type);

// Multimodal wrappers whose vision tower and projector are counted (llava, llava_next, qwen2_vl,
// qwen2_5_vl, gemma3).
bool IsTowerWrapper(std::string_view model_type);

// The language-model part of a tower wrapper as a config object to parse: `text_config` with the
// defaults its wrapper's configuration class fills in (LlavaConfig: LlamaConfig's), or, for the
// Qwen2-VL family's older flat files, the root itself with model_type "qwen2".
json TowerTextConfig(const json& root, std::string_view model_type);

// Reads the wrapper's `vision_config` (and projector fields) into c.tower. c holds the parsed
// language model already (its hidden size is the projector's output).
absl::Status ReadTower(const json& root, std::string_view model_type, ModelConfig& c);

}  // namespace gpugeek::workload::config_internal
