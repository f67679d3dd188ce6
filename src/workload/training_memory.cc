#include "workload/training_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "workload/inference_memory.h"
#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes per token of the MLP activations of one layer, averaged over dense and MoE layers.
double MlpActivationBytesPerToken(const ModelConfig& c) {
  const double per_width = c.mlp == MlpKind::kGated ? 8 : 4;  // see the header: gate, up, act, down input
  const double dense = per_width * c.intermediate_size;
  if (!c.IsMoe()) return dense;
  const double moe = per_width * (c.moe.experts_per_token * c.moe.intermediate_size +
                                  c.moe.num_shared_experts * c.moe.shared_expert_intermediate_size);
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) moe_layers += c.IsMoeLayer(i) ? 1 : 0;
  return (moe * moe_layers + dense * (c.num_layers - moe_layers)) / std::max<int64_t>(c.num_layers, 1);
}

}  // namespace

std::string_view OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kAdamW:
      return "adamw";
    case Optimizer::kAdamW8bit:
      return "adamw-8bit";
    case Optimizer::kSgdMomentum:
      return "sgd-momentum";
    case Optimizer::kAdafactor:
      return "adafactor";
  }
  return "?";
}

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kMixed:
      return "mixed";
    case Precision::kPureBf16:
      return "bf16";
    case Precision::kFp32:
      return "fp32";
    case Precision::kAutocast:
      return "autocast";
  }
  return "?";
}

std::string_view FrameworkName(Framework f) {
  switch (f) {
    case Framework::kAuto:
      return "auto";
    case Framework::kMegatron:
      return "megatron";
    case Framework::kDeepSpeed:
      return "deepspeed";
    case Framework::kHuggingFace:
      return "hf";
  }
  return "?";
}

namespace {

// The enumerator of `E` whose Name(e) is `name`, over the `count` enumerators 0..count-1.
template <typename E, typename NameFn>
absl::StatusOr<E> ParseByName(std::string_view name, int count, NameFn name_of, std::string_view what) {
  std::vector<std::string_view> names;
  for (int i = 0; i < count; ++i) {
    const E e = static_cast<E>(i);
    if (name_of(e) == name) return e;
    names.push_back(name_of(e));
  }
  return absl::InvalidArgumentError(fmt::format("unknown {} '{}' (one of: {})", what, name, fmt::join(names, ", ")));
}

}  // namespace

std::string_view OffloadName(Offload o) {
  switch (o) {
    case Offload::kNone:
      return "none";
    case Offload::kOptimizer:
      return "optimizer";
    case Offload::kOptimizerAndParams:
      return "optimizer+params";
  }
  return "?";
}

absl::StatusOr<Offload> ParseOffload(std::string_view name) {
  return ParseByName<Offload>(name, 3, OffloadName, "offload");
}

absl::StatusOr<Optimizer> ParseOptimizer(std::string_view name) {
  return ParseByName<Optimizer>(name, 4, OptimizerName, "optimizer");
}
absl::StatusOr<Recompute> ParseRecompute(std::string_view name) {
  return ParseByName<Recompute>(name, 3, RecomputeName, "recompute");
}
absl::StatusOr<Precision> ParsePrecision(std::string_view name) {
  return ParseByName<Precision>(name, 4, PrecisionName, "precision");
}
absl::StatusOr<Framework> ParseFramework(std::string_view name) {
  return ParseByName<Framework>(name, 4, FrameworkName, "framework");
}

std::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

namespace {

struct FeatureName {
  std::string_view name;
  bool RecipeFeatures::*flag;
};
constexpr FeatureName kFeatures[] = {
    {"paged-optimizer", &RecipeFeatures::paged_optimizer},
    {"optimizer-in-backward", &RecipeFeatures::optimizer_in_backward},
    {"fused-optimizer", &RecipeFeatures::fused_optimizer},
    {"chunked-loss", &RecipeFeatures::chunked_loss},
    {"activation-offload", &RecipeFeatures::activation_offload},
    {"compile", &RecipeFeatures::compile},
    {"serial-grad-reduce", &RecipeFeatures::serial_grad_reduce},
    {"unfused-attention", &RecipeFeatures::unfused_attention},
};

}  // namespace

absl::StatusOr<RecipeFeatures> ParseRecipeFeatures(std::string_view list) {
  RecipeFeatures f;
  while (!list.empty()) {
    const size_t end = list.find(';');
    std::string_view item = list.substr(0, end);
    list = end == std::string_view::npos ? std::string_view() : list.substr(end + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    bool known = false;
    for (const FeatureName& n : kFeatures) {
      if (n.name == item) {
        f.*n.flag = true;
        known = true;
      }
    }
    if (!known) {
      std::vector<std::string_view> names;
      for (const FeatureName& n : kFeatures) names.push_back(n.name);
      return absl::InvalidArgumentError(
          fmt::format("unknown recipe feature '{}' (';'-separated, any of: {})", item, fmt::join(names, ", ")));
    }
  }
  return f;
}

std::string RecipeFeaturesName(const RecipeFeatures& f) {
  std::vector<std::string_view> names;
  for (const FeatureName& n : kFeatures) {
    if (f.*n.flag) names.push_back(n.name);
  }
  return fmt::format("{}", fmt::join(names, ";"));
}

absl::StatusOr<Recipe> RecipePreset(std::string_view name) {
  Recipe r;
  if (name == "auto") return r;
  if (name == "megatron") {
    r.framework = Framework::kMegatron;
    return r;
  }
  if (name == "deepspeed") {
    r.framework = Framework::kDeepSpeed;
    return r;
  }
  if (name == "hf" || name == "peft") {
    r.framework = Framework::kHuggingFace;
    r.precision = Precision::kAutocast;
    return r;
  }
  if (name == "megatron-2021") {
    r.framework = Framework::kMegatron;
    r.recompute = Recompute::kFull;
    r.features.unfused_attention = true;
    r.features.serial_grad_reduce = true;
    r.max_zero_stage = 0;
    r.sequence_parallel = false;
    return r;
  }
  if (name == "torchtune") {
    r.framework = Framework::kHuggingFace;
    r.precision = Precision::kPureBf16;
    r.recompute = Recompute::kFull;
    return r;
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown recipe '{}' (one of: auto, megatron, megatron-2021, deepspeed, hf, peft, torchtune)", name));
}

int RecipeMaxZeroStage(const Recipe& r) {
  const Framework f = r.framework;
  const int framework_max = f == Framework::kDeepSpeed || f == Framework::kAuto ? 3 : f == Framework::kMegatron ? 1 : 0;
  return std::min(framework_max, r.max_zero_stage);
}

StateBytes MixedPrecisionStates(Optimizer optimizer, bool fp32_grads) {
  return RecipeStates(optimizer, Precision::kMixed, fp32_grads);
}

StateBytes RecipeStates(Optimizer optimizer, Precision precision, bool fp32_grads) {
  StateBytes b;
  const bool wide = precision == Precision::kFp32 || precision == Precision::kAutocast;
  b.weight = wide ? 4 : 2;
  b.grad = wide || fp32_grads ? 4 : 2;
  b.master = precision == Precision::kMixed ? 4 : 0;
  const double moment = precision == Precision::kPureBf16 ? 2 : 4;
  switch (optimizer) {
    case Optimizer::kAdamW:
      b.optimizer = 2 * moment;  // momentum + variance
      break;
    case Optimizer::kAdamW8bit:
      b.optimizer = 2;  // bitsandbytes 8-bit blockwise states (Dettmers et al. 2021, arXiv:2110.02861)
      break;
    case Optimizer::kSgdMomentum:
      b.optimizer = moment;
      break;
    case Optimizer::kAdafactor:
      b.optimizer = 0;
      break;
  }
  return b;
}

ModelStates ZeroModelStates(double params, const StateBytes& b, int zero_stage, int dp, bool offload_optimizer,
                            bool offload_params) {
  const double n = std::max(dp, 1);
  ModelStates s;
  s.weights = b.weight * params / (zero_stage >= 3 ? n : 1);
  s.grads = b.grad * params / (zero_stage >= 2 ? n : 1);
  s.optimizer = (b.master + b.optimizer) * params / (zero_stage >= 1 ? n : 1);
  if (offload_optimizer) {
    s.cpu += s.optimizer;
    s.optimizer = 0;
    if (zero_stage >= 2) {  // ZeRO-Offload moves the gradient partition to the host for the update
      s.cpu += s.grads;
      s.grads = 0;
    }
  }
  if (offload_params && zero_stage >= 3) {
    s.cpu += s.weights;
    s.weights = 0;
  }
  return s;
}

DeepSpeedEstimate DeepSpeedZero2(int64_t total_params, int gpus_per_node, int nodes, bool cpu_offload) {
  constexpr double kBufferFactor = 1.5;
  const double p = static_cast<double>(total_params);
  const int total_gpus = gpus_per_node * nodes;
  DeepSpeedEstimate e;
  if (cpu_offload) {
    e.gpu_bytes = 2 * p;
    e.cpu_bytes = p * std::max(4 * total_gpus, 16) * kBufferFactor;
  } else {
    // "2 = params_16bit, 18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit"
    e.gpu_bytes = 2 * p + std::floor(18 * p / total_gpus);
    e.cpu_bytes = p * 4 * gpus_per_node * kBufferFactor;
  }
  return e;
}

DeepSpeedEstimate DeepSpeedZero3(int64_t total_params, int64_t largest_layer_params, int gpus_per_node, int nodes,
                                 bool cpu_offload, bool cpu_offload_params, bool zero_init) {
  constexpr double kBufferFactor = 1.5;
  const double p = static_cast<double>(total_params);
  const int total_gpus = gpus_per_node * nodes;
  const double gpus_factor = 1.0 / nodes;
  const double largest_layer_memory = 4.0 * static_cast<double>(largest_layer_params);
  DeepSpeedEstimate e;
  if (cpu_offload) {
    if (cpu_offload_params) {
      e.gpu_bytes = largest_layer_memory;
      e.cpu_bytes = zero_init ? p * 18 * gpus_factor * kBufferFactor
                              : p * std::max(4.0 * gpus_per_node, 18 * gpus_factor) * kBufferFactor;
    } else {
      e.gpu_bytes = largest_layer_memory + std::floor(2 * p / total_gpus);
      e.cpu_bytes = zero_init ? p * 16 * gpus_factor * kBufferFactor
                              : p * std::max(4.0 * gpus_per_node, 16 * gpus_factor) * kBufferFactor;
    }
  } else {
    e.gpu_bytes = largest_layer_memory + std::floor(18 * p / total_gpus);
    e.cpu_bytes = zero_init ? static_cast<double>(largest_layer_params) * 4 * gpus_per_node * kBufferFactor
                            : p * 4 * gpus_per_node * kBufferFactor;
  }
  return e;
}

double ActivationBytesPerLayer(const ModelConfig& c, const ActivationOptions& o) {
  const double s = static_cast<double>(o.seq), b = static_cast<double>(o.micro_batch);
  const double t = std::max(o.tp, 1), h = static_cast<double>(c.hidden_size);
  const double replicated_div = o.sequence_parallel ? t : 1;
  if (o.recompute == Recompute::kFull) return 2 * s * b * h / replicated_div;
  // LayerNorm inputs 4, attention input 2, MLP input 2, two dropout masks 1 each (paper Sec. 4.1).
  const double replicated = (8 + (o.dropout_masks ? 2 : 0)) * h;
  double dqk = static_cast<double>(c.head_dim), dv = static_cast<double>(c.head_dim);
  double n_kv = static_cast<double>(c.num_kv_heads);
  if (c.use_mla) {
    dqk = static_cast<double>(c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim);
    dv = static_cast<double>(c.mla.v_head_dim);
    n_kv = static_cast<double>(c.num_heads);
  }
  const double n_q = static_cast<double>(c.num_heads);
  // Q, K (for QK^T), V, and the output projection's input, 2 bytes each.
  const double attention = 2 * (n_q * dqk + n_kv * dqk + n_kv * dv + n_q * dv);
  const double sharded = attention + MlpActivationBytesPerToken(c);
  double per_token = replicated / replicated_div + sharded / t;
  const bool scores_stored = o.recompute == Recompute::kNone && !o.flash_attention;
  // Softmax output 2as, dropout mask as, dropout output 2as (the paper's 5as²b).
  if (scores_stored) per_token += (o.dropout_masks ? 5 : 2) * n_q * s / t;
  return per_token * s * b;
}

double LayersOfActivationsInFlight(int64_t layers, int pp, int64_t micro_batches, int virtual_stages) {
  const int p = std::max(pp, 1);
  const double per_stage = static_cast<double>(CeilDiv(layers, p));
  const double in_flight = static_cast<double>(std::min<int64_t>(p, std::max<int64_t>(micro_batches, 1)));
  const double interleave = virtual_stages > 1 && p > 1 ? 1.0 + (p - 1.0) / (p * virtual_stages) : 1.0;
  return per_stage * in_flight * interleave;
}

absl::StatusOr<TrainingMemory> EstimateTrainingMemory(const ModelConfig& config, const TrainingOptions& o,
                                                      const MemoryContext& ctx) {
  // Formulas are built only when asked for: the planner evaluates thousands of layouts.
  auto F = [&ctx](std::string_view f, const auto&... a) -> std::string {
    return ctx.formulas ? fmt::vformat(f, fmt::make_format_args(a...)) : std::string();
  };
  // Context-parallel ranks hold replicas of the weights, as data-parallel ones do: the model states
  // shard over DP x CP (Megatron-LM's distributed optimizer and gradient reduce span both).
  ParallelLayout l = o.layout;
  l.dp = o.layout.ReplicaRanks();
  l.cp = 1;  // folded into dp above
  const int cp = o.layout.cp;
  if (o.zero_stage < 0 || o.zero_stage > 3) return absl::InvalidArgumentError("zero_stage must be 0, 1, 2 or 3");
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.ep < 1 || l.virtual_stages < 1 || cp < 1) {
    return absl::InvalidArgumentError("parallel sizes must be at least 1");
  }
  if (l.dp % l.ep != 0) return absl::InvalidArgumentError("expert parallel size must divide the data-parallel size");
  if (o.offload_params && o.zero_stage != 3) {
    return absl::InvalidArgumentError("parameter offload needs ZeRO stage 3");
  }
  if (o.seq < 1 || o.micro_batch < 1) return absl::InvalidArgumentError("seq and micro_batch must be at least 1");

  TrainingMemory r;
  MemoryBreakdown& m = r.gpu;
  std::vector<ParamGroup> own_inventory;
  if (ctx.inventory == nullptr) own_inventory = ParamInventory(config);
  const std::vector<ParamGroup>& inventory = ctx.inventory != nullptr ? *ctx.inventory : own_inventory;
  GpuShard own_shard;
  if (ctx.shard == nullptr) own_shard = ShardForLayout(config, inventory, l);
  const GpuShard& shard = ctx.shard != nullptr ? *ctx.shard : own_shard;
  const double expert = shard.ExpertParams();
  const double dense = shard.Params() - expert;
  r.params_on_gpu = shard.Params();
  const int expert_dp = std::max(l.dp / l.ep, 1);

  const bool eager = o.framework == Framework::kHuggingFace;
  bool grads_with_activations = false;  // optimizer in backward: gradients live during the backward
  double step_temporary = 0;            // eager: live with the gradients during the optimizer step
  std::string step_formula;
  double lora_inputs_per_token = 0;
  if (o.mode == FineTune::kFull) {
    const StateBytes b = RecipeStates(o.optimizer, o.precision, o.fp32_grads);
    const ModelStates d = ZeroModelStates(dense, b, o.zero_stage, l.dp, o.offload_optimizer, o.offload_params);
    const ModelStates e = ZeroModelStates(expert, b, o.zero_stage, expert_dp, o.offload_optimizer, o.offload_params);
    const std::string shard_note = F("{:.4g} params/GPU (TP {} PP {} EP {}), ZeRO-{} over DP {}", r.params_on_gpu, l.tp,
                                     l.pp, l.ep, o.zero_stage, l.dp);
    const std::string offloaded = o.offload_optimizer ? ", offloaded to the CPU" : "";
    double largest = 0;  // elements of the largest tensor on this GPU
    for (const ShardedGroup& g : shard.groups) {
      largest = std::max(largest, static_cast<double>(g.in_features) * static_cast<double>(g.out_features));
    }
    m.Add("weights", d.weights + e.weights,
          F("{} B/param x {}{}", b.weight, shard_note, o.offload_params && o.zero_stage >= 3 ? offloaded : ""));
    if (o.features.optimizer_in_backward && !o.offload_optimizer) {
      // torchtune optimizer_in_bwd: a hook steps each parameter and frees its gradient as soon as it is
      // accumulated, during the backward: one gradient is live, beside the activations.
      grads_with_activations = true;
      m.Add("gradients", b.grad * largest / (o.zero_stage >= 2 ? l.dp : 1),
            F("{} B x the largest tensor ({:.4g} params): stepped and freed in the backward (optimizer in "
              "backward)",
              b.grad, largest));
    } else {
      m.Add("gradients", d.grads + e.grads,
            F("{} B/param x {}{}", b.grad, shard_note, o.offload_optimizer && o.zero_stage >= 2 ? offloaded : ""));
    }
    double optimizer = d.optimizer + e.optimizer;
    double paged = 0;
    if (o.features.paged_optimizer && !o.offload_optimizer && b.master + b.optimizer > 0) {
      // The moments are in unified memory that pages to the host; the fp32 master (if any) is not.
      paged = optimizer * b.optimizer / (b.master + b.optimizer);
      optimizer -= paged;
    }
    m.Add("optimizer_states", optimizer,
          F("{} master + {} {} B/param x {}{}{}", b.master, b.optimizer, OptimizerName(o.optimizer), shard_note,
            offloaded, paged > 0 ? ", moments paged (unified memory, host-backed)" : ""));
    r.cpu_offload_bytes = d.cpu + e.cpu + paged;
    for (const ParamGroup& g : inventory) r.trainable_params += static_cast<double>(g.Total());
    if (o.precision == Precision::kAutocast) {
      m.Add("autocast_cache", 2 * r.params_on_gpu,
            F("torch.autocast's bf16 copy of every weight: 2 B/param x {:.4g}", r.params_on_gpu));
    }
    if (grads_with_activations) {
      // Stepped tensor by tensor inside the backward: no step after it.
    } else if (o.precision == Precision::kMixed && !o.offload_optimizer) {
      step_temporary = 4 * largest;
      step_formula = F("fp32 copy of the largest gradient ({:.4g} params) while the master steps", largest);
    } else if (o.optimizer == Optimizer::kAdamW && !o.offload_optimizer && !o.features.fused_optimizer) {
      step_temporary = b.optimizer / 2 * r.params_on_gpu / (o.zero_stage >= 1 ? l.dp : 1);
      step_formula = F("one moment-sized temporary of torch.optim.AdamW's foreach step ({} B/param)", b.optimizer / 2);
    }
  } else {
    const bool qlora = o.mode == FineTune::kQlora;
    const QuantScheme base = qlora ? QuantScheme{DType::kNf4, 0, true} : QuantScheme{DType::kBf16};
    double base_bytes =
        static_cast<double>(shard.WeightBytes(base, base, QuantScheme{DType::kBf16})) / (o.zero_stage >= 3 ? l.dp : 1);
    // Parameter offload (ZeRO-Infinity offload_param, FSDP CPUOffload(offload_params=True)) keeps the frozen
    // base shards in host memory too; they are gathered layer by layer (the zero3_gather term).
    const double base_offloaded = o.offload_params && o.zero_stage >= 3 ? base_bytes : 0;
    base_bytes -= base_offloaded;
    m.Add("weights", base_bytes,
          F("frozen base {:.4g} params/GPU at {} ({:.4g} B/param){}{}", r.params_on_gpu,
            qlora ? "nf4+double-quant" : "bf16", base.BytesPerWeight(),
            o.zero_stage >= 3 ? F(", ZeRO-3 over DP {}", l.dp) : std::string(),
            base_offloaded > 0 ? ", offloaded to the CPU" : ""));
    absl::StatusOr<LoraParams> lora = ctx.lora != nullptr ? *ctx.lora : CountLoraParams(config, o.lora);
    if (!lora.ok()) return lora.status();
    r.trainable_params = static_cast<double>(lora->trainable);
    lora_inputs_per_token = static_cast<double>(lora->adapted_inputs_per_token);
    // Adapters split with their base matrices over TP and PP.
    double total_linear = 0;
    for (const ParamGroup& g : inventory) {
      if (g.kind == TensorKind::kLinear && g.in_layers) total_linear += static_cast<double>(g.Total());
    }
    const double linear_here = shard.LinearParams() + expert;
    const double adapters = total_linear > 0 ? lora->trainable * linear_here / total_linear : 0;
    // PEFT keeps adapters in fp32 whatever the base; torchtune's `dtype: bf16` (kPureBf16) builds them in bf16
    // with bf16 moments.
    const bool bf16_adapters = o.precision == Precision::kPureBf16;
    StateBytes b{bf16_adapters ? 2.0 : 4.0, bf16_adapters ? 2.0 : 4.0, 0,
                 RecipeStates(o.optimizer, bf16_adapters ? Precision::kPureBf16 : Precision::kMixed, false).optimizer};
    const ModelStates a = ZeroModelStates(adapters, b, o.zero_stage, l.dp, o.offload_optimizer, false);
    const double paged = o.features.paged_optimizer ? a.optimizer : 0;
    m.Add("gradients", a.grads,
          F("{} adapter grads: {:.4g} LoRA params/GPU (r={})", bf16_adapters ? "bf16" : "fp32", adapters, o.lora.rank));
    m.Add("optimizer_states", a.weights + a.optimizer - paged,
          F("{} adapter weights {} + {} {} B/param{}", bf16_adapters ? "bf16" : "fp32", b.weight,
            OptimizerName(o.optimizer), b.optimizer, paged > 0 ? " (moments paged, host-backed)" : ""));
    r.cpu_offload_bytes = a.cpu + paged + base_offloaded;
    if (qlora) {
      double largest = 0;
      for (const ShardedGroup& g : shard.groups) {
        if (g.group->kind == TensorKind::kLinear) {
          largest = std::max(largest, static_cast<double>(g.in_features) * g.out_features);
        }
      }
      m.Add("qlora_dequant", 2 * largest, "one bf16 copy of the largest base projection being dequantized");
    }
  }

  if (o.zero_stage >= 3 && l.dp > 1) {
    // ZeRO-3 / FSDP gather each layer's full weights before using them and prefetch the next: two of the
    // largest unit (one transformer layer, or the biggest tensor outside the layers, e.g. the embedding)
    // in 16-bit are live beside the shards (DeepSpeed stage3_prefetch_bucket_size, FSDP's one-unit
    // prefetch).
    double layer = 0, outside = 0;
    for (const ShardedGroup& g : shard.groups) {
      const double elements = static_cast<double>(g.in_features) * static_cast<double>(g.out_features);
      if (g.group->in_layers) {
        layer += elements * g.copies;
      } else {
        outside = std::max(outside, elements);
      }
    }
    layer /= std::max<int64_t>(shard.layers, 1);
    const double unit = std::max(layer, outside);
    m.Add("zero3_gather", 2 * 2 * unit,
          F("2 gathered units x 2 B x {:.4g} params (the largest layer or tensor)", unit));
  }
  // Each context-parallel rank holds seq / cp tokens of every activation.
  ActivationOptions a{CeilDiv(o.seq, cp),  o.micro_batch, l.tp,
                      l.sequence_parallel, o.recompute,   !o.features.unfused_attention,
                      o.dropout_masks};
  if (config.kind == ArchitectureKind::kVisionEncoder) a.seq = config.VisionSequenceLength();
  const double per_layer = ActivationBytesPerLayer(config, a);
  double layers = LayersOfActivationsInFlight(config.TotalLayers(), l.pp, o.micro_batches, l.virtual_stages);
  // torchtune OffloadActivations: saved tensors go to the host on a side stream; the layer being copied out
  // and the one brought back stay on the GPU.
  if (o.features.activation_offload) layers = std::min(layers, 2.0);
  m.Add("activations", per_layer * layers,
        F("{:.4g} B/layer (s={} b={} t={}{} recompute={}{}) x {:.4g} layers in flight{}", per_layer, a.seq,
          a.micro_batch, l.tp, l.sequence_parallel ? " SP" : "", RecomputeName(o.recompute),
          o.features.unfused_attention ? "" : " flash", layers,
          o.features.activation_offload ? " (rest offloaded)" : ""));
  if (o.recompute == Recompute::kFull) {
    ActivationOptions one = a;
    one.recompute = Recompute::kNone;
    m.Add("recompute_workspace", ActivationBytesPerLayer(config, one),
          "one layer's activations rebuilt during its backward pass");
  }
  if (cp > 1) {
    // Ring attention (Megatron-LM's context parallelism, Liu et al. 2023 arXiv:2310.01889): while one
    // chunk's K and V are used, the next arrives: two chunks of K and V in flight, forward and backward.
    const double kv_heads = static_cast<double>(CeilDiv(config.num_kv_heads, l.tp));
    const double chunk = 2.0 * static_cast<double>(a.seq) * o.micro_batch * kv_heads * config.head_dim * 2;
    m.Add("cp_kv_buffers", 2 * chunk,
          F("2 K/V chunks in flight x 2 (K, V) x s/cp={} x b={} x {} KV heads/t x d={} x 2 B", a.seq, o.micro_batch,
            kv_heads, config.head_dim));
  }
  const double s = static_cast<double>(a.seq), bsz = static_cast<double>(o.micro_batch);
  const double in_flight = static_cast<double>(std::min<int64_t>(l.pp, std::max<int64_t>(o.micro_batches, 1)));
  double extra = 2 * s * bsz * config.hidden_size * in_flight / (l.sequence_parallel ? l.tp : 1);
  std::string extra_formula = F("embedding output 2 x s x b x h x {} in flight", in_flight);
  if (l.pp == 1 && config.vocab_size > 0) {
    // torchtune CEWithChunkedOutputLoss (`torchtune/modules/loss/ce_chunked_output_loss.py`, 8 chunks):
    // the bf16 logits 2 and every chunk's fp32 log-softmax 4 (saved for the backward) are live together;
    // the fp32 copy and its gradient (4 + 4) exist one chunk at a time: 2 + 4 + 8/8 = 7 B per logit.
    // Compiled (torchtune `compile: True` compiles the loss too), each chunk's upcast, log-softmax and their
    // backward are one fused kernel that keeps only the bf16 logits and a log-sum-exp per row (inductor's
    // partitioner recomputes the pointwise work instead of saving fp32 tensors): 2 B per logit + one chunk's
    // fp32 transients 8/8 = 3.
    const bool chunked = eager && o.features.chunked_loss;
    const double chunked_per_logit = o.features.compile ? 3 : 7;
    const double per_logit = chunked ? chunked_per_logit : eager ? 14 : 4;
    extra += per_logit * s * bsz * CeilDiv(config.vocab_size, l.tp);
    extra_formula += chunked ? F(" + chunked loss {} ({}) x s x b x ceil(V/t)={}", chunked_per_logit,
                                 o.features.compile ? "compiled: bf16 logits 2, one chunk of 8 upcast 8/8"
                                                    : "bf16 logits 2, fp32 log-softmax 4, one chunk of 8 upcast 8/8",
                                 CeilDiv(config.vocab_size, l.tp))
                     : eager ? F(" + Hugging Face loss 14 (bf16 logits 2, fp32 copy 4, log-softmax 4, its grad 4)"
                                 " x s x b x ceil(V/t)={}",
                                 CeilDiv(config.vocab_size, l.tp))
                             : F(" + fp32 logits 4 x s x b x ceil(V/t)={}", CeilDiv(config.vocab_size, l.tp));
  }
  m.Add("embedding_logits", extra, extra_formula);
  if (eager && o.mode != FineTune::kFull && lora_inputs_per_token > 0 && o.precision != Precision::kPureBf16) {
    // PEFT casts each adapted layer's input to the fp32 adapters; kept for the adapters' backward.
    const double inputs_per_layer = lora_inputs_per_token / std::max<int64_t>(config.TotalLayers(), 1);
    const double held = o.recompute == Recompute::kFull ? 1 : layers;
    m.Add("peft_fp32_inputs", 4 * s * bsz * inputs_per_layer / l.tp * held,
          F("4 B x s x b x {:.4g} adapted input features per layer / t={} x {:.4g} layers", inputs_per_layer, l.tp,
            held));
  }
  if (eager) {
    // Gradients and the step's temporaries are live after the activations are freed: only what they
    // add above the activation-side peak counts.
    double activation_side = 0;
    for (const MemoryTerm& t : m.terms) {
      if (t.label == "activations" || t.label == "recompute_workspace" || t.label == "embedding_logits" ||
          t.label == "peft_fp32_inputs" || t.label == "autocast_cache") {
        activation_side += static_cast<double>(t.bytes);
      }
    }
    for (MemoryTerm& t : m.terms) {
      if (t.label != "gradients" || grads_with_activations) continue;
      const double grads = static_cast<double>(t.bytes);
      const double above = std::max(0.0, grads + step_temporary - activation_side);
      const std::string was = t.formula;
      t.bytes = static_cast<uint64_t>(above + 0.5);
      if (ctx.formulas) {
        t.formula = fmt::format(
            "max(0, gradients {:.4g} B ({}){} - activation side {:.4g} B): eager PyTorch frees "
            "gradients after each step",
            grads, was, step_temporary > 0 ? " + " + step_formula : std::string(), activation_side);
      }
    }
  }
  m.Add("runtime", static_cast<double>(kCudaContextBytes), "CUDA context and kernels (kCudaContextBytes)");
  return r;
}

}  // namespace gpugeek::workload
