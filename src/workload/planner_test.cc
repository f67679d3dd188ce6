// The planner: the usual example (Llama-2-70B on A100-80GB), Megatron SC'21 Table 1 layouts,
// validity rules, objectives, and the scheduler-facing request.

#include "workload/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/units.h"
#include "workload/test_models.h"

namespace gpugeek::workload {
namespace {

using test_models::MegatronGpt;

const std::string kModels = std::string(GPUGEEK_SHARED_DIR) + "/models/";
const hw::GpuCatalog& Catalog() { return hw::GpuCatalog::Builtin(); }

ModelConfig Load(const std::string& file) {
  auto c = LoadModelConfig(kModels + file);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

PoolEntry Gpus(const char* name, int count, int64_t price = 2'000'000) {
  const hw::GpuModel* m = Catalog().Resolve(name);
  EXPECT_NE(m, nullptr) << name;
  return PoolEntry{m, count, price};
}

// Issue 3's example: a Llama-2-70B fine-tune at sequence 4096 on 4 x A100-80GB fits with LoRA
// and does not with full fine-tuning; the planner says how many GPUs full fine-tuning needs.
TEST(PlannerTest, Llama70bLoraFitsFourA100sFullDoesNot) {
  const ModelConfig llama = Load("llama/Llama-2-70b-hf.json");
  PlannerOptions four;
  four.exact_gpus = 4;
  Task lora{TaskKind::kLora, 4096, 4};
  auto lp = MakePlan(llama, lora, {Gpus("A100-80GB", 4)}, four);
  ASSERT_TRUE(lp.ok()) << lp.status();
  ASSERT_FALSE(lp->candidates.empty()) << (lp->rejected.empty() ? "" : lp->rejected[0]);
  const PlanCandidate& best = lp->candidates[0];
  EXPECT_EQ(best.gpus, 4);
  EXPECT_EQ(best.gpu->id, "A100-SXM-80GB");
  EXPECT_LE(best.memory.Total(), best.usable_bytes);
  EXPECT_GT(best.memory.Bytes("weights"), 0u);

  Task full{TaskKind::kFull, 4096, 4};
  auto fp = MakePlan(llama, full, {Gpus("A100-80GB", 4)}, four);
  ASSERT_TRUE(fp.ok()) << fp.status();
  EXPECT_TRUE(fp->candidates.empty());
  ASSERT_EQ(fp->rejected.size(), 1u);
  EXPECT_THAT(fp->rejected[0], testing::HasSubstr("A100-SXM-80GB"));

  // How many it needs: the fewest A100-80GB that fit full fine-tuning (16 B/param of states over
  // ZeRO-3 alone needs > 1.1 TB / 72 GiB = 15.4 GPUs).
  PlannerOptions fewest;
  fewest.objective = Objective::kGpus;
  auto need = MakePlan(llama, Task{TaskKind::kFull, 4096, 64}, {Gpus("A100-80GB", 64)}, fewest);
  ASSERT_TRUE(need.ok()) << need.status();
  ASSERT_FALSE(need->candidates.empty());
  EXPECT_GE(need->candidates[0].gpus, 16);
  EXPECT_LE(need->candidates[0].gpus, 32);
  EXPECT_THAT(need->candidates[0].next_smaller, testing::HasSubstr("needs"));

  // QLoRA fits a single A100-80GB.
  PlannerOptions one;
  one.exact_gpus = 1;
  auto q = MakePlan(llama, Task{TaskKind::kQlora, 4096, 1}, {Gpus("A100-80GB", 1)}, one);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_FALSE(q->candidates.empty());
}

TEST(PlannerTest, ValidityRulesHeadsAndDomains) {
  // Qwen2.5-7B: 28 heads, 4 KV heads -> TP 8 is invalid; TP 4 is the most it can use.
  const ModelConfig qwen = Load("qwen/Qwen2.5-7B.json");
  PlannerOptions o;
  o.top_k = 50;
  auto p = MakePlan(qwen, Task{TaskKind::kFull, 2048, 8}, {Gpus("H100-SXM-80GB", 8)}, o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_FALSE(p->candidates.empty());
  for (const PlanCandidate& c : p->candidates) EXPECT_LE(c.layout.tp, 4) << c.Summary();
  // L40S has no NVLink: TP stays 1.
  auto l = MakePlan(Load("llama/Meta-Llama-3.1-8B.json"), Task{TaskKind::kLora, 2048, 8}, {Gpus("L40S", 8)}, o);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_FALSE(l->candidates.empty());
  for (const PlanCandidate& c : l->candidates) EXPECT_EQ(c.layout.tp, 1) << c.Summary();
}

TEST(PlannerTest, InferenceObjectivesAndResourceRequest) {
  const ModelConfig llama = Load("llama/Llama-2-70b-hf.json");
  const std::vector<PoolEntry> pool = {Gpus("A100-80GB", 8, 1'800'000), Gpus("H200", 8, 3'500'000)};
  PlannerOptions fewest;
  fewest.objective = Objective::kGpus;
  Task serve{TaskKind::kInference, 4096, 16};
  serve.tokens = 1e8;
  auto p = MakePlan(llama, serve, pool, fewest);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_GE(p->candidates.size(), 2u);
  // 138 GB of bf16 weights: one GPU of either model is too small, so the fewest is 2.
  EXPECT_EQ(p->candidates[0].gpus, 2);
  for (size_t i = 1; i < p->candidates.size(); ++i) EXPECT_GE(p->candidates[i].gpus, p->candidates[i - 1].gpus);
  EXPECT_THAT(p->candidates[0].next_smaller, testing::HasSubstr("1 x"));

  PlannerOptions cheapest;
  cheapest.objective = Objective::kCost;
  auto c = MakePlan(llama, serve, pool, cheapest);
  ASSERT_TRUE(c.ok());
  for (size_t i = 1; i < c->candidates.size(); ++i) {
    EXPECT_GE(c->candidates[i].cost_micros, c->candidates[i - 1].cost_micros);
  }
  // Cost is gpus x price x hours, in integer micro-units.
  const PlanCandidate& top = c->candidates[0];
  const int64_t price = top.gpu->id == "H200-SXM-141GB" ? 3'500'000 : 1'800'000;
  EXPECT_EQ(top.cost_micros, std::llround(price * top.gpus * top.seconds / 3600.0));

  const ResourceRequest r = ToResourceRequest(*p);
  ASSERT_EQ(r.alternatives.size(), p->candidates.size());
  EXPECT_EQ(r.alternatives[0].gpus, 2);
  EXPECT_EQ(r.alternatives[0].tp * r.alternatives[0].pp * r.alternatives[0].dp, 2);
  EXPECT_EQ(r.alternatives[0].memory_per_gpu_bytes, p->candidates[0].memory.Total());
}

// Serving defaults to the checkpoint's format: DeepSeek-V3's fp8 blocks (671B x ~1 B) fit 8 x H200
// (141 GiB each) with TP 8, while bf16 (1.34 TB) would not.
TEST(PlannerTest, ServesCheckpointFormat) {
  const ModelConfig v3 = Load("deepseek/DeepSeek-V3.json");
  PlannerOptions eight;
  eight.exact_gpus = 8;
  auto fp8 = MakePlan(v3, Task{TaskKind::kInference, 8192, 8}, {Gpus("H200", 8)}, eight);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  ASSERT_FALSE(fp8->candidates.empty()) << (fp8->rejected.empty() ? "" : fp8->rejected[0]);
  EXPECT_NEAR(fp8->candidates[0].memory.Bytes("weights") * 8 / 1e9, 671 + 2 * 0.93, 12);
  Task bf16{TaskKind::kInference, 8192, 8};
  bf16.inference_dtype = DType::kBf16;
  auto big = MakePlan(v3, bf16, {Gpus("H200", 8)}, eight);
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->candidates.empty());
}

TEST(PlannerTest, Errors) {
  const ModelConfig llama = Load("llama/Llama-2-7b-hf.json");
  EXPECT_FALSE(MakePlan(llama, Task{}, {}).ok());
  Task bad_lora{TaskKind::kLora, 4096, 1};
  bad_lora.lora.targets = {"c_attn"};
  EXPECT_FALSE(MakePlan(llama, bad_lora, {Gpus("A100-80GB", 1)}).ok());
  EXPECT_FALSE(MakePlan(llama, Task{TaskKind::kLora, 0, 1}, {Gpus("A100-80GB", 1)}).ok());
  // NaN and infinities fail every range check.
  Task nan_tokens{TaskKind::kLora, 4096, 1};
  nan_tokens.tokens = std::nan("");
  EXPECT_EQ(MakePlan(llama, nan_tokens, {Gpus("A100-80GB", 1)}).status().message(),
            "tokens must be a finite number >= 0, not nan");
  nan_tokens.tokens = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(MakePlan(llama, nan_tokens, {Gpus("A100-80GB", 1)}).ok());
  PlannerOptions nan_margin;
  nan_margin.safety_margin = std::nan("");
  EXPECT_EQ(MakePlan(llama, Task{TaskKind::kLora, 4096, 1}, {Gpus("A100-80GB", 1)}, nan_margin).status().message(),
            "safety margin must be in [0, 1), not nan");
  Task rank0{TaskKind::kLora, 4096, 1};
  rank0.lora.rank = 0;
  EXPECT_FALSE(MakePlan(llama, rank0, {Gpus("A100-80GB", 1)}).ok());
  EXPECT_FALSE(ParseTaskKind("finetune").ok());
  EXPECT_FALSE(ParseObjective("speed").ok());
  // Nothing fits: a result, not an error.
  auto none = MakePlan(Load("llama/Meta-Llama-3.1-405B.json"), Task{TaskKind::kFull, 4096, 1}, {Gpus("RTX-4090", 2)});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->candidates.empty());
  ASSERT_EQ(none->rejected.size(), 1u);
  EXPECT_THAT(none->rejected[0], testing::HasSubstr("RTX-4090"));
}

// Megatron-LM SC'21 Table 1 (anchors/planner.md §4.1): given each row's model, GPU count and batch
// on A100s, the planner's TP x PP is the paper's or within 10 % of its predicted throughput, and
// its predicted TFLOP/s per GPU (hardware FLOPs, full recompute as the paper ran) is within 15 %.
TEST(PlannerTest, MegatronTable1Layouts) {
  struct Row {
    int64_t heads, hidden, layers;
    int tp, pp, gpus;
    int64_t batch;
    double tflops;
  };
  const Row rows[] = {
      {24, 2304, 24, 1, 1, 32, 512, 137},        {32, 3072, 30, 2, 1, 64, 512, 138},
      {32, 4096, 36, 4, 1, 128, 512, 142},       {48, 6144, 40, 8, 1, 256, 1024, 135},
      {64, 8192, 48, 8, 2, 512, 1536, 138},      {80, 10240, 60, 8, 4, 1024, 1792, 140},
      {96, 12288, 80, 8, 8, 1536, 2304, 148},    {128, 16384, 96, 8, 16, 1920, 2160, 155},
      {128, 20480, 105, 8, 35, 2520, 2520, 163}, {160, 25600, 128, 8, 64, 3072, 3072, 163},
  };
  const hw::GpuModel& a100 = *Catalog().Resolve("A100-SXM-80GB");
  for (const Row& r : rows) {
    SCOPED_TRACE(r.hidden);
    const ModelConfig c = MegatronGpt(r.hidden, r.layers, r.heads);
    PlannerOptions o;
    o.exact_gpus = r.gpus;
    o.recompute_modes = {Recompute::kFull};
    o.micro_batches = {1, 2, 4};
    o.zero_stages = {0};  // the paper's Megatron-LM (2021) had no ZeRO or distributed optimizer
    Task t{TaskKind::kPretrain, 2048, r.batch};
    auto p = MakePlan(c, t, {PoolEntry{&a100, r.gpus, 0}}, o);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_FALSE(p->candidates.empty()) << (p->rejected.empty() ? "" : p->rejected[0]);
    const PlanCandidate& best = p->candidates[0];
    TrainingOptions chosen;
    chosen.layout = best.layout;
    chosen.zero_stage = best.zero_stage;
    chosen.fp32_grads = true;
    chosen.seq = 2048;
    chosen.micro_batch = best.micro_batch;
    chosen.recompute = Recompute::kFull;
    const StepTime ours = EstimateStepTime(c, chosen, r.batch, a100);
    EXPECT_NEAR(ours.hardware_flops_per_gpu / 1e12, r.tflops, 0.15 * r.tflops) << best.Summary();
    if (best.layout.tp != r.tp || best.layout.pp != r.pp) {
      // The paper's TP x PP with the best remaining settings (micro-batch, interleaving).
      PlannerOptions fixed = o;
      fixed.allowed_tp = {r.tp};
      fixed.allowed_pp = {r.pp};
      auto paper = MakePlan(c, t, {PoolEntry{&a100, r.gpus, 0}}, fixed);
      ASSERT_TRUE(paper.ok());
      ASSERT_FALSE(paper->candidates.empty()) << "the paper's layout does not fit: " << best.Summary();
      EXPECT_GE(paper->candidates[0].tokens_per_second, 0.9 * best.tokens_per_second) << best.Summary();
    }
  }
}

}  // namespace
}  // namespace gpugeek::workload
