#include "workload/launch.h"

#include <fmt/format.h>

#include <algorithm>

#include "workload/flops.h"
#include "workload/inference_memory.h"

namespace gpugeek::workload {
namespace {

bool IsTraining(const Task& t) { return t.kind != TaskKind::kInference; }

std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace

int GpusPerNode(const PlanCandidate& plan) {
  if (plan.gpu == nullptr) return plan.gpus;
  return std::max(1, std::min(plan.gpus, NvlinkDomainSize(*plan.gpu)));
}

std::vector<std::string> TorchrunArgs(const PlanCandidate& plan, const LaunchOptions& o) {
  const int per_node = GpusPerNode(plan);
  const int nodes = (plan.gpus + per_node - 1) / per_node;
  std::vector<std::string> a = {"torchrun", "--nnodes", Str(nodes), "--nproc-per-node", Str(per_node)};
  if (nodes > 1) {
    a.insert(a.end(), {"--rdzv-backend", "c10d", "--rdzv-endpoint", o.master_addr + ":" + o.master_port});
  } else {
    a.push_back("--standalone");
  }
  a.push_back(o.script);
  return a;
}

absl::StatusOr<nlohmann::json> DeepSpeedConfig(const PlanCandidate& plan, const Task& task) {
  if (!IsTraining(task)) return absl::InvalidArgumentError("DeepSpeed config: not a training plan");
  if (plan.layout.pp > 1) {
    return absl::InvalidArgumentError("DeepSpeed config: pipeline-parallel plans need Megatron-LM (use MegatronArgs)");
  }
  if (plan.layout.cp > 1) {
    return absl::InvalidArgumentError("DeepSpeed config: context-parallel plans need Megatron-LM (use MegatronArgs)");
  }
  const Recipe& r = task.recipe;
  if (r.framework != Framework::kAuto && r.framework != Framework::kDeepSpeed) {
    return absl::InvalidArgumentError(
        fmt::format("DeepSpeed config: the plan's recipe is {}", FrameworkName(r.framework)));
  }
  if (r.precision != Precision::kMixed && r.precision != Precision::kFp32) {
    return absl::InvalidArgumentError(
        fmt::format("DeepSpeed config: precision {} is not a DeepSpeed mode (bf16 with fp32 master, or fp32)",
                    PrecisionName(r.precision)));
  }
  const int64_t dp = plan.layout.dp;
  const int64_t accumulation = std::max<int64_t>(1, task.batch / (plan.micro_batch * dp));
  nlohmann::json j;
  j["train_batch_size"] = plan.micro_batch * accumulation * dp;
  j["train_micro_batch_size_per_gpu"] = plan.micro_batch;
  j["gradient_accumulation_steps"] = accumulation;
  j["gradient_clipping"] = 1.0;
  j["bf16"] = {{"enabled", r.precision == Precision::kMixed}};
  nlohmann::json zero = {
      {"stage", plan.zero_stage}, {"overlap_comm", !r.features.serial_grad_reduce}, {"contiguous_gradients", true}};
  if (plan.offload != Offload::kNone) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (plan.offload == Offload::kOptimizerAndParams) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  j["zero_optimization"] = zero;
  if (plan.recompute != Recompute::kNone) {
    j["activation_checkpointing"] = {{"partition_activations", plan.layout.tp > 1},
                                     {"contiguous_memory_optimization", false}};
  }
  return j;
}

absl::StatusOr<std::vector<std::string>> MegatronArgs(const ModelConfig& c, const PlanCandidate& plan,
                                                      const Task& task) {
  if (!IsTraining(task)) return absl::InvalidArgumentError("Megatron-LM arguments: not a training plan");
  if (c.kind != ArchitectureKind::kDecoder) {
    return absl::InvalidArgumentError(
        fmt::format("Megatron-LM arguments: model_type '{}' is not a decoder-only model", c.model_type));
  }
  const Recipe& r = task.recipe;
  if (r.framework != Framework::kAuto && r.framework != Framework::kMegatron) {
    return absl::InvalidArgumentError(
        fmt::format("Megatron-LM arguments: the plan's recipe is {}", FrameworkName(r.framework)));
  }
  if (plan.offload != Offload::kNone) {
    return absl::InvalidArgumentError("Megatron-LM arguments: CPU offload is DeepSpeed's (ZeRO-Offload)");
  }
  if (plan.zero_stage >= 2) {
    return absl::InvalidArgumentError(fmt::format(
        "Megatron-LM arguments: ZeRO-{} is DeepSpeed's (Megatron's distributed optimizer is ZeRO-1)", plan.zero_stage));
  }
  if (r.precision != Precision::kMixed && r.precision != Precision::kFp32) {
    return absl::InvalidArgumentError(
        fmt::format("Megatron-LM arguments: precision {} is not a Megatron mode (--bf16 with fp32 master, or fp32)",
                    PrecisionName(r.precision)));
  }
  if (r.optimizer != Optimizer::kAdamW && r.optimizer != Optimizer::kSgdMomentum) {
    return absl::InvalidArgumentError(fmt::format(
        "Megatron-LM arguments: optimizer {} is not one of Megatron's (adam, sgd)", OptimizerName(r.optimizer)));
  }
  const ParallelLayout& l = plan.layout;
  std::vector<std::string> a = {"--tensor-model-parallel-size",
                                Str(l.tp),
                                "--pipeline-model-parallel-size",
                                Str(l.pp),
                                "--micro-batch-size",
                                Str(plan.micro_batch),
                                "--global-batch-size",
                                Str(task.batch),
                                "--seq-length",
                                Str(task.seq),
                                "--max-position-embeddings",
                                Str(std::max(task.seq, c.max_position_embeddings)),
                                "--num-layers",
                                Str(c.num_layers),
                                "--hidden-size",
                                Str(c.hidden_size),
                                "--ffn-hidden-size",
                                Str(c.intermediate_size),
                                "--num-attention-heads",
                                Str(c.num_heads),
                                "--kv-channels",
                                Str(c.head_dim)};
  if (r.precision == Precision::kMixed) a.push_back("--bf16");
  if (r.optimizer == Optimizer::kSgdMomentum) a.insert(a.end(), {"--optimizer", "sgd"});
  if (c.num_kv_heads != c.num_heads) {
    a.insert(a.end(), {"--group-query-attention", "--num-query-groups", Str(c.num_kv_heads)});
  }
  if (l.cp > 1) a.insert(a.end(), {"--context-parallel-size", Str(l.cp)});
  if (l.virtual_stages > 1 && c.num_layers % (l.pp * l.virtual_stages) == 0) {
    a.insert(a.end(), {"--num-layers-per-virtual-pipeline-stage", Str(c.num_layers / (l.pp * l.virtual_stages))});
  } else if (l.virtual_stages > 1) {  // uneven stages: Megatron-Core splits each stage's layers itself
    a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", Str(l.virtual_stages)});
  }
  if (l.pp > 1 && c.num_layers % l.pp != 0) {
    const auto [first, last] = UnevenPipelineStages(c.num_layers, l.pp);
    if (first < 1) {
      return absl::InvalidArgumentError(
          fmt::format("Megatron-LM arguments: {} layers do not split over PP {}", c.num_layers, l.pp));
    }
    a.insert(a.end(),
             {"--decoder-first-pipeline-num-layers", Str(first), "--decoder-last-pipeline-num-layers", Str(last)});
  }
  if (l.sequence_parallel && l.tp > 1) a.push_back("--sequence-parallel");
  if (plan.zero_stage >= 1) a.push_back("--use-distributed-optimizer");
  if (l.ReplicaRanks() > 1 && !r.features.serial_grad_reduce) {
    // The time model overlaps the gradient reduce with the backward; Megatron-Core does only when asked.
    a.push_back("--overlap-grad-reduce");
    if (plan.zero_stage >= 1) a.push_back("--overlap-param-gather");
  }
  if (c.IsMoe()) {
    a.insert(a.end(), {"--num-experts", Str(c.moe.num_experts), "--moe-router-topk", Str(c.moe.experts_per_token),
                       "--expert-model-parallel-size", Str(l.ep)});
  }
  if (c.mlp == MlpKind::kGated) a.push_back("--swiglu");
  if (c.norm == NormKind::kRmsNorm) a.insert(a.end(), {"--normalization", "RMSNorm"});
  if (!c.tie_word_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  if (c.learned_positions == 0) a.insert(a.end(), {"--position-embedding-type", "rope"});
  if (!c.qkv_bias && !c.mlp_bias) a.push_back("--disable-bias-linear");
  if (c.qkv_bias && !c.mlp_bias) a.push_back("--add-qkv-bias");
  switch (plan.recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:
      a.insert(a.end(), {"--recompute-granularity", "selective"});
      break;
    case Recompute::kFull:
      a.insert(a.end(),
               {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"});
      break;
  }
  // Megatron-Core's attention backends: FlashAttention, or the scores materialised (`unfused`).
  a.insert(a.end(), {"--attention-backend", task.recipe.features.unfused_attention ? "unfused" : "flash"});
  return a;
}

absl::StatusOr<std::vector<std::string>> HfTrainerArgs(const PlanCandidate& plan, const Task& task) {
  if (!IsTraining(task)) return absl::InvalidArgumentError("Hugging Face Trainer arguments: not a training plan");
  const Recipe& r = task.recipe;
  if (r.framework != Framework::kHuggingFace) {
    return absl::InvalidArgumentError(
        fmt::format("Hugging Face Trainer arguments: the plan's recipe is {}", FrameworkName(r.framework)));
  }
  if (r.precision == Precision::kMixed) {
    return absl::InvalidArgumentError(
        "Hugging Face Trainer arguments: bf16 weights with an fp32 master copy is not a Trainer mode (use "
        "--precision autocast or bf16)");
  }
  if (plan.recompute == Recompute::kSelective) {
    return absl::InvalidArgumentError("Hugging Face Trainer arguments: selective recompute is Megatron's");
  }
  if (plan.layout.cp > 1) {
    return absl::InvalidArgumentError("Hugging Face Trainer arguments: context parallelism is Megatron-LM's");
  }
  if (plan.offload != Offload::kNone) {
    return absl::InvalidArgumentError("Hugging Face Trainer arguments: CPU offload is DeepSpeed's (ZeRO-Offload)");
  }
  if (r.features.serial_grad_reduce) {
    return absl::InvalidArgumentError(
        "Hugging Face Trainer arguments: serial-grad-reduce is not a Trainer mode (PyTorch DDP overlaps its gradient "
        "buckets with the backward)");
  }
  const int64_t accumulation = std::max<int64_t>(1, task.batch / (plan.micro_batch * plan.layout.dp));
  std::vector<std::string> a = {"--per_device_train_batch_size", Str(plan.micro_batch), "--gradient_accumulation_steps",
                                Str(accumulation)};
  if (r.precision == Precision::kAutocast) a.push_back("--bf16");
  if (plan.recompute == Recompute::kFull) a.push_back("--gradient_checkpointing");
  switch (r.optimizer) {
    case Optimizer::kAdamW:
      a.insert(a.end(), {"--optim", "adamw_torch"});
      break;
    case Optimizer::kAdamW8bit:
      a.insert(a.end(), {"--optim", "adamw_bnb_8bit"});
      break;
    case Optimizer::kSgdMomentum:
      a.insert(a.end(), {"--optim", "sgd"});
      break;
    case Optimizer::kAdafactor:
      a.insert(a.end(), {"--optim", "adafactor"});
      break;
  }
  return a;
}

absl::StatusOr<std::vector<std::string>> VllmServeArgs(const ModelConfig& c, const PlanCandidate& plan,
                                                       const Task& task, const LaunchOptions& o) {
  if (IsTraining(task)) return absl::InvalidArgumentError("vLLM serve: not an inference plan");
  std::vector<std::string> a = {"vllm",
                                "serve",
                                o.model,
                                "--tensor-parallel-size",
                                Str(plan.layout.tp),
                                "--pipeline-parallel-size",
                                Str(plan.layout.pp),
                                "--max-model-len",
                                Str(task.seq),
                                "--max-num-seqs",
                                Str(std::max<int64_t>(1, (task.batch + plan.layout.dp - 1) / plan.layout.dp)),
                                "--gpu-memory-utilization",
                                fmt::format("{:.2f}", kVllmDefaultGpuMemoryUtilization)};
  if (plan.layout.dp > 1) a.insert(a.end(), {"--data-parallel-size", Str(plan.layout.dp)});
  a.insert(a.end(), {"--dtype", c.torch_dtype == "float16" ? "float16" : "bfloat16"});
  if (task.kv_dtype == DType::kFp8) a.insert(a.end(), {"--kv-cache-dtype", "fp8"});
  switch (task.inference_dtype.value_or(DType::kBf16)) {
    case DType::kFp8:
      if (c.quant_method.empty()) a.insert(a.end(), {"--quantization", "fp8"});
      break;
    case DType::kNf4:
      a.insert(a.end(), {"--quantization", "bitsandbytes"});
      break;
    default:
      break;  // int4 / int8 checkpoints carry their quantization_config; vLLM reads it
  }
  return a;
}

std::string ShellJoin(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) {
    if (!s.empty()) s += ' ';
    if (a.find_first_of(" \t'\"") != std::string::npos) {
      std::string q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      s += q + "'";
    } else {
      s += a;
    }
  }
  return s;
}

}  // namespace gpugeek::workload
