#pragma once
// Launch rendering: the command lines and config files that run a chosen plan.
//
//  - torchrun (PyTorch elastic launcher) arguments for the plan's node and GPU counts;
//  - a DeepSpeed JSON config (batch sizes, bf16, ZeRO stage and offload, activation checkpointing)
//    for plans without pipeline parallelism (DeepSpeed's pipeline engine needs model changes);
//  - Megatron-LM `pretrain_gpt.py` arguments (parallel sizes, the model's shape, recompute);
//  - Hugging Face `TrainingArguments` flags for the Hugging Face recipe;
// Each renders only plans of a recipe its tool runs (training_memory.h Recipe), so the memory of the
// plan is the memory of the launched run.
//  - vLLM `serve` arguments for inference plans.
// Flag names follow each tool's documentation (torchrun --help; DeepSpeed "Configuration JSON";
// Megatron-LM megatron/training/arguments.py; vLLM "Engine Arguments").

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "workload/model_config.h"
#include "workload/planner.h"

namespace gpugeek::workload {

struct LaunchOptions {
  std::string script = "train.py";                   // torchrun's entry point
  std::string model = "MODEL";                       // Hugging Face id or path (vLLM)
  std::string master_addr = "$GPUGEEK_MASTER_ADDR";  // filled in by the agent at launch
  std::string master_port = "$GPUGEEK_MASTER_PORT";
};

// GPUs per node the plan runs with: the NVLink domain (capped by the plan's GPU count).
int GpusPerNode(const PlanCandidate& plan);

// `torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint ADDR:PORT SCRIPT`.
std::vector<std::string> TorchrunArgs(const PlanCandidate& plan, const LaunchOptions& options = {});

// DeepSpeed config for a training plan. InvalidArgument for inference plans and for PP > 1.
// train_batch_size = micro-batch x gradient accumulation x DP (DeepSpeed checks this identity).
absl::StatusOr<nlohmann::json> DeepSpeedConfig(const PlanCandidate& plan, const Task& task);

// Megatron-LM arguments for a training plan of a decoder model. InvalidArgument for inference
// plans and for encoder-decoder / vision models.
absl::StatusOr<std::vector<std::string>> MegatronArgs(const ModelConfig& config, const PlanCandidate& plan,
                                                      const Task& task);

// Hugging Face `TrainingArguments` flags for a plan of the Hugging Face recipe (Framework::kHuggingFace):
// --per_device_train_batch_size, --gradient_accumulation_steps, --bf16 (autocast), --gradient_checkpointing
// (full recompute), --optim (adamw_torch, adamw_bnb_8bit, sgd, adafactor). Pure bf16 has no flag: the
// model is loaded with torch_dtype=bfloat16 and the Trainer runs without --bf16. InvalidArgument for
// inference plans, other frameworks, mixed precision (no Trainer mode) and selective recompute.
absl::StatusOr<std::vector<std::string>> HfTrainerArgs(const PlanCandidate& plan, const Task& task);

// `vllm serve MODEL ...` for an inference plan. InvalidArgument for training plans.
absl::StatusOr<std::vector<std::string>> VllmServeArgs(const ModelConfig& config, const PlanCandidate& plan,
                                                       const Task& task, const LaunchOptions& options = {});

// Joins arguments into one shell line (arguments with spaces are single-quoted).
std::string ShellJoin(const std::vector<std::string>& args);

}  // namespace gpugeek::workload
