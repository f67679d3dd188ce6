// Inference memory: KV bytes per token for every row of the KV table in
// ../shared/anchors/planner.md §2.3, the published serving figures of §3.2, quantized weight sizes.

#include "workload/inference_memory.h"

#include <gtest/gtest.h>

#include "common/units.h"
#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

const std::string kModels = std::string(GPUGEEK_SHARED_DIR) + "/models/";

ModelConfig Load(const std::string& file) {
  auto c = LoadModelConfig(kModels + file);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

// anchors/planner.md §2.3 "KV bytes/token at 16-bit", every row, with the trap values it warns of.
TEST(KvCacheTest, BytesPerTokenTable) {
  struct Row {
    const char* file;
    double bytes;
  };
  const Row rows[] = {
      {"llama/Llama-2-7b-hf.json", 524'288},
      {"llama/Llama-2-13b-hf.json", 819'200},  // vLLM paper: "800 KB"
      {"llama/Llama-2-70b-hf.json", 327'680},
      {"llama/Meta-Llama-3.1-70B.json", 327'680},
      {"llama/Meta-Llama-3.1-8B.json", 131'072},
      {"mistral/Mistral-7B-v0.1.json", 131'072},
      {"mistral/Mixtral-8x7B-v0.1.json", 131'072},
      {"llama/Meta-Llama-3.1-405B.json", 516'096},
      {"qwen/Qwen2.5-7B.json", 57'344},
      {"qwen/Qwen3-4B.json", 147'456},   // not 92,160 with d = h/n_q (LMCache#688)
      {"falcon/falcon-7b.json", 8'192},  // not 581,632 from num_kv_heads = 71
      {"falcon/falcon-7b-finetune-hfformat.json", 8'192},
      {"falcon/falcon-40b.json", 122'880},
      {"gemma/gemma-2b.json", 18'432},
      {"gemma/gemma-2-9b.json", 344'064},     // all layers, as allocated
      {"gpt-oss/gpt-oss-120b.json", 73'728},  // not 36,864 (hf-mem#60)
      {"deepseek/DeepSeek-V3.json", 70'272},  // MLA latent, not 4,997,120 as MHA
      {"deepseek/DeepSeek-V2-Lite.json", 31'104},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(KvBytesPerToken(Load(r.file), 2), r.bytes) << r.file;
  }
}

TEST(KvCacheTest, TensorParallelSplitsHeadsButNotLatents) {
  ModelConfig llama70 = Load("llama/Llama-2-70b-hf.json");
  EXPECT_EQ(KvBytesPerToken(llama70, 2, 4), 327'680 / 4);
  // 8 KV heads over TP 16: each rank keeps one head (replicated), so the per-GPU KV halves only to 8.
  EXPECT_EQ(KvBytesPerToken(llama70, 2, 16), 327'680 / 8);
  EXPECT_EQ(KvBytesPerToken(Load("deepseek/DeepSeek-V3.json"), 2, 8), 70'272);
  EXPECT_EQ(KvBytesPerToken(llama70, 1), 327'680 / 2);  // fp8 KV
}

TEST(KvCacheTest, SlidingWindowCapsPerSequence) {
  // gpt-oss-120b: 18 of 36 layers keep only 128 tokens. At 4096 tokens:
  // (18 x 4096 + 18 x 128) x 2 x 8 x 64 x 2 B.
  ModelConfig oss = Load("gpt-oss/gpt-oss-120b.json");
  EXPECT_EQ(KvBytesPerSequence(oss, 4096, 2, ParallelLayout{}), (18.0 * 4096 + 18.0 * 128) * 2048);
  // Gemma-2-9B: 21 of 42 layers slide at 4096; below the window nothing changes.
  ModelConfig gemma = Load("gemma/gemma-2-9b.json");
  EXPECT_EQ(KvBytesPerSequence(gemma, 1000, 2, ParallelLayout{}), 1000.0 * 344'064);
  EXPECT_EQ(KvBytesPerSequence(gemma, 8192, 2, ParallelLayout{}), (21.0 * 8192 + 21.0 * 4096) * 344'064 / 42);
}

// I4 (alvarobartt/hf-mem#60): vLLM on gpt-oss-120b, "Available KV cache memory: 5.38 GiB" ->
// "GPU KV cache size: 78,384 tokens": the pool divided by all-layer KV bytes per token.
TEST(KvCacheTest, VllmGptOssCapacityLog) {
  const double per_token = KvBytesPerToken(Load("gpt-oss/gpt-oss-120b.json"), 2);
  EXPECT_NEAR(5.38 * kGiB / per_token, 78'384, 78'384 * 0.001);
}

// I3 (HF blog "llama31", huggingface/blog#2345): FP16 KV for 1k / 16k / 128k tokens, GiB, with
// 1k = 1024, 16k = 16,000, 128k = 128,000. The 405B row of that table is 2x ours: it is the
// table that is wrong (the "published table can be wrong" case).
TEST(KvCacheTest, HfBlogLlama31Table) {
  const double b8 = KvBytesPerToken(Load("llama/Meta-Llama-3.1-8B.json"), 2);
  const double b70 = KvBytesPerToken(Load("llama/Meta-Llama-3.1-70B.json"), 2);
  const double b405 = KvBytesPerToken(Load("llama/Meta-Llama-3.1-405B.json"), 2);
  EXPECT_NEAR(1024 * b8 / kGiB, 0.125, 0.001);
  EXPECT_NEAR(16000 * b8 / kGiB, 1.95, 0.005);
  EXPECT_NEAR(128000 * b8 / kGiB, 15.62, 0.006);  // 15.625 printed truncated
  EXPECT_NEAR(1024 * b70 / kGiB, 0.313, 0.001);
  EXPECT_NEAR(16000 * b70 / kGiB, 4.88, 0.005);
  EXPECT_NEAR(128000 * b70 / kGiB, 39.06, 0.005);
  EXPECT_NEAR(2 * 128000 * b405 / kGiB, 123.05, 0.01);
}

// I2 (vLLM paper, Kwon et al. SOSP'23, Fig. 1 and Sec. 3): OPT-13B on A100-40GB: parameters 26 GB,
// 800 KB of KV per token, 1.6 GB for a 2048-token request.
TEST(InferenceMemoryTest, VllmPaperOpt13b) {
  auto opt = ParseModelConfig(R"({"model_type":"opt","hidden_size":5120,"num_hidden_layers":40,
      "num_attention_heads":40,"ffn_dim":20480,"vocab_size":50272,"max_position_embeddings":2048,
      "word_embed_proj_dim":5120})");
  ASSERT_TRUE(opt.ok()) << opt.status();
  InferenceOptions o;
  o.weights = o.expert_weights = QuantScheme{DType::kFp16};
  o.other_dtype = DType::kFp16;
  MemoryBreakdown m = InferenceMemory(*opt, o);
  EXPECT_NEAR(m.Bytes("weights") / 1e9, 26, 26 * 0.02);
  EXPECT_EQ(KvBytesPerToken(*opt, 2), 800 * 1024);
  EXPECT_NEAR(KvBytesPerSequence(*opt, 2048, 2, ParallelLayout{}) / kGiB, 1.6, 0.05);
}

TEST(InferenceMemoryTest, QuantizedWeightsKeepEmbeddingsInSixteenBit) {
  ModelConfig llama = Load("llama/Llama-2-70b-hf.json");
  const ParamCounts n = CountParameters(llama);
  InferenceOptions o;
  o.weights = o.expert_weights = QuantScheme{DType::kInt4, 128, false};
  MemoryBreakdown m = InferenceMemory(llama, o);
  // Hand computation: linear weights at 0.5 B + (2 B scale + 0.5 B zero) per 128 inputs; the
  // embedding, the head and the norms at 2 B.
  const double sixteen_bit = 2.0 * (n.embedding + n.lm_head + (2 * 80 + 1) * 8192.0);
  const double linear = static_cast<double>(n.total - n.embedding - n.lm_head - (2 * 80 + 1) * 8192);
  EXPECT_NEAR(m.Bytes("weights"), linear * (0.5 + 2.5 / 128) + sixteen_bit, 1e6);
  o.weights = o.expert_weights = QuantScheme{DType::kBf16};
  EXPECT_EQ(InferenceMemory(llama, o).Bytes("weights"), 2 * static_cast<uint64_t>(n.total));
}

// QLoRA paper (arXiv:2305.14314 Sec. 3): double quantization cuts the constants from 0.5 to
// 0.127 bits per parameter (blocks of 64, second level blocks of 256).
TEST(DTypeTest, Nf4Constants) {
  EXPECT_NEAR((QuantScheme{DType::kNf4, 0, false}.BytesPerWeight() - 0.5) * 8, 0.5, 1e-6);
  EXPECT_NEAR((QuantScheme{DType::kNf4, 0, true}.BytesPerWeight() - 0.5) * 8, 0.127, 0.001);
  // OCP MX: 4.25 bits per weight; DeepSeek-V3 fp8 blocks of 128x128 with fp32 scales.
  EXPECT_NEAR(QuantScheme{DType::kMxfp4}.BytesPerWeight() * 8, 4.25, 1e-6);
  EXPECT_EQ(QuantScheme({DType::kFp8, 128, false}).MatrixBytes(7168, 2048), 7168u * 2048 + 4 * 56 * 16);
  EXPECT_FALSE(ParseDType("int3").ok());
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBf16);
}

TEST(InferenceMemoryTest, TensorParallelSplitsWeights) {
  ModelConfig llama = Load("llama/Llama-2-70b-hf.json");
  InferenceOptions o;
  const uint64_t one = InferenceMemory(llama, o).Bytes("weights");
  o.layout.tp = 4;
  const uint64_t four = InferenceMemory(llama, o).Bytes("weights");
  // Everything but the norms (161 x 8192 params, replicated) splits four ways.
  EXPECT_NEAR(static_cast<double>(four), (one - 2.0 * 161 * 8192) / 4 + 2.0 * 161 * 8192, 16);
}

TEST(InferenceMemoryTest, VllmCapacityHandComputed) {
  // Llama-3.1-8B, bf16, one H100-80GB (80 GiB), utilization 0.9, defaults (8192 batched tokens,
  // 256 seqs): pool = 0.9 x 80 GiB - weights - activations - runtime, / 131,072 B per token.
  ModelConfig llama = Load("llama/Meta-Llama-3.1-8B.json");
  InferenceOptions o;
  KvCapacity k = VllmKvCapacity(llama, o, 80 * kGiB, 0.9);
  const double weights = 2.0 * CountParameters(llama).total;
  const double acts = 8192.0 * (2 * 4096 + 3 * 14336) * 2 + 4.0 * 256 * 128256;
  const double pool = 0.9 * 80 * kGiB - weights - acts - kCudaContextBytes;
  EXPECT_NEAR(static_cast<double>(k.kv_pool_bytes), pool, 2);
  EXPECT_EQ(k.tokens, static_cast<int64_t>(pool / 131072));
  // A 70B model in bf16 does not fit one 80 GiB GPU: no KV pool.
  EXPECT_EQ(VllmKvCapacity(Load("llama/Llama-2-70b-hf.json"), o, 80 * kGiB).tokens, 0);
}

}  // namespace
}  // namespace gpugeek::workload
