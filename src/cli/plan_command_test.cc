// End-to-end tests of `gpugeek plan` recipes: run the built binary and read what it prints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

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
                                         {"offload", "none"}}));
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

}  // namespace
}  // namespace gpugeek::cli
