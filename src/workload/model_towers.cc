// Multimodal wrappers whose vision side the planner counts: the language model is read by its own
// family reader, the vision tower and projector here. Module shapes follow transformers'
// modeling_llava.py / modeling_llava_next.py (CLIPVisionModel + LlavaMultiModalProjector),
// modeling_qwen2_vl.py and modeling_qwen2_5_vl.py (vision transformer + patch merger) and
// modeling_gemma3.py (SiglipVisionModel + Gemma3MultiModalProjector).

#include <fmt/format.h>

#include "common/status_macros.h"
#include "workload/model_families.h"

namespace gpugeek::workload::config_internal {
namespace {

bool IsLlava(std::string_view t) { return t == "llava" || t == "llava_next"; }
bool IsQwenVl(std::string_view t) { return t == "qwen2_vl" || t == "qwen2_5_vl"; }

// CLIPVisionConfig / SiglipVisionConfig field defaults (configuration_clip.py,
// configuration_siglip.py) and the CLIP tower LlavaConfig builds when vision_config is absent.
json ClipDefaults(std::string_view wrapper, bool given) {
  if (!given && IsLlava(wrapper)) {
    return {{"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_hidden_layers", 24}, {"num_attention_heads", 16},
            {"image_size", 336},   {"patch_size", 14},          {"num_channels", 3}};
  }
  return {{"hidden_size", 768},        {"intermediate_size", 3072}, {"num_hidden_layers", 12},
          {"num_attention_heads", 12}, {"image_size", 224},         {"patch_size", wrapper == "gemma3" ? 16 : 32},
          {"num_channels", 3}};
}

}  // namespace

bool IsTowerWrapper(std::string_view t) { return IsLlava(t) || IsQwenVl(t) || t == "gemma3"; }

json TowerTextConfig(const json& root, std::string_view model_type) {
  auto text = root.find("text_config");
  const bool has_text = text != root.end() && text->is_object();
  if (IsQwenVl(model_type) && (!has_text || !text->contains("hidden_size"))) {
    // Qwen2-VL / Qwen2.5-VL files before transformers 4.52 keep the language model's fields at
    // the top level; its tensors are Qwen2's.
    json flat = root;
    flat.erase("vision_config");
    flat["model_type"] = "qwen2";
    return flat;
  }
  if (IsLlava(model_type)) {
    // LlavaConfig: text_config's model_type defaults to "llama" and its missing fields to
    // LlamaConfig's defaults (configuration_llama.py).
    json merged = {{"model_type", "llama"},           {"vocab_size", 32000},         {"hidden_size", 4096},
                   {"intermediate_size", 11008},      {"num_hidden_layers", 32},     {"num_attention_heads", 32},
                   {"max_position_embeddings", 2048}, {"tie_word_embeddings", false}};
    if (has_text) {
      auto inner = text->find("model_type");
      if (inner != text->end() && !(inner->is_string() && inner->get<std::string>() == "llama")) return *text;
      for (const auto& [k, v] : text->items()) merged[k] = v;
    }
    return merged;
  }
  if (model_type == "gemma3") {
    // Gemma3Config: text_config's missing fields take Gemma3TextConfig's defaults
    // (configuration_gemma3.py); gemma-3-4b-it's file names only five of them.
    json merged = {{"model_type", "gemma3_text"},
                   {"vocab_size", 262208},
                   {"hidden_size", 2304},
                   {"intermediate_size", 9216},
                   {"num_hidden_layers", 26},
                   {"num_attention_heads", 8},
                   {"num_key_value_heads", 4},
                   {"head_dim", 256},
                   {"max_position_embeddings", 131072},
                   {"sliding_window", 4096},
                   {"sliding_window_pattern", 6},
                   {"tie_word_embeddings", true}};
    if (has_text) {
      auto inner = text->find("model_type");
      if (inner != text->end() && !(inner->is_string() && inner->get<std::string>() == "gemma3_text")) return *text;
      for (const auto& [k, v] : text->items()) merged[k] = v;
    }
    return merged;
  }
  return has_text ? *text : json::object();
}

absl::Status ReadTower(const json& root, std::string_view model_type, ModelConfig& c) {
  const Reader top(root, std::string(model_type));
  const json* vision = top.Find("vision_config");
  if (vision != nullptr && !vision->is_object()) return top.Error("field 'vision_config' must be an object");
  TowerConfig& t = c.tower;
  t.out_hidden_size = c.hidden_size;
  if (IsQwenVl(model_type)) {
    if (vision == nullptr) return top.Error("missing field 'vision_config'");
    const Reader v(*vision, std::string(model_type) + ".vision_config");
    ASSIGN_OR_RETURN(t.num_layers, v.Int({"depth"}, kMaxCount));
    ASSIGN_OR_RETURN(t.num_heads, v.Int({"num_heads"}, kMaxCount));
    ASSIGN_OR_RETURN(t.num_channels, v.IntOr({"in_chans", "in_channels"}, 3, 64));
    ASSIGN_OR_RETURN(t.patch_size, v.IntOr({"patch_size", "spatial_patch_size"}, 14, kMaxCount));
    ASSIGN_OR_RETURN(t.temporal_patch_size, v.IntOr({"temporal_patch_size"}, 2, 64));
    ASSIGN_OR_RETURN(t.spatial_merge_size, v.IntOr({"spatial_merge_size"}, 2, 64));
    if (model_type == "qwen2_vl") {
      // Qwen2VLVisionConfig: embed_dim is the tower's width, hidden_size the merger's output.
      t.kind = TowerKind::kQwen2Vl;
      ASSIGN_OR_RETURN(t.hidden_size, v.Int({"embed_dim"}));
      ASSIGN_OR_RETURN(const int64_t ratio, v.IntOr({"mlp_ratio"}, 4, 64));
      t.intermediate_size = ratio * t.hidden_size;
      ASSIGN_OR_RETURN(t.out_hidden_size, v.IntOr({"hidden_size"}, c.hidden_size));
    } else {
      t.kind = TowerKind::kQwen25Vl;
      ASSIGN_OR_RETURN(t.hidden_size, v.Int({"hidden_size"}));
      ASSIGN_OR_RETURN(t.intermediate_size, v.Int({"intermediate_size"}));
      ASSIGN_OR_RETURN(t.out_hidden_size, v.IntOr({"out_hidden_size"}, c.hidden_size));
    }
    return absl::OkStatus();
  }
  json merged = ClipDefaults(model_type, vision != nullptr);
  if (vision != nullptr) {
    for (const auto& [k, val] : vision->items()) merged[k] = val;
  }
  const Reader v(merged, std::string(model_type) + ".vision_config");
  ASSIGN_OR_RETURN(t.hidden_size, v.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(t.intermediate_size, v.Int({"intermediate_size"}));
  ASSIGN_OR_RETURN(t.num_layers, v.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(t.num_heads, v.Int({"num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(t.image_size, v.Int({"image_size"}, kMaxCount));
  ASSIGN_OR_RETURN(t.patch_size, v.Int({"patch_size"}, kMaxCount));
  ASSIGN_OR_RETURN(t.num_channels, v.IntOr({"num_channels"}, 3, 64));
  if (t.patch_size > t.image_size) return v.Error("field 'patch_size' exceeds image_size");
  if (model_type == "gemma3") {
    t.kind = TowerKind::kSiglip;
    ASSIGN_OR_RETURN(t.mm_tokens_per_image, top.IntOr({"mm_tokens_per_image"}, 256, kMaxCount));
  } else {
    t.kind = TowerKind::kClip;
    ASSIGN_OR_RETURN(t.projector_bias, top.Bool("multimodal_projector_bias", true));
    t.image_newline = model_type == "llava_next";
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::workload::config_internal
