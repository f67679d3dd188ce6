#pragma once
// Training and fine-tuning memory per GPU: model states (weights, gradients, optimizer) under ZeRO
// and Megatron's distributed optimizer, activations per Korthikanti et al. 2022, and LoRA / QLoRA.
//
// Model states (Rajbhandari et al. 2020, arXiv:1910.02054 Sec. 5, Fig. 1), Ψ parameters on the GPU
// after tensor / pipeline / expert splitting, N_d data-parallel ranks, bytes per parameter w
// (weights), g (gradients), m (fp32 master copy), o (optimizer moments):
//   stage 0: (w + g + m + o)Ψ;  stage 1: (w + g)Ψ + (m + o)Ψ/N_d;
//   stage 2: wΨ + (g + m + o)Ψ/N_d;  stage 3: (w + g + m + o)Ψ/N_d.
// Megatron's distributed optimizer is stage 1 with g = 4 (fp32 main grads): 6 + 12/DP bytes
// (Megatron-LM `theoretical_memory_usage.py`). Routed-expert states shard over the expert-data-
// parallel group (DP / EP), not DP (Megatron-LM#4050).
//
// Activations (Korthikanti et al. 2022, arXiv:2205.05198 Table 2), bytes per layer, s sequence,
// b micro-batch, h hidden, a heads, t TP:
//   none: sbh(10 + 24/t + 5as/(ht));  selective recompute: sbh(10 + 24/t);
//   + sequence parallel: the 10 is divided by t too;  full recompute: 2sbh (layer input).
// Generalised here to the model's shapes: the 24 = Q 2 + K 2 + V 2 + projection input 2 (from head
// counts and head_dim, so GQA shrinks K and V) + MLP 16 (2 + 2 bytes x I/h for a GELU MLP; 8 x I/h
// for a gated MLP: gate, up, activation and down input; x experts_per_token for MoE). For a GPT
// layer (I = 4h, MHA) this is exactly the paper's 34. FlashAttention drops the 5as/(ht) term
// (Dao et al. 2022, arXiv:2205.14135). Pipeline: the first stage holds L/p layers for min(p, m)
// micro-batches (1F1B), times 1 + (p − 1)/(p·v) when interleaved with v chunks.
//
// Recipes. The precision sets the bytes per parameter (RecipeStates); the framework sets what is live
// at the peak:
//  - Megatron-LM and DeepSpeed (Framework::kAuto, kMegatron, kDeepSpeed) keep gradients in buffers allocated
//    once, so weights, gradients, optimizer states and the activations are live together, and compute
//    the loss from fp32 logits (4 B per logit).
//  - Hugging Face Transformers / PEFT / torchtune on eager PyTorch (Framework::kHuggingFace) free the
//    gradients after each step (`zero_grad(set_to_none=True)`), so the peak is
//      weights + optimizer states + max(autocast cache + activations + loss + PEFT inputs,
//                                        gradients + optimizer-step temporaries);
//    its loss (`ForCausalLMLoss`) holds bf16 logits 2 + their fp32 copy 4 + log-softmax 4 + its
//    gradient 4 = 14 B per logit; PEFT keeps LoRA adapters in fp32 and casts each adapted layer's
//    input to fp32 (4 B per input feature per token, beside the bf16 activations); torch.autocast
//    caches a bf16 copy of every weight it casts until the step (2 B/param); torch.optim.AdamW's
//    foreach step makes one moment-sized temporary (PyTorch's default on CUDA).
//    Calibrated on one H200 against torch.cuda.max_memory_allocated, 0.5B-8B models, full and LoRA,
//    with and without recompute: 12 rows within 10% (docs/device-check.md, training_memory_test.cc).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "workload/dtype.h"
#include "workload/lora.h"
#include "workload/memory_breakdown.h"
#include "workload/model_config.h"
#include "workload/sharding.h"

namespace gpugeek::workload {

enum class Optimizer { kAdamW, kAdamW8bit, kSgdMomentum, kAdafactor };
enum class Recompute { kNone, kSelective, kFull };
// kMixed: bf16 weights and gradients, an fp32 master copy, fp32 moments (Megatron --bf16, DeepSpeed
// bf16). kPureBf16: bf16 weights, gradients and moments, no master (torchtune's default). kFp32:
// everything fp32. kAutocast: fp32 weights, gradients and moments under torch.autocast(bf16) (the
// Hugging Face Trainer's `bf16=True`).
enum class Precision { kMixed, kPureBf16, kFp32, kAutocast };
// kAuto: Megatron-LM or DeepSpeed, whichever the layout needs (pipeline parallelism: Megatron-LM;
// ZeRO-2/3: DeepSpeed); both have the same memory semantics.
enum class Framework { kAuto, kMegatron, kDeepSpeed, kHuggingFace };
// ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840): the fp32 master, moments (and at ZeRO >= 2 the fp32
// gradient partition) in host memory, stepped by the CPU; kOptimizerAndParams (ZeRO-Infinity,
// Rajbhandari et al. 2021, arXiv:2104.07857) also the bf16 weights, ZeRO-3 only. DeepSpeed's.
enum class Offload { kNone, kOptimizer, kOptimizerAndParams };
std::string_view OptimizerName(Optimizer o);
std::string_view RecomputeName(Recompute r);
std::string_view PrecisionName(Precision p);
std::string_view FrameworkName(Framework f);
std::string_view OffloadName(Offload o);  // "none", "optimizer", "optimizer+params"
// By name ("adamw", "adamw-8bit", "sgd-momentum", "adafactor"; "none", "selective", "full";
// "mixed", "bf16", "fp32", "autocast"; "auto", "megatron", "deepspeed", "hf"). InvalidArgument lists the names.
absl::StatusOr<Optimizer> ParseOptimizer(std::string_view name);
absl::StatusOr<Recompute> ParseRecompute(std::string_view name);
absl::StatusOr<Precision> ParsePrecision(std::string_view name);
absl::StatusOr<Framework> ParseFramework(std::string_view name);
absl::StatusOr<Offload> ParseOffload(std::string_view name);

// Bytes per parameter of each model-state kind (see the header comment).
struct StateBytes {
  double weight = 2;
  double grad = 2;
  double master = 4;
  double optimizer = 8;
  double Total() const { return weight + grad + master + optimizer; }
};
// Mixed-precision states for `optimizer` (EleutherAI Transformer Math 101: AdamW 12 B/param
// including the fp32 master, 8-bit AdamW 6, SGD with momentum 8). `fp32_grads`: Megatron keeps
// fp32 main gradients (g = 4) instead of bf16 ones (g = 2, the ZeRO paper's convention).
StateBytes MixedPrecisionStates(Optimizer optimizer, bool fp32_grads);
// Memory levers of the eager recipes (torchtune's memory optimizations, bitsandbytes), each off by default.
// Their terms are described at EstimateTrainingMemory.
struct RecipeFeatures {
  // bitsandbytes paged optimizers (`PagedAdamW8bit`, `paged_adamw_8bit`): the optimizer moments live in
  // CUDA unified memory (cudaMallocManaged, outside PyTorch's allocator) that the driver pages to host
  // memory under pressure, so they are host-backed rather than part of the GPU peak (bitsandbytes docs,
  // "Paged optimizers"; `bitsandbytes/functional.py` get_paged).
  bool paged_optimizer = false;
  // torchtune `optimizer_in_bwd: True`: each parameter is stepped and its gradient freed by a hook as
  // soon as it is accumulated, so one gradient (the largest tensor's) is live, beside the activations.
  bool optimizer_in_backward = false;
  // torchtune `CEWithChunkedOutputLoss` (8 chunks): the logits are upcast to fp32 one chunk at a time.
  bool chunked_loss = false;
  // torchtune `enable_activation_offloading: True` (OffloadActivations): saved activations go to host
  // memory on a side stream; about two layers' worth stay on the GPU (the one being copied out and the
  // one brought back for the backward).
  bool activation_offload = false;
  // torch.optim.AdamW(fused=True) (torchtune's AdamW configs): one kernel per tensor, no moment-sized
  // temporary as the default foreach step makes.
  bool fused_optimizer = false;
  // torch.compile: modelled only in the chunked loss (3 B per logit instead of 7: the fused kernel keeps the
  // bf16 logits); its other fusions, which save part of the activations, are not.
  bool compile = false;
  // The data-parallel gradient reduce runs once after the last micro-batch's backward instead of behind it:
  // Megatron-LM's local DDP of 2021 (the SC'21 runs: `allreduce_gradients()` after the pipeline flush),
  // Megatron-Core without --overlap-grad-reduce, DeepSpeed with overlap_comm false. Off (the default), the
  // reduce overlaps that backward, and the launch says so (--overlap-grad-reduce, with the distributed
  // optimizer --overlap-param-gather; DeepSpeed overlap_comm; PyTorch DDP's gradient buckets).
  bool serial_grad_reduce = false;
  // Attention without FlashAttention (Dao et al. 2022, arXiv:2205.14135): each head's s x s scores go through
  // HBM (flops.h: 13 B per score forward, 17 backward) and, without recompute, stay in memory (Korthikanti et
  // al. 2022 Table 2's 5·a·s²·b term). Megatron-LM before FlashAttention (the SC'21 runs: a fused
  // scale-mask-softmax kernel over materialised scores); Megatron-Core `--attention-backend unfused`.
  bool unfused_attention = false;
};
// "paged-optimizer;optimizer-in-backward;fused-optimizer;chunked-loss;activation-offload;compile;serial-grad-reduce;
// unfused-attention"
// (any subset, any order, ';'-separated; empty: none). InvalidArgument names an unknown feature and lists the known
// ones.
absl::StatusOr<RecipeFeatures> ParseRecipeFeatures(std::string_view list);
std::string RecipeFeaturesName(const RecipeFeatures& f);  // the same list; "" when none

// How a training job runs: the framework, its precision and optimizer, and the activation recompute
// (unset: the planner chooses none or full, whichever the plan needs).
struct Recipe {
  Framework framework = Framework::kAuto;
  Precision precision = Precision::kMixed;
  Optimizer optimizer = Optimizer::kAdamW;
  std::optional<Recompute> recompute;
  // Unset: the planner may offload (DeepSpeed frameworks, ZeRO >= 1) when that is the fastest plan
  // that fits; set: exactly this. Presets leave it at kNone (the host memory it needs is not in the
  // catalog: the plan reports it, `cpu_offload_bytes` per GPU).
  std::optional<Offload> offload = Offload::kNone;
  RecipeFeatures features;
  // The highest ZeRO stage the tool's version has (below the framework's own: Megatron-LM before its
  // distributed optimizer shards nothing, 0).
  int max_zero_stage = 3;
  // Megatron's sequence parallelism with TP > 1 (Korthikanti et al. 2022, arXiv:2205.05198: the LayerNorm and
  // dropout activations split over the TP ranks); off for software older than it.
  bool sequence_parallel = true;
};
// The defaults of the tools users name (`gpugeek plan --recipe NAME`):
//   auto (the default), megatron, deepspeed: mixed precision (bf16 with an fp32 master), AdamW, recompute chosen;
//   hf: Hugging Face Trainer with `bf16=True` (autocast over fp32 weights), AdamW (adamw_torch);
//   peft: the same with LoRA adapters (PEFT); recompute chosen;
//   torchtune: its full fine-tune configs: bf16 weights and AdamW states (`dtype: bf16`), activation
//   checkpointing on (`enable_activation_checkpointing: True`);
//   megatron-2021: Megatron-LM as Narayanan et al. ran it for SC'21 (arXiv:2104.04473, Sec. 5): no distributed
//   optimizer (ZeRO 0, 18 B/param of states), full activation recomputation (`--checkpoint-activations`),
//   attention without FlashAttention (unfused-attention) and the data-parallel all-reduce after the pipeline
//   flush (its local DDP's `allreduce_gradients()`: serial-grad-reduce); no sequence parallelism (2022).
// InvalidArgument for any other name, listing these.
absl::StatusOr<Recipe> RecipePreset(std::string_view name);
// The highest ZeRO stage the recipe's tool runs: DeepSpeed (and auto) 3, Megatron-LM 1 (its distributed
// optimizer), the Hugging Face Trainer on DDP 0; never above `max_zero_stage` (megatron-2021: 0).
int RecipeMaxZeroStage(const Recipe& r);

// The states of any precision: moments are fp32 except under kPureBf16 (bf16); 8-bit AdamW keeps
// 1 + 1 B whatever the precision; Adafactor (no momentum, factored second moment: O(rows + cols)
// per matrix, Shazeer & Stern 2018, arXiv:1804.04235) is counted as 0 B/param.
StateBytes RecipeStates(Optimizer optimizer, Precision precision, bool fp32_grads);

struct ModelStates {
  double weights = 0, grads = 0, optimizer = 0;  // GPU bytes (optimizer includes the master copy)
  double cpu = 0;                                // bytes moved to host memory by offload
};
// The ZeRO formulas above for `params` on this GPU. Offload (ZeRO-Offload, arXiv:2101.06840):
// `offload_optimizer` moves master + moments (and at stage >= 2 the fp32 gradient partition) to the
// CPU; `offload_params` (ZeRO-Infinity, stage 3 only) moves the weights too.
ModelStates ZeroModelStates(double params, const StateBytes& b, int zero_stage, int dp, bool offload_optimizer = false,
                            bool offload_params = false);

// DeepSpeed's own estimators, as its code computes them (deepspeed/runtime/zero/stage_1_and_2.py
// `estimate_zero2_model_states_mem_needs` since PR #5099; stage3.py
// `estimate_zero3_model_states_mem_needs`), additional_buffer_factor 1.5.
struct DeepSpeedEstimate {
  double gpu_bytes = 0;
  double cpu_bytes = 0;
};
DeepSpeedEstimate DeepSpeedZero2(int64_t total_params, int gpus_per_node, int nodes, bool cpu_offload);
DeepSpeedEstimate DeepSpeedZero3(int64_t total_params, int64_t largest_layer_params, int gpus_per_node, int nodes,
                                 bool cpu_offload, bool cpu_offload_params, bool zero_init);

struct ActivationOptions {
  int64_t seq = 2048;
  int64_t micro_batch = 1;
  int tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  bool flash_attention = true;
  bool dropout_masks = true;  // 1-byte masks after attention and MLP, as the paper assumes
};
// Activation bytes of one transformer layer for one micro-batch (the generalised Table 2 rows).
double ActivationBytesPerLayer(const ModelConfig& config, const ActivationOptions& options);

// The pipeline multiplier: layers_on_stage x min(pp, micro_batches) x interleave factor, in layers'
// worth of activations held by the first (busiest) stage.
double LayersOfActivationsInFlight(int64_t layers, int pp, int64_t micro_batches, int virtual_stages);

enum class FineTune { kFull, kLora, kQlora };

struct TrainingOptions {
  ParallelLayout layout;
  FineTune mode = FineTune::kFull;
  LoraConfig lora;  // kLora / kQlora
  Optimizer optimizer = Optimizer::kAdamW;
  Precision precision = Precision::kMixed;
  Framework framework = Framework::kAuto;
  bool fp32_grads = false;  // Megatron main grads
  int zero_stage = 0;       // 0-3; Megatron distributed optimizer = 1
  bool offload_optimizer = false;
  bool offload_params = false;
  int64_t seq = 4096;
  int64_t micro_batch = 1;
  int64_t micro_batches = 1;  // per pipeline per iteration (gradient accumulation steps)
  Recompute recompute = Recompute::kNone;
  bool dropout_masks = true;
  RecipeFeatures features;
};

// Per-GPU training memory (heaviest pipeline stage). Terms: "weights", "gradients",
// "optimizer_states" (ZeRO / offload applied; for LoRA: frozen base weights, adapter grads and
// adapter states), "activations" (per layer x layers in flight), "recompute_workspace" (one layer
// without recompute, live during its backward under full recompute), "embedding_logits" (input
// embedding output s·b·h·2 per micro-batch in flight on the first stage; fp32 logits 4·s·b·V/t on
// the last; 14 B per logit under kHuggingFace), "qlora_dequant" (one bf16 copy of the largest base
// projection), "zero3_gather" (ZeRO-3: two gathered 16-bit copies of the largest layer or tensor),
// "autocast_cache" and "peft_fp32_inputs" (kHuggingFace, see Recipes), "runtime"
// (kCudaContextBytes). Under kHuggingFace "gradients" holds only what the gradients and step
// temporaries add above the activation peak (they are not live together). The CPU bytes of offload are in
// `cpu_offload_bytes`.
// RecipeFeatures (torchtune's memory optimizations): paged_optimizer moves the optimizer moments to
// `cpu_offload_bytes` (host-backed unified memory); optimizer_in_backward makes "gradients" one gradient of
// the largest tensor, live with the activations, and drops the step temporary; chunked_loss makes the eager
// loss 7 B per logit instead of 14 (3 when compiled); activation_offload keeps two layers of activations (and PEFT
// inputs) on the GPU; under kPureBf16 LoRA adapters are bf16 (torchtune) and PEFT's fp32 input casts are not counted.
struct TrainingMemory {
  MemoryBreakdown gpu;
  double cpu_offload_bytes = 0;
  double params_on_gpu = 0;     // before ZeRO-3 sharding
  double trainable_params = 0;  // whole model
};
// Precomputed inputs for repeated estimates of one model (the planner). Each is optional; a
// given shard must be ShardForLayout(config, *inventory, options.layout).
struct MemoryContext {
  const std::vector<ParamGroup>* inventory = nullptr;
  const GpuShard* shard = nullptr;
  const LoraParams* lora = nullptr;
  bool formulas = true;  // false: leave MemoryTerm::formula empty (the planner's fast path)
};
absl::StatusOr<TrainingMemory> EstimateTrainingMemory(const ModelConfig& config, const TrainingOptions& options,
                                                      const MemoryContext& context = {});

}  // namespace gpugeek::workload
