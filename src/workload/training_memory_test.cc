// Training memory against published figures (each assertion names its source):
// ZeRO paper Fig. 1, DeepSpeed's estimator code and docs, Korthikanti et al. Fig. 1 / Fig. 7,
// Megatron-LM's measured 7B memory tests, EleutherAI Transformer Math 101, and LoRA / QLoRA.

#include "workload/training_memory.h"

#include <gtest/gtest.h>

#include "common/units.h"
#include "workload/param_count.h"
#include "workload/test_models.h"

namespace gpugeek::workload {
namespace {

using test_models::Gpt;

const std::string kModels = std::string(GPUGEEK_SHARED_DIR) + "/models/";

double Sum(const ModelStates& s) { return s.weights + s.grads + s.optimizer; }

// ZeRO paper (Rajbhandari et al., arXiv:1910.02054, Fig. 1): Ψ = 7.5B, N_d = 64, K = 12:
// 120 GB baseline, 31.4 GB P_os, 16.6 GB P_os+g, 1.9 GB P_os+g+p.
TEST(ModelStatesTest, ZeroPaperFigure1) {
  const StateBytes b = MixedPrecisionStates(Optimizer::kAdamW, false);
  EXPECT_EQ(b.Total(), 16);
  EXPECT_NEAR(Sum(ZeroModelStates(7.5e9, b, 0, 64)) / 1e9, 120.0, 0.05);
  EXPECT_NEAR(Sum(ZeroModelStates(7.5e9, b, 1, 64)) / 1e9, 31.4, 0.05);
  EXPECT_NEAR(Sum(ZeroModelStates(7.5e9, b, 2, 64)) / 1e9, 16.6, 0.05);
  EXPECT_NEAR(Sum(ZeroModelStates(7.5e9, b, 3, 64)) / 1e9, 1.9, 0.05);
  // Same paper, Sec. 3.1: GPT-2 1.5B needs at least 24 GB of model states although its fp16
  // weights are 3 GB.
  EXPECT_NEAR(Sum(ZeroModelStates(1.5e9, b, 0, 1)) / 1e9, 24.0, 1e-9);
}

// EleutherAI Transformer Math 101: AdamW 12 B/param with master weights, 8-bit AdamW 6, SGD with
// momentum 8 (optimizer states incl. the fp32 copy).
TEST(ModelStatesTest, TransformerMathOptimizerBytes) {
  auto opt = [](Optimizer o) {
    StateBytes b = MixedPrecisionStates(o, false);
    return b.master + b.optimizer;
  };
  EXPECT_EQ(opt(Optimizer::kAdamW), 12);
  EXPECT_EQ(opt(Optimizer::kAdamW8bit), 6);
  EXPECT_EQ(opt(Optimizer::kSgdMomentum), 8);
}

// Megatron-LM theoretical_memory_usage.py: 18 B/param, or 6 + 12/DP with the distributed optimizer.
TEST(ModelStatesTest, MegatronDistributedOptimizer) {
  const StateBytes b = MixedPrecisionStates(Optimizer::kAdamW, true);
  EXPECT_EQ(Sum(ZeroModelStates(1e9, b, 0, 8)), 18e9);
  EXPECT_EQ(Sum(ZeroModelStates(1e9, b, 1, 8)), (6 + 12.0 / 8) * 1e9);
}

TEST(ModelStatesTest, OffloadMovesStatesToHost) {
  const StateBytes b = MixedPrecisionStates(Optimizer::kAdamW, false);
  ModelStates s = ZeroModelStates(1e9, b, 2, 4, /*offload_optimizer=*/true);
  EXPECT_EQ(s.weights, 2e9);
  EXPECT_EQ(s.optimizer, 0);
  EXPECT_EQ(s.cpu, (12 + 2) * 1e9 / 4);
  ModelStates p = ZeroModelStates(1e9, b, 3, 4, true, true);
  EXPECT_EQ(Sum(p), 0);
  EXPECT_EQ(p.cpu, 16e9 / 4);
}

// DeepSpeed docs/code-docs/source/memory.rst, t5-3b (2851M params, largest layer 32M) on 1 node x 8
// GPUs, in GiB. The parameter counts come from our counter on t5-3b's fields (d_model 1024, d_ff
// 16384, d_kv 128, 32 heads, 24 layers, ReLU, tied).
TEST(DeepSpeedEstimatorTest, T5ThreeBillionDocTable) {
  auto t5 = ParseModelConfig(R"({"model_type":"t5","d_model":1024,"d_ff":16384,"d_kv":128,"num_heads":32,
      "num_layers":24,"vocab_size":32128,"feed_forward_proj":"relu"})");
  ASSERT_TRUE(t5.ok()) << t5.status();
  // Our counter: 2,851,598,336 and 32,899,072 (the shared embedding, 32128 x 1024), which
  // DeepSpeed prints truncated as "2851M" and "32M". The doc's table was produced from those
  // printed values (its `..._all_cold(total_params=2851e6, largest_layer_params=32e6)` example),
  // so the table is checked with them.
  EXPECT_EQ(CountParameters(*t5).total, 2'851'598'336);
  EXPECT_EQ(LargestTensorElements(*t5), 32'899'072);
  const int64_t p = 2'851'000'000;
  const int64_t largest = 32'000'000;
  auto gib = [](double b) { return b / kGiB; };
  // ZeRO-2 with offload: 5.31 GB GPU, 127.45 GB CPU.
  EXPECT_NEAR(gib(DeepSpeedZero2(p, 8, 1, true).gpu_bytes), 5.31, 0.005);
  EXPECT_NEAR(gib(DeepSpeedZero2(p, 8, 1, true).cpu_bytes), 127.45, 0.005);
  // ZeRO-2 without offload: the doc prints 15.93 (the pre-#5099 formula 4Ψ + 16Ψ/N); the code
  // since DeepSpeed PR #5099 gives 2Ψ + 18Ψ/N = 11.28 GiB (anchors/planner.md §2.1, W9). We follow
  // the code.
  EXPECT_NEAR(gib(DeepSpeedZero2(p, 8, 1, false).gpu_bytes), 11.28, 0.005);
  EXPECT_NEAR(gib(4.0 * p + 16.0 * p / 8), 15.93, 0.005);
  // ZeRO-3: 0.12 / 0.78 / 6.09 GB GPU; with zero_init 71.69 / 63.72 / 1.43 GB CPU.
  EXPECT_NEAR(gib(DeepSpeedZero3(p, largest, 8, 1, true, true, true).gpu_bytes), 0.12, 0.005);
  EXPECT_NEAR(gib(DeepSpeedZero3(p, largest, 8, 1, true, false, true).gpu_bytes), 0.78, 0.005);
  EXPECT_NEAR(gib(DeepSpeedZero3(p, largest, 8, 1, false, false, true).gpu_bytes), 6.09, 0.005);
  EXPECT_NEAR(gib(DeepSpeedZero3(p, largest, 8, 1, true, true, true).cpu_bytes), 71.69, 0.005);
  EXPECT_NEAR(gib(DeepSpeedZero3(p, largest, 8, 1, true, false, true).cpu_bytes), 63.72, 0.005);
  EXPECT_NEAR(gib(DeepSpeedZero3(p, largest, 8, 1, false, false, true).cpu_bytes), 1.43, 0.005);
}

// Korthikanti et al. 2022 (arXiv:2205.05198) Fig. 1 per-GPU GiB, values as stored in
// calculon-ai/calculon calculon/llm/validation.py (anchors/planner.md §2.2): params + optimizer
// 18 B x 12Lh²/(t·p); activations "no recompute" = the TP row at t = 8, "SP + selective" = 34/t;
// interleave factor 1 + (p−1)/(p·v), v = 3, for 175B and 530B.
TEST(ActivationTest, KorthikantiFigure1) {
  struct Row {
    const char* name;
    int64_t h, layers, heads, batch;
    int pp, v;
    double states_gib, none_gib, sp_sel_gib;
  };
  const Row rows[] = {
      {"22B", 6144, 48, 64, 4, 1, 1, 45.56, 59.25, 9.56},
      {"175B", 12288, 96, 96, 1, 8, 3, 45.56, 66.84, 12.35},
      {"530B", 20480, 105, 128, 1, 35, 3, 31.64, 114.02, 23.08},
      {"1T", 25600, 128, 160, 1, 64, 1, 32.96, 131.25, 26.56},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const ModelConfig c = Gpt(r.h, r.layers, r.heads);
    const double states = 18.0 * 12 * r.layers * r.h * r.h / (8 * r.pp);
    EXPECT_NEAR(states / kGiB, r.states_gib, 0.01);
    // In-flight layers: L/p layers x p micro-batches (m >= p), interleaved.
    const double layers = LayersOfActivationsInFlight(r.layers, r.pp, 1000, r.v);
    ActivationOptions none{2048, r.batch, 8, false, Recompute::kNone, /*flash_attention=*/false, true};
    ActivationOptions sp_sel{2048, r.batch, 8, true, Recompute::kSelective, false, true};
    EXPECT_NEAR(ActivationBytesPerLayer(c, none) * layers / kGiB, r.none_gib, 0.01);
    EXPECT_NEAR(ActivationBytesPerLayer(c, sp_sel) * layers / kGiB, r.sp_sel_gib, 0.01);
  }
}

// Korthikanti et al. Fig. 7, 22B: activation memory relative to no recompute: sequence parallel
// 66.84 %, selective 49.42 %, both 16.18 %, full 7.64 % (the paper rounds its bars; ±0.5 pt).
TEST(ActivationTest, KorthikantiFigure7Ratios) {
  const ModelConfig c = Gpt(6144, 48, 64);
  auto act = [&](bool sp, Recompute r) {
    return ActivationBytesPerLayer(c, ActivationOptions{2048, 4, 8, sp, r, false, true});
  };
  const double none = act(false, Recompute::kNone);
  EXPECT_NEAR(100 * act(true, Recompute::kNone) / none, 66.84, 0.5);
  EXPECT_NEAR(100 * act(false, Recompute::kSelective) / none, 49.42, 0.5);
  EXPECT_NEAR(100 * act(true, Recompute::kSelective) / none, 16.18, 0.5);
  EXPECT_NEAR(100 * act(false, Recompute::kFull) / none, 7.64, 0.5);
  // Sec. 4.1: the t = 1 row is sbh(34 + 5as/h).
  const double s = 2048, b = 1, h = 6144, a = 64;
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(c, ActivationOptions{2048, 1, 1, false, Recompute::kNone, false, true}),
                   s * b * h * (34 + 5 * a * s / h));
}

// The GPT-style 7B of Megatron-LM's functional memory tests (anchors/planner.md §3.1 T1 / T2):
// L32 h4096 a32 with 8 query groups, GELU ffn 4h, vocab 131,073 (padded by Megatron to a multiple
// of 128 x TP), untied, learned positions 8192, biases, bf16, distributed optimizer, TE attention.
ModelConfig Megatron7b(int tp) {
  ModelConfig c = Gpt(4096, 32, 32);
  c.num_kv_heads = 8;
  c.vocab_size = (131073 + 128 * tp - 1) / (128 * tp) * (128 * tp);
  c.learned_positions = 8192;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  return c;
}

// T1: seq 8192, mbs 2, gbs 8, TP4 PP1 DP2, no recompute, 8x A100: mem-allocated 20,634,103,808 B
// (model states) and mem-max-allocated 58,188,115,968 B (NVIDIA/Megatron-LM
// tests/functional_tests/test_cases/gpt/gpt3_7b_tp4_pp1_memory_speed/golden_values_dev_dgx_a100.json).
// Allocator figures exclude the CUDA context, so the "runtime" term is left out. Within 10 %.
TEST(TrainingMemoryTest, MegatronMeasured7bT1) {
  TrainingOptions o;
  o.layout = ParallelLayout{4, 1, 2, 1, 1, false};
  o.fp32_grads = true;
  o.zero_stage = 1;
  o.seq = 8192;
  o.micro_batch = 2;
  o.micro_batches = 2;     // gbs 8 / (mbs 2 x DP 2)
  o.dropout_masks = true;  // Megatron's defaults: hidden_dropout = attention_dropout = 0.1
  auto m = EstimateTrainingMemory(Megatron7b(4), o);
  ASSERT_TRUE(m.ok()) << m.status();
  const double states = m->gpu.Bytes("weights") + m->gpu.Bytes("gradients") + m->gpu.Bytes("optimizer_states");
  EXPECT_NEAR(states, 20'634'103'808.0, 0.10 * 20'634'103'808.0);
  const double peak = m->gpu.Total() - m->gpu.Bytes("runtime");
  EXPECT_NEAR(peak, 58'188'115'968.0, 0.10 * 58'188'115'968.0);
}

// T2: mbs 1, TP1 PP4 with one layer per virtual stage (v = 8), DP2, gbs 8 -> 4 micro-batches:
// 24,510,808,064 B steady, 60,489,064,448 B peak (gpt3_7b_tp1_pp4_memory_speed). Within 10 %.
TEST(TrainingMemoryTest, MegatronMeasured7bT2) {
  TrainingOptions o;
  o.layout = ParallelLayout{1, 4, 2, 1, 8, false};
  o.fp32_grads = true;
  o.zero_stage = 1;
  o.seq = 8192;
  o.micro_batch = 1;
  o.micro_batches = 4;  // gbs 8 / (mbs 1 x DP 2)
  o.dropout_masks = true;
  auto m = EstimateTrainingMemory(Megatron7b(1), o);
  ASSERT_TRUE(m.ok()) << m.status();
  const double states = m->gpu.Bytes("weights") + m->gpu.Bytes("gradients") + m->gpu.Bytes("optimizer_states");
  EXPECT_NEAR(states, 24'510'808'064.0, 0.10 * 24'510'808'064.0);
  const double peak = m->gpu.Total() - m->gpu.Bytes("runtime");
  EXPECT_NEAR(peak, 60'489'064'448.0, 0.10 * 60'489'064'448.0);
}

ModelConfig Llama70b() {
  auto c = LoadModelConfig(kModels + "llama/Llama-2-70b-hf.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// LoRA trainable parameters, hand-computed: r·(d_in + d_out) per adapted matrix.
TEST(LoraTest, TrainableParams) {
  // Llama-2-70B, r = 16 on q and v: q 8192 -> 8192, v 8192 -> 1024, 80 layers.
  auto qv = CountLoraParams(Llama70b(), LoraConfig{16, {"q_proj", "v_proj"}});
  ASSERT_TRUE(qv.ok());
  EXPECT_EQ(qv->trainable, 80 * 16 * ((8192 + 8192) + (8192 + 1024)));
  EXPECT_EQ(qv->adapted_matrices, 160);
  // all-linear adds k, o, gate, up, down.
  auto all = CountLoraParams(Llama70b(), LoraConfig{64, {"all-linear"}});
  ASSERT_TRUE(all.ok());
  const int64_t per_layer = (8192 + 8192) + 2 * (8192 + 1024) + (8192 + 8192) + 3 * (8192 + 28672);
  EXPECT_EQ(all->trainable, 80 * 64 * per_layer);
  auto bad = CountLoraParams(Llama70b(), LoraConfig{8, {"c_attn"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("c_attn"), std::string::npos);
  // Hu et al. Sec. 4.2: GPT-3 175B with r = 4 on q and v -> 35 MB checkpoint in fp16 (4.7M params
  // x 96 layers x 2 matrices x 4 x (12288 + 12288) = 18.9M params = 37.7 MB: "35 MB" in MiB).
  ModelConfig gpt3 = Gpt(12288, 96, 96);
  auto gpt3_lora = CountLoraParams(gpt3, LoraConfig{4, {"q_proj", "v_proj"}});
  ASSERT_TRUE(gpt3_lora.ok());
  EXPECT_NEAR(2.0 * gpt3_lora->trainable / kMiB, 36, 1.0);
}

// The usual example (issue 3): Llama-2-70B at sequence 4096 on A100-80GB.
TEST(TrainingMemoryTest, Llama70bLoraVsFull) {
  const ModelConfig llama = Llama70b();
  TrainingOptions lora;
  lora.mode = FineTune::kLora;
  lora.lora = LoraConfig{16, {"all-linear"}};
  lora.layout = ParallelLayout{4, 1, 1, 1, 1, true};
  lora.seq = 4096;
  lora.recompute = Recompute::kFull;
  auto l = EstimateTrainingMemory(llama, lora);
  ASSERT_TRUE(l.ok()) << l.status();
  // Frozen bf16 base split four ways: 2 B x 68.98e9 / 4 = 34.5 GB; fits 80 GiB with room.
  EXPECT_NEAR(l->gpu.Bytes("weights") / 1e9, 2 * 68.976648192 / 4, 0.1);
  EXPECT_LT(l->gpu.Total(), 0.9 * 80 * kGiB);

  // QLoRA fits a single 80 GiB GPU (QLoRA paper: 65B on one 48 GB GPU).
  TrainingOptions qlora = lora;
  qlora.mode = FineTune::kQlora;
  qlora.layout = ParallelLayout{};
  auto q = EstimateTrainingMemory(llama, qlora);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_LT(q->gpu.Total(), 0.9 * 80 * kGiB);
  EXPECT_NEAR(q->gpu.Bytes("weights") / 1e9, 36.0, 1.5);

  // Full fine-tuning with AdamW on 4 GPUs, even with ZeRO-3: 16 B x 69e9 / 4 = 276 GB per GPU.
  TrainingOptions full;
  full.layout = ParallelLayout{1, 1, 4, 1, 1, false};
  full.zero_stage = 3;
  full.seq = 4096;
  full.recompute = Recompute::kFull;
  auto f = EstimateTrainingMemory(llama, full);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT(f->gpu.Total(), 3 * 80 * kGiB);
}

TEST(TrainingMemoryTest, RejectsBadOptions) {
  TrainingOptions o;
  o.zero_stage = 4;
  EXPECT_FALSE(EstimateTrainingMemory(Llama70b(), o).ok());
  o.zero_stage = 2;
  o.offload_params = true;
  EXPECT_FALSE(EstimateTrainingMemory(Llama70b(), o).ok());
  o.offload_params = false;
  o.layout.ep = 3;
  EXPECT_FALSE(EstimateTrainingMemory(Llama70b(), o).ok());
}

TEST(TrainingMemoryTest, ExpertParallelShardsExperts) {
  auto mixtral = LoadModelConfig(kModels + "mistral/Mixtral-8x7B-v0.1.json");
  ASSERT_TRUE(mixtral.ok());
  TrainingOptions o;
  o.layout = ParallelLayout{1, 1, 8, 1, 1, false};
  auto ep1 = EstimateTrainingMemory(*mixtral, o);
  o.layout.ep = 8;
  auto ep8 = EstimateTrainingMemory(*mixtral, o);
  ASSERT_TRUE(ep1.ok() && ep8.ok());
  // Routed experts: 32 layers x 8 x 3 x 4096 x 14336 = 45.1e9 params; EP 8 keeps one eighth.
  const double experts = 32.0 * 8 * 3 * 4096 * 14336;
  EXPECT_NEAR(ep1->params_on_gpu - ep8->params_on_gpu, experts * 7 / 8, 1);
}

// Context parallelism (Megatron-LM --context-parallel-size): a CP rank holds seq / cp tokens of every
// activation and a replica of the weights, so its activations are those of a cp-times shorter sequence,
// ZeRO-1 shards over DP x CP, and two K/V chunks of the ring are in flight.
TEST(TrainingMemoryTest, ContextParallelSplitsActivationsAndShardsStatesOverDpTimesCp) {
  const ModelConfig llama = Llama70b();
  TrainingOptions o;
  o.layout = ParallelLayout{8, 4, 2, 1, 1, true};
  o.layout.cp = 4;
  o.zero_stage = 1;
  o.seq = 32768;
  o.micro_batch = 1;
  o.micro_batches = 8;
  o.recompute = Recompute::kSelective;
  auto with_cp = EstimateTrainingMemory(llama, o);
  ASSERT_TRUE(with_cp.ok()) << with_cp.status();
  TrainingOptions same = o;  // the activations of an 8,192-token sequence, states over DP 8
  same.layout.cp = 1;
  same.layout.dp = 8;
  same.seq = 8192;
  auto without = EstimateTrainingMemory(llama, same);
  ASSERT_TRUE(without.ok());
  for (const char* term : {"weights", "gradients", "optimizer_states", "activations", "embedding_logits"}) {
    EXPECT_EQ(with_cp->gpu.Bytes(term), without->gpu.Bytes(term)) << term;
  }
  // Two chunks of K and V: 2 x 2 x 8,192 tokens x 1 KV head per TP rank (8 / 8) x 128 x 2 B = 8 MiB.
  EXPECT_EQ(with_cp->gpu.Bytes("cp_kv_buffers"), 2u * 2 * 8192 * 1 * 128 * 2);
  EXPECT_EQ(without->gpu.Bytes("cp_kv_buffers"), 0u);
}

}  // namespace
}  // namespace gpugeek::workload
