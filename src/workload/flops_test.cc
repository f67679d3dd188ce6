// FLOPs and step time: Megatron's FLOP formula, 6N / 2N, and Megatron-LM SC'21 Table 1 throughput.

#include "workload/flops.h"

#include <gtest/gtest.h>

#include "workload/param_count.h"
#include "workload/test_models.h"

namespace gpugeek::workload {
namespace {

using test_models::MegatronGpt;

const std::string kModels = std::string(GPUGEEK_SHARED_DIR) + "/models/";

// Narayanan et al. SC'21 (arXiv:2104.04473) Sec. 5.1: F = 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h))
// per iteration with full recomputation; per token, F / (B·s). Our count adds nothing for norms
// and biases here (the GPT above has none).
TEST(FlopsTest, MegatronFormulaWithRecompute) {
  const ModelConfig c = MegatronGpt(12288, 96, 96);
  const double s = 2048, h = 12288, L = 96, V = 51200;
  const double megatron = 96 * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)) / s;
  EXPECT_NEAR(ComputeFlopsPerToken(c, 2048, Recompute::kFull).hardware / megatron, 1.0, 1e-9);
  // Without recompute: 72 instead of 96 on the layer terms.
  const double no_recompute = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h)) / s;
  EXPECT_NEAR(ComputeFlopsPerToken(c, 2048, Recompute::kNone).training / no_recompute, 1.0, 1e-9);
}

// Kaplan et al. 2020: training ≈ 6N per token, inference ≈ 2N, N the non-embedding parameters,
// plus the attention term. Llama-3.1-8B at s = 1: attention negligible; the head is in N.
TEST(FlopsTest, SixNAndTwoN) {
  auto llama = LoadModelConfig(kModels + "llama/Meta-Llama-3.1-8B.json");
  ASSERT_TRUE(llama.ok());
  const ParamCounts n = CountParameters(*llama);
  const FlopsPerToken f = ComputeFlopsPerToken(*llama, 1, Recompute::kNone);
  const double matmul = static_cast<double>(n.total - n.embedding);  // norms are < 0.01 %
  EXPECT_NEAR(f.forward / (2 * matmul), 1.0, 1e-4);
  EXPECT_NEAR(f.training / (6 * matmul), 1.0, 1e-4);
  // MoE: only active experts count. Mixtral-8x7B active 12.88B (INDEX.md).
  auto mixtral = LoadModelConfig(kModels + "mistral/Mixtral-8x7B-v0.1.json");
  ASSERT_TRUE(mixtral.ok());
  const ParamCounts mn = CountParameters(*mixtral);
  EXPECT_NEAR(ComputeFlopsPerToken(*mixtral, 1, Recompute::kNone).forward / (2.0 * (mn.active - mn.embedding)), 1.0,
              1e-3);
}

TEST(FlopsTest, DomainsFromCatalog) {
  const hw::GpuCatalog& cat = hw::GpuCatalog::Builtin();
  EXPECT_EQ(NvlinkDomainSize(*cat.Resolve("A100-SXM-80GB")), 8);
  EXPECT_EQ(NvlinkDomainSize(*cat.Resolve("H100-SXM-80GB")), 8);
  EXPECT_EQ(NvlinkDomainSize(*cat.Resolve("MI300X")), 8);
  EXPECT_EQ(NvlinkDomainSize(*cat.Resolve("H100-NVL-94GB")), 2);  // bridged PCIe pair
  EXPECT_EQ(NvlinkDomainSize(*cat.Resolve("L40S")), 1);
  EXPECT_EQ(NvlinkDomainSize(*cat.Resolve("RTX-4090")), 1);
  EXPECT_DOUBLE_EQ(IntraDomainBytesPerSecond(*cat.Resolve("A100-SXM-80GB")), 300e9);
  EXPECT_DOUBLE_EQ(PeakFlops(*cat.Resolve("A100-SXM-80GB")), 312e12);
}

struct Table1Row {
  double params_b;
  int64_t heads, hidden, layers;
  int tp, pp, gpus;
  int64_t batch;
  double tflops;
};
// Narayanan et al. SC'21 Table 1 (anchors/planner.md §4.1), A100, seq 2048, full recompute.
const Table1Row kTable1[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 137},          {3.6, 32, 3072, 30, 2, 1, 64, 512, 138},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 142},         {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138},       {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148},    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163}, {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163},
};

// The time model at the paper's own layouts (micro-batch 1, full recompute, the unfused attention of
// Megatron-LM in 2021) predicts each row's TFLOP/s per GPU (Megatron's hardware-FLOP count) within 6 %.
TEST(StepTimeTest, MegatronTable1AtPaperLayouts) {
  const hw::GpuModel& a100 = *hw::GpuCatalog::Builtin().Resolve("A100-SXM-80GB");
  for (const Table1Row& r : kTable1) {
    SCOPED_TRACE(r.params_b);
    const ModelConfig c = MegatronGpt(r.hidden, r.layers, r.heads);
    TrainingOptions o;
    o.layout = ParallelLayout{r.tp, r.pp, r.gpus / (r.tp * r.pp), 1, 1, false};
    o.seq = 2048;
    o.micro_batch = 1;
    o.recompute = Recompute::kFull;
    o.zero_stage = 0;
    o.fp32_grads = true;  // Megatron-LM all-reduced its fp32 main gradients
    o.features.unfused_attention = true;
    const StepTime t = EstimateStepTime(c, o, r.batch, a100);
    EXPECT_NEAR(t.hardware_flops_per_gpu / 1e12, r.tflops, 0.06 * r.tflops);
    // Parameters: the paper's P = 12lh²(1 + 13/(12h) + (V + s)/(12lh)) exactly (within 0.01 %,
    // LayerNorm placement aside), and its rounded "Params (B)" column (1.65 printed as 1.7) within 3 %.
    const double l = static_cast<double>(r.layers), h = static_cast<double>(r.hidden);
    const double paper = 12 * l * h * h * (1 + 13 / (12 * h) + (51200 + 2048) / (12 * l * h));
    EXPECT_NEAR(CountParameters(c).total / paper, 1.0, 1e-4);
    EXPECT_NEAR(CountParameters(c).total / 1e9, r.params_b, 0.03 * r.params_b);
  }
}

// MosaicML llm-foundry, scripts/train/benchmarking/README.md, table "A100 80GB with 1600 Gbps node-node
// interconnect (RoCE)" (8 x 200 Gb/s per node, as DGX A100): MPT models (GPT with ALiBi, no biases, vocab 50,368)
// trained with PyTorch FSDP FULL_SHARD (ZeRO-3, no tensor parallelism) and FlashAttention at seq 2048; the
// "Throughput (T/s/GPU)" column. A second software generation beside SC'21's: the same efficiency curve
// predicts each row within 11 %.
TEST(StepTimeTest, MosaicMptFsdpOnA100) {
  const hw::GpuModel& a100 = *hw::GpuCatalog::Builtin().Resolve("A100-SXM-80GB");
  struct Row {
    const char* model;
    int64_t hidden, layers, heads;
    int gpus;
    int64_t micro_batch, batch;
    bool checkpointing;
    double tokens_per_second_per_gpu;
  };
  const Row rows[] = {
      {"mpt-70b", 8192, 80, 64, 64, 8, 2048, true, 410},  {"mpt-70b", 8192, 80, 64, 32, 2, 1024, true, 373},
      {"mpt-30b", 7168, 48, 56, 8, 3, 504, true, 916},    {"mpt-13b", 5120, 40, 40, 8, 2, 48, false, 2262},
      {"mpt-7b", 4096, 32, 32, 8, 6, 96, false, 4641},    {"mpt-3b", 2560, 32, 20, 8, 10, 160, false, 10811},
      {"mpt-1b", 2048, 24, 16, 8, 14, 448, false, 20513}, {"mpt-760m", 1536, 24, 12, 8, 24, 384, false, 32434},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << r.model << " on " << r.gpus);
    ModelConfig c = test_models::Gpt(r.hidden, r.layers, r.heads);
    c.vocab_size = 50368;
    TrainingOptions o;
    o.layout = ParallelLayout{1, 1, r.gpus, 1, 1, false};
    o.seq = 2048;
    o.micro_batch = r.micro_batch;
    o.zero_stage = 3;
    o.recompute = r.checkpointing ? Recompute::kFull : Recompute::kNone;
    const StepTime t = EstimateStepTime(c, o, r.batch, a100);
    const double predicted = t.tokens / t.total_s / r.gpus;
    EXPECT_NEAR(predicted / r.tokens_per_second_per_gpu, 1.0, 0.11);
  }
}

// Without FlashAttention the s x s scores of every head pass through HBM: (13 x 2 + 17) bytes per score under
// full recomputation. SC'21's 1.7B row (24 heads, 24 layers) at TP1, one sequence of 2048: 43 x 24 x 2048² x 24
// bytes at 0.9 x 2,039 GB/s = 56.6 ms per micro-batch, 16 micro-batches.
TEST(StepTimeTest, UnfusedAttentionMovesTheScoresThroughHbm) {
  const hw::GpuModel& a100 = *hw::GpuCatalog::Builtin().Resolve("A100-SXM-80GB");
  const ModelConfig c = MegatronGpt(2304, 24, 24);
  TrainingOptions o;
  o.layout = ParallelLayout{1, 1, 32, 1, 1, false};
  o.seq = 2048;
  o.micro_batch = 1;
  o.recompute = Recompute::kFull;
  const StepTime flash = EstimateStepTime(c, o, 512, a100);
  o.features.unfused_attention = true;
  const StepTime unfused = EstimateStepTime(c, o, 512, a100);
  const double per_micro_batch = 43.0 * 24 * 2048 * 2048 * 24 / (0.9 * 2039e9);
  EXPECT_NEAR(per_micro_batch, 0.0566, 0.0001);
  EXPECT_NEAR(unfused.compute_s - flash.compute_s, 16 * per_micro_batch, 1e-9);
}

// A pipeline runs at its slowest stage. SC'21's 76B (60 layers, h = 10240, V = 51200) at PP4: 15 layers a
// stage, the last with the head too; at PP16 the middle stages hold ceil(60/16) = 4 layers (the first and
// last 2 each, so the head's 0.30 of a layer does not make the last slower).
TEST(StepTimeTest, SlowestPipelineStageSetsThePace) {
  const ModelConfig c = MegatronGpt(10240, 60, 80);
  const FlopsPerToken f = ComputeFlopsPerToken(c, 2048, Recompute::kFull);
  const double layer = (f.hardware - f.head_training) / 60;
  EXPECT_NEAR(f.head_training, 6.0 * 51200 * 10240, 1);
  EXPECT_NEAR(f.head_training / layer, 0.302, 0.001);  // 6Vh / (4 x (24h² + 4sh)): forward, backward, recompute
  EXPECT_NEAR(SlowestStageShare(f, 60, 4), (15 * layer + f.head_training) / f.hardware, 1e-12);
  EXPECT_NEAR(SlowestStageShare(f, 60, 16), 4 * layer / f.hardware, 1e-12);
  EXPECT_EQ(SlowestStageShare(f, 60, 1), 1.0);
  EXPECT_EQ(UnevenPipelineStages(60, 16), std::make_pair(int64_t{2}, int64_t{2}));
}

// The 3.6B row at TP1 x DP64 (8 nodes), micro-batch 1: the gradient all-reduce (3.56 G bf16 gradients over 64
// ranks, 8 per node each carrying 1/8 over its 25 GB/s NIC at 0.7 efficiency) hides behind the last micro-batch's
// backward; serial-grad-reduce (Megatron-LM's 2021 local DDP) adds all of it to the step.
TEST(StepTimeTest, SerialGradReduceExposesTheWholeAllReduce) {
  const hw::GpuModel& a100 = *hw::GpuCatalog::Builtin().Resolve("A100-SXM-80GB");
  const ModelConfig c = MegatronGpt(3072, 30, 32);
  TrainingOptions o;
  o.layout = ParallelLayout{1, 1, 64, 1, 1, false};
  o.seq = 2048;
  o.micro_batch = 1;
  o.recompute = Recompute::kFull;
  const StepTime overlapped = EstimateStepTime(c, o, 512, a100);
  o.features.serial_grad_reduce = true;
  const StepTime serial = EstimateStepTime(c, o, 512, a100);
  EXPECT_EQ(overlapped.dp_comm_s, 0.0);
  const double grad_bytes = 2.0 * CountParameters(c).total;
  const double all_reduce = 2.0 * 63 / 64 * grad_bytes / (8 * 25e9 * 0.7);
  EXPECT_NEAR(serial.dp_comm_s, all_reduce, 1e-9);
  EXPECT_NEAR(serial.dp_comm_s, 0.1002, 0.0005);  // seconds: 2 x 63/64 x 7.12 GB / 140 GB/s
  EXPECT_NEAR(serial.total_s - overlapped.total_s, serial.dp_comm_s, 1e-12);
}

// ZeRO-2 keeps a 1/DP partition of the gradients, so every micro-batch's backward reduce-scatters them
// (DeepSpeed reduces at each micro-step under gradient accumulation), where ZeRO-1 all-reduces once per step.
// The 3.6B row at TP1 x DP64, 8 micro-batches of 1, serial reduce (nothing hidden): each micro-batch
// moves 63/64 x 7.12 GB over 8 NICs of 25 GB/s at 0.7 and waits 30 layers x 63 ring steps x 2.7 µs.
TEST(StepTimeTest, ZeroTwoReduceScattersEveryMicroBatch) {
  const hw::GpuModel& a100 = *hw::GpuCatalog::Builtin().Resolve("A100-SXM-80GB");
  const ModelConfig c = MegatronGpt(3072, 30, 32);
  TrainingOptions o;
  o.layout = ParallelLayout{1, 1, 64, 1, 1, false};
  o.seq = 2048;
  o.micro_batch = 1;
  o.recompute = Recompute::kFull;
  o.features.serial_grad_reduce = true;
  o.zero_stage = 1;
  const StepTime one = EstimateStepTime(c, o, 512, a100);
  o.zero_stage = 2;
  const StepTime two = EstimateStepTime(c, o, 512, a100);
  const double grad_bytes = 2.0 * CountParameters(c).total;
  EXPECT_NEAR(one.dp_comm_s, 2.0 * 63 / 64 * grad_bytes / (8 * 25e9 * 0.7), 1e-9);
  const double per_micro_batch = 63.0 / 64 * grad_bytes / (8 * 25e9 * 0.7) + 30 * 63 * 2.7e-6;
  EXPECT_NEAR(two.dp_comm_s, 8 * per_micro_batch, 1e-9);
  EXPECT_NEAR(two.dp_comm_s, 0.4418, 0.0005);  // seconds: 8 x (50.1 ms + 5.1 ms)
}

TEST(StepTimeTest, DecodeIsBandwidthBound) {
  const hw::GpuModel& h100 = *hw::GpuCatalog::Builtin().Resolve("H100-SXM-80GB");
  auto llama = LoadModelConfig(kModels + "llama/Meta-Llama-3.1-8B.json");
  ASSERT_TRUE(llama.ok());
  const uint64_t weights = 2 * static_cast<uint64_t>(CountParameters(*llama).total);
  // Batch 1: one read of 16 GB at 3.35 TB/s -> ~209 tokens/s.
  const double one = DecodeTokensPerSecond(*llama, weights, 0, 1, 1, h100);
  EXPECT_NEAR(one, static_cast<double>(h100.memory_bandwidth_bytes_per_second) / weights, 1e-6);
  EXPECT_GT(DecodeTokensPerSecond(*llama, weights, 0, 64, 1, h100), 30 * one);
}

// Tensor-parallel all-reduces (Shoeybi et al. 2019: two per layer in the forward pass) priced with
// NCCL's ring model: 6.6 µs + 2(t-1) x 0.6 µs over NVLink, plus 2(t-1)/t x bytes / (bandwidth x 0.7).
TEST(StepTimeTest, TensorParallelAllReduces) {
  const hw::GpuCatalog& catalog = hw::GpuCatalog::Builtin();
  const hw::GpuModel& a100 = *catalog.Resolve("A100-SXM-80GB");
  // A100 NVLink 3: 600 GB/s both ways -> 300 GB/s per direction x 0.7.
  const CollectiveLink nvlink = TensorParallelLink(a100, 4);
  EXPECT_DOUBLE_EQ(nvlink.bytes_per_second, 210e9);
  EXPECT_DOUBLE_EQ(nvlink.hop_latency_s, 0.6e-6);
  const CollectiveLink net = TensorParallelLink(a100, 16);  // beyond the 8-GPU domain
  EXPECT_DOUBLE_EQ(net.bytes_per_second, 25e9 * 0.7);
  EXPECT_DOUBLE_EQ(net.hop_latency_s, 2.7e-6);
  // No NVLink: PCIe 4.0 x16, 64 GB/s both ways.
  const CollectiveLink pcie = TensorParallelLink(*catalog.Resolve("L40S"), 1);
  EXPECT_DOUBLE_EQ(pcie.bytes_per_second, 32e9 * 0.7);
  EXPECT_DOUBLE_EQ(pcie.hop_latency_s, 1.0e-6);
  EXPECT_EQ(RingAllReduceSeconds(1e6, 1, 210e9, 6.6e-6, 0.6e-6), 0);
  EXPECT_NEAR(RingAllReduceSeconds(7168, 4, 210e9, 6.6e-6, 0.6e-6), 10.2e-6 + 1.5 * 7168 / 210e9, 1e-15);

  // Qwen2.5-7B decode at batch 1 (hidden 3584, 28 layers): 56 all-reduces of 7,168 B per token.
  auto qwen = LoadModelConfig(kModels + "qwen/Qwen2.5-7B.json");
  ASSERT_TRUE(qwen.ok());
  const uint64_t weights = 2 * static_cast<uint64_t>(CountParameters(*qwen).total);
  const InferenceTime tp1 = EstimateInferenceTime(*qwen, weights, 0, 1, 4096, ParallelLayout{}, a100);
  EXPECT_EQ(tp1.decode_tp_comm_s, 0);
  EXPECT_NEAR(tp1.tokens_per_second, DecodeTokensPerSecond(*qwen, weights, 0, 1, 1, a100), 1e-9);
  const InferenceTime tp4 = EstimateInferenceTime(*qwen, weights / 4, 0, 1, 4096, ParallelLayout{4, 1, 1}, a100);
  EXPECT_NEAR(tp4.decode_tp_comm_s, 56 * (10.2e-6 + 1.5 * 7168 / 210e9), 1e-12);
  EXPECT_NEAR(tp4.decode_step_s, tp4.decode_memory_s + tp4.decode_tp_comm_s, 1e-12);  // bandwidth-bound
  EXPECT_LT(tp1.decode_step_s / tp4.decode_step_s, 3.2);                              // not 4x
  // Prefill of 4096 tokens is compute-bound: 4x the GPUs cut it by ~3.6x (56 all-reduces of 29 MB).
  EXPECT_GT(tp4.prefill_tp_comm_s, 0);
  EXPECT_NEAR(tp4.prefill_s, tp4.prefill_compute_s + tp4.prefill_tp_comm_s, 1e-12);
  EXPECT_GT(tp1.prefill_s / tp4.prefill_s, 3.0);
  EXPECT_LT(tp1.prefill_s / tp4.prefill_s, 4.0);
}

}  // namespace
}  // namespace gpugeek::workload
