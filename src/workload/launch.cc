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
  const int64_t dp = plan.layout.dp;
  const int64_t accumulation = std::max<int64_t>(1, task.batch / (plan.micro_batch * dp));
  nlohmann::json j;
  j["train_batch_size"] = plan.micro_batch * accumulation * dp;
  j["train_micro_batch_size_per_gpu"] = plan.micro_batch;
  j["gradient_accumulation_steps"] = accumulation;
  j["gradient_clipping"] = 1.0;
  j["bf16"] = {{"enabled", true}};
  nlohmann::json zero = {{"stage", plan.zero_stage}, {"overlap_comm", true}, {"contiguous_gradients", true}};
  if (plan.cpu_offload_bytes > 0) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
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
                                Str(c.head_dim),
                                "--bf16"};
  if (c.num_kv_heads != c.num_heads) {
    a.insert(a.end(), {"--group-query-attention", "--num-query-groups", Str(c.num_kv_heads)});
  }
  if (l.virtual_stages > 1) {
    a.insert(a.end(), {"--num-layers-per-virtual-pipeline-stage", Str(c.num_layers / (l.pp * l.virtual_stages))});
  }
  if (l.sequence_parallel && l.tp > 1) a.push_back("--sequence-parallel");
  if (plan.zero_stage >= 1) a.push_back("--use-distributed-optimizer");
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
  a.insert(a.end(), {"--attention-backend", "flash"});
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
