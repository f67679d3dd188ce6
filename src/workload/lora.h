#pragma once
// LoRA and QLoRA adapters: which projections are adapted and how many parameters train.
//
// LoRA (Hu et al. 2021, arXiv:2106.09685 Sec. 4): a frozen W (d_out x d_in) gains B·A with
// A (r x d_in) and B (d_out x r): r·(d_in + d_out) trainable parameters per adapted matrix.
// QLoRA (Dettmers et al. 2023, arXiv:2305.14314): the frozen base is stored in NF4 with double
// quantization; adapters train in 16/32-bit; compute dequantizes one weight at a time to bf16.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workload/model_config.h"

namespace gpugeek::workload {

struct LoraConfig {
  int64_t rank = 16;
  // Hugging Face module names ("q_proj", "v_proj", "experts.down_proj", ...) or the single entry
  // "all-linear" (every projection in the layers, as QLoRA and PEFT's `target_modules="all-linear"`;
  // the head is excluded). The defaults are PEFT's LLaMA defaults ("q_proj", "v_proj").
  std::vector<std::string> targets = {"q_proj", "v_proj"};
};

struct LoraParams {
  int64_t trainable = 0;  // r·(d_in + d_out) summed over adapted matrices
  int64_t adapted_matrices = 0;
  // Sum of in_features over the adapted matrices a token passes through (routed experts: only its
  // experts_per_token), whole model: PEFT casts each adapted layer's input to the adapters' fp32.
  int64_t adapted_inputs_per_token = 0;
};

// Trainable adapter parameters. InvalidArgument when a target names no projection of the model
// (the message lists the model's projection names), or rank < 1.
absl::StatusOr<LoraParams> CountLoraParams(const ModelConfig& config, const LoraConfig& lora);

// Bytes per trainable adapter parameter with AdamW: fp32 weight 4 + fp32 gradient 4 + two fp32
// moments 8 (PEFT keeps adapters in fp32 under autocast; Transformer Math 101 §"Training").
inline constexpr double kLoraBytesPerTrainableParam = 16;

}  // namespace gpugeek::workload
