// End-to-end tests of `gpugeek plan` recipes: run the built binary and read what it prints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/testing/process.h"

namespace gpugeek::cli {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// `gpugeek ARGS` (words split at spaces), through the project's subprocess runner.
Result RunGpugeek(const std::string& args) {
  std::vector<std::string> words;
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  // One log per test process: ctest runs this binary's tests in parallel, and a shared file mixed
  // one test's output into another's.
  const std::string log = ::testing::TempDir() + "gpugeek_plan_cli." + std::to_string(::getpid()) + "." +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".log";
  auto [code, out] = subprocess::RunCli(words, log);
  return {code, out};
}

// `gpugeek plan ../shared/models/ARGS`.
Result Plan(const std::string& args) {
  return RunGpugeek("plan " + std::string(GPUGEEK_SHARED_DIR) + "/models/" + args);
}

TEST(PlanCommandTest, TorchtuneRecipeRendersTrainerFlagsAndNoMegatron) {
  const Result r = Plan(
      "llama/Llama-3.2-1B-Instruct.json --task full --seq 2048 --batch 8 --gpus H200:1 "
      "--recipe torchtune --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["recipe"], nlohmann::json({{"framework", "hf"},
                                         {"precision", "bf16"},
                                         {"optimizer", "adamw"},
                                         {"recompute", "full"},
                                         {"offload", "none"},
                                         {"features", ""}}));
  const nlohmann::json& best = j["candidates"][0];
  EXPECT_EQ(best["recompute"], "full");
  EXPECT_EQ(best["zero_stage"], 0);
  EXPECT_EQ(j["launch"]["hf_trainer"],
            nlohmann::json({"--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "8",
                            "--gradient_checkpointing", "--optim", "adamw_torch"}));
  EXPECT_FALSE(j["launch"].contains("megatron"));
  EXPECT_FALSE(j["launch"].contains("deepspeed"));
  // Pure bf16 AdamW: 2 + 2 + 4 B/param; Llama-3.2-1B has 1,235,814,400 parameters. The gradients and
  // the step's temporary are live after the activations are freed: both counted in the total.
  uint64_t states = 0;
  for (const auto& t : best["memory"]) {
    if (t["label"] == "weights" || t["label"] == "optimizer_states") states += t["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(states, 6ull * 1235814400);
}

TEST(PlanCommandTest, TextShowsThePureBf16NoteAndTheNewTerms) {
  const Result r = Plan("llama/Meta-Llama-3.1-8B.json --task lora --seq 2048 --batch 4 --gpus H200:1 --recipe peft");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("peft_fp32_inputs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hf trainer: --per_device_train_batch_size 1 --gradient_accumulation_steps 4 --bf16"),
            std::string::npos)
      << r.out;
  const Result t = Plan(
      "llama/Llama-3.2-1B-Instruct.json --task full --seq 2048 --batch 8 --gpus H200:1 "
      "--recipe torchtune");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("(pure bf16: load the model with torch_dtype=torch.bfloat16; no --bf16)"), std::string::npos)
      << t.out;
}

TEST(PlanCommandTest, ExplainShowsEachTermsSource) {
  const Result r = Plan(
      "llama/Meta-Llama-3.1-8B.json --task lora --seq 2048 --batch 4 --gpus H200:1 --recipe peft "
      "--explain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("source: Korthikanti et al. 2022 (arXiv:2205.05198) Table 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("source: PEFT LoRA layers cast the input"), std::string::npos) << r.out;
  const Result j = Plan("llama/Meta-Llama-3.1-8B.json --task inference --gpus H200:1 --json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const nlohmann::json plan = nlohmann::json::parse(j.out);
  for (const auto& t : plan["candidates"][0]["memory"]) {
    EXPECT_FALSE(t["source"].get<std::string>().empty()) << t;
  }
}

TEST(PlanCommandTest, RecipeWithoutAToolLaunchSaysSo) {
  const Result r =
      Plan("llama/Llama-3.2-1B-Instruct.json --task full --seq 2048 --batch 8 --gpus H200:1 --precision autocast");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(no tool launch renders this recipe: framework auto, precision autocast, optimizer adamw)"),
            std::string::npos)
      << r.out;
}

TEST(PlanCommandTest, BadRecipeFlagsNameTheFlagAndTheChoices) {
  const Result p = Plan("llama/Llama-3.2-1B-Instruct.json --task full --precision fp16");
  EXPECT_EQ(p.exit_code, 2) << p.out;
  EXPECT_NE(p.out.find("--precision: unknown precision 'fp16' (one of: mixed, bf16, fp32, autocast)"),
            std::string::npos)
      << p.out;
  const Result r = Plan("llama/Llama-3.2-1B-Instruct.json --task full --recipe sky");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--recipe: unknown recipe 'sky'"), std::string::npos) << r.out;
  const Result c = Plan("llama/Llama-3.2-1B-Instruct.json --task full --recompute sometimes");
  EXPECT_EQ(c.exit_code, 2) << c.out;
  EXPECT_NE(c.out.find("--recompute: unknown recompute 'sometimes' (one of: none, selective, full) (or auto)"),
            std::string::npos)
      << c.out;
  // A ZeRO stage the recipe's tool does not run is named, not reported as "no plan fits".
  const Result z = Plan(
      "llama/Llama-3.2-1B-Instruct.json --task pretrain --seq 2048 --batch 8 --gpus A100-SXM-80GB:8 "
      "--recipe megatron-2021 --zero 1");
  EXPECT_EQ(z.exit_code, 2) << z.out;
  EXPECT_NE(z.out.find("--zero 1: recipe megatron-2021 (framework megatron) runs ZeRO stages up to 0"),
            std::string::npos)
      << z.out;
}

TEST(PlanCommandTest, CompareMeasuredPrintsTheErrorPerRunAndHonoursTheLimit) {
  const std::string csv = std::string(GPUGEEK_SOURCE_DIR) + "/docs/measured/h200-2026-12-04.csv";
  const std::string models = std::string(GPUGEEK_SHARED_DIR) + "/models";
  Result r = RunGpugeek("plan --compare-measured " + csv + " --models-dir " + models + " --max-error 0.10 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 12u);
  EXPECT_EQ(j["rows"][0]["line"], 5);
  EXPECT_EQ(j["rows"][0]["measured_bytes"], 20866460672.0);
  EXPECT_LE(j["worst_abs_error"].get<double>(), 0.10);
  EXPECT_LE(j["median_abs_error"].get<double>(), 0.03);
  // gpt2-xl is 7.7% low: a 5% limit fails the command.
  r = RunGpugeek("plan --compare-measured " + csv + " --models-dir " + models + " --max-error 0.05");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("12 runs: median |error|"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(limit 5.0%)"), std::string::npos) << r.out;
  r = RunGpugeek("plan --compare-measured " + csv + " --models-dir /nonexistent");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("line 5"), std::string::npos) << r.out;
  r = RunGpugeek("plan llama.json --compare-measured " + csv);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("model: not with --compare-measured"), std::string::npos) << r.out;
}

// Narayanan et al. SC'21 (arXiv:2104.04473) Table 1 (anchors/planner.md §4.1) through the CLI, A100-80GB,
// seq 2048, vocabulary 51,200. A row passes when the best plan is the paper's TP x PP, or the paper's is
// among the three runners-up and at most 5% slower.
struct Sc21Row {
  int heads, hidden, layers, tp, pp, gpus, batch;
};
constexpr Sc21Row kSc21Rows[] = {
    {24, 2304, 24, 1, 1, 32, 512},        {32, 3072, 30, 2, 1, 64, 512},       {32, 4096, 36, 4, 1, 128, 512},
    {48, 6144, 40, 8, 1, 256, 1024},      {64, 8192, 48, 8, 2, 512, 1536},     {80, 10240, 60, 8, 4, 1024, 1792},
    {96, 12288, 80, 8, 8, 1536, 2304},    {128, 16384, 96, 8, 16, 1920, 2160}, {128, 20480, 105, 8, 35, 2520, 2520},
    {160, 25600, 128, 8, 64, 3072, 3072},
};

// The rows whose published layout the plan reproduces (first, or a runner-up within 5%) with `flags`.
std::vector<int> Sc21RowsReproduced(const std::string& flags) {
  const std::string dir = ::testing::TempDir();
  std::vector<int> hidden;
  for (const Sc21Row& r : kSc21Rows) {
    const std::string config = dir + "sc21_" + std::to_string(r.hidden) + ".json";
    std::ofstream(config) << nlohmann::json({{"model_type", "gpt2"},
                                             {"n_embd", r.hidden},
                                             {"n_layer", r.layers},
                                             {"n_head", r.heads},
                                             {"n_positions", 2048},
                                             {"vocab_size", 51200},
                                             {"tie_word_embeddings", true}})
                                 .dump();
    const Result res =
        RunGpugeek(fmt::format("plan {} --task pretrain --seq 2048 --batch {} --gpus A100-SXM-80GB:{} "
                               "--top 1 --json {}",
                               config, r.batch, r.gpus, flags));
    EXPECT_EQ(res.exit_code, 0) << res.out;
    if (res.exit_code != 0) continue;
    const nlohmann::json best = nlohmann::json::parse(res.out)["candidates"][0];
    EXPECT_EQ(best["gpus"], r.gpus);
    const std::string paper = fmt::format(" TP{} PP{} ", r.tp, r.pp);
    bool ok = best["tp"] == r.tp && best["pp"] == r.pp;
    for (const nlohmann::json& other : best["other_layouts"]) {
      const std::string summary = other["summary"].get<std::string>() + " ";
      if (summary.find(paper) != std::string::npos) ok |= other["slower"].get<double>() <= 0.05;
    }
    if (ok) hidden.push_back(r.hidden);
  }
  return hidden;
}

// At the software the paper ran (`--recipe megatron-2021`: no distributed optimizer, full recomputation,
// attention without FlashAttention, the data-parallel all-reduce after the pipeline flush, no sequence
// parallelism) 9 of 10 rows. 7.5B misses: its TP4 is predicted 7.5% slower than TP2, which fits in 80 GB
// (the paper did not choose the smallest model-parallel size that fits there).
TEST(PlanCommandTest, MegatronSc21Table1LayoutsRankFirstOrWithinFivePercent) {
  const std::vector<int> reproduced = Sc21RowsReproduced("--recipe megatron-2021");
  EXPECT_EQ(reproduced, (std::vector<int>{2304, 3072, 6144, 8192, 10240, 12288, 16384, 20480, 25600}));
}

// The megatron-2021 plan's launch says what the plan assumed: no distributed optimizer, no sequence parallelism,
// no overlapped reduce, materialised attention scores, full recomputation.
TEST(PlanCommandTest, Megatron2021RecipeLaunchesWhatItPlans) {
  const std::string config = ::testing::TempDir() + "sc21_launch.json";
  std::ofstream(config) << R"({"model_type":"gpt2","n_embd":4096,"n_layer":36,"n_head":32,"n_positions":2048,)"
                        << R"("vocab_size":51200,"tie_word_embeddings":true})";
  const Result r = RunGpugeek("plan " + config +
                              " --task pretrain --seq 2048 --batch 512 --gpus A100-SXM-80GB:128 --recipe megatron-2021 "
                              "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["recipe"]["features"], "serial-grad-reduce;unfused-attention");
  const nlohmann::json& best = j["candidates"][0];
  EXPECT_EQ(best["zero_stage"], 0);
  EXPECT_EQ(best["recompute"], "full");
  EXPECT_EQ(best["sequence_parallel"], false);
  std::string line;
  for (const nlohmann::json& arg : j["launch"]["megatron"]) line += arg.get<std::string>() + " ";
  EXPECT_NE(line.find("--attention-backend unfused "), std::string::npos) << line;
  EXPECT_NE(line.find("--recompute-granularity full "), std::string::npos) << line;
  for (const char* absent : {"--use-distributed-optimizer", "--sequence-parallel", "--overlap-grad-reduce"}) {
    EXPECT_EQ(line.find(absent), std::string::npos) << absent << " in " << line;
  }
}

// With no recipe flag the planner plans for current software (distributed optimizer or ZeRO-2/3, FlashAttention,
// the reduce behind the backward): 3.6B-39B then run fastest at TP1 with sharded states, layouts Megatron-LM of
// 2021 could not run; the same time model predicts MosaicML's measured FSDP runs at TP1 within 11%
// (StepTimeTest.MosaicMptFsdpOnA100). docs/planner.md, "Ranking against published layout tables".
TEST(PlanCommandTest, MegatronSc21Table1WithoutRecipeFlagsPlansCurrentSoftware) {
  const std::vector<int> reproduced = Sc21RowsReproduced("");
  EXPECT_EQ(reproduced, (std::vector<int>{2304, 10240, 12288, 16384, 20480, 25600}));
}

// Issue 13's example: a Llama-3.1-8B full fine-tune that torchtune runs in 18.9 GiB on one RTX 4090
// (torchtune README at 30b8519e, "Optimization flags" table; docs/measured/public-peaks.csv line 20) was
// declared impossible; with the recipe's levers named it plans on one 24 GB card.
TEST(PlanCommandTest, FeaturesFitTheEightBillionFullFineTuneOnOneRtx4090) {
  const std::string args =
      "llama/Meta-Llama-3.1-8B.json --task full --seq 2048 --batch 1 --gpus RTX-4090:1 --recipe torchtune "
      "--optimizer adamw-8bit --recompute full --json";
  Result r = Plan(args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["candidates"].empty()) << r.out;
  r = Plan(args + " --features paged-optimizer;optimizer-in-backward;chunked-loss;compile");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["recipe"]["features"], "paged-optimizer;optimizer-in-backward;chunked-loss;compile");
  ASSERT_EQ(j["candidates"].size(), 1u) << r.out;
  const double gib = j["candidates"][0]["memory_per_gpu_bytes"].get<double>() / (1 << 30);
  EXPECT_NEAR(gib, 18.9, 0.1 * 18.9);
  r = Plan(args + " --features bogus");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--features: unknown recipe feature 'bogus'"), std::string::npos) << r.out;
}

// Seven runs planned first and measured after on one H200 (docs/device-check.md, "held-out planner rows"):
// full fine-tunes within 3.1% (gemma-2-2b -3.04%), the two PEFT LoRA runs high by 9.0% and 10.9%.
TEST(PlanCommandTest, HeldOutH200PeaksStayWithinElevenPercent) {
  const std::string csv = std::string(GPUGEEK_SOURCE_DIR) + "/docs/measured/h200-heldout-2026-12-04.csv";
  const std::string models = std::string(GPUGEEK_SHARED_DIR) + "/models";
  const Result r = RunGpugeek("plan --compare-measured " + csv + " --models-dir " + models + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 7u);
  EXPECT_LE(j["median_abs_error"].get<double>(), 0.01);
  EXPECT_LE(j["worst_abs_error"].get<double>(), 0.11);
  for (const nlohmann::json& row : j["rows"]) {
    const bool lora = row["line"] == 7 || row["line"] == 13;  // Qwen2.5-7B and Phi-3.5-mini under PEFT
    const double limit = lora ? 0.11 : 0.035;
    EXPECT_LE(std::abs(row["error"].get<double>()), limit) << row.dump();
  }
}

// An architecture the reader does not know, planned from its safetensors headers (docs/planner.md "Any
// other architecture"): a directory, its index, and the file itself all give the exact count.
TEST(PlanCommandTest, UnknownArchitectureIsPlannedFromSafetensorsHeaders) {
  const std::string dir = ::testing::TempDir() + "plan_headers_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  // One BF16 [64, 32] embedding, one [96, 32] projection in layer 0, and a rotary buffer (left out).
  const std::string header =
      R"({"model.embed.weight":{"dtype":"BF16","shape":[64,32],"data_offsets":[0,4096]},)"
      R"("model.layers.0.qkv.weight":{"dtype":"BF16","shape":[96,32],"data_offsets":[4096,10240]},)"
      R"("model.layers.0.rotary.inv_freq":{"dtype":"F32","shape":[8],"data_offsets":[10240,10272]}})";
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << prefix << header << std::string(10272, '\0');
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"metadata":{"total_size":10272},"weight_map":{"model.embed.weight":"model.safetensors",)"
      << R"("model.layers.0.qkv.weight":"model.safetensors","model.layers.0.rotary.inv_freq":"model.safetensors"}})";
  std::ofstream(dir + "/config.json") << R"({"model_type":"acme_lm","hidden_size":32,"num_attention_heads":4})";
  for (const std::string& target : {dir, dir + "/model.safetensors.index.json", dir + "/model.safetensors"}) {
    SCOPED_TRACE(target);
    const Result r = RunGpugeek("plan " + target + " --task inference --seq 128 --gpus L40S:1 --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"]["model_type"], "acme_lm");
    EXPECT_EQ(j["model"]["parameters"], 64 * 32 + 96 * 32);
    EXPECT_NE(j["model"]["weights"].get<std::string>().find("from safetensors headers"), std::string::npos);
    EXPECT_NE(j["model"]["weights"].get<std::string>().find("rotary inv_freq"), std::string::npos);
    EXPECT_FALSE(j["candidates"].empty());
  }
  // Without the safetensors, the config alone is refused, naming the type.
  std::remove((dir + "/model.safetensors").c_str());
  std::remove((dir + "/model.safetensors.index.json").c_str());
  const Result refused = RunGpugeek("plan " + dir + "/config.json --task inference --gpus L40S:1");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find("'acme_lm'"), std::string::npos) << refused.out;
}

}  // namespace
}  // namespace gpugeek::cli
