#include "hpo/experiment_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpugeek::hpo {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSpec = R"(
name: gpt-tune
objective: {metric: val_loss, direction: minimize}
space:
  - {name: lr, type: float, low: 1e-4, high: 3e-2, log: true}
  - {name: width, type: int, low: 32, high: 128}
  - {name: opt, type: categorical, choices: [adamw, "sgd's"]}
budget: {trials: 40, gpu_time: 2h}
parallelism: 4
sampler: tpe
pruner: {name: asha, min_resource: 2, max_resource: 20}
seed: 7
trial:
  resources: {accelerators: "A100-80GB:1"}
  run: python3 train.py --lr {{lr}} --width {{width}} --opt {{opt}}
)";

TEST(ExperimentSpecTest, ParsesEveryField) {
  auto spec = ParseExperimentSpec(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "gpt-tune");
  EXPECT_EQ(spec->metric, "val_loss");
  EXPECT_EQ(spec->direction, Direction::kMinimize);
  EXPECT_EQ(spec->space.size(), 3u);
  EXPECT_TRUE(spec->space.params()[0].log);
  EXPECT_EQ(spec->trials, 40);
  EXPECT_EQ(spec->max_gpu_seconds, 7200);
  EXPECT_EQ(spec->parallelism, 4);
  EXPECT_EQ(spec->sampler, "tpe");
  EXPECT_EQ(spec->pruner.name, "asha");
  EXPECT_EQ(spec->pruner.min_resource, 2);
  EXPECT_EQ(spec->pruner.max_resource, 20);
  EXPECT_EQ(spec->seed, 7u);
  EXPECT_EQ(spec->trial.name, "gpt-tune");
}

TEST(ExperimentSpecTest, TrialJobFillsPlaceholdersShellQuoted) {
  auto spec = ParseExperimentSpec(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const api::JobSpec job = TrialJob(*spec, 12, {0.001, 64, 1});
  EXPECT_EQ(job.name, "gpt-tune-t12");
  EXPECT_EQ(job.run, "python3 train.py --lr '0.001' --width '64' --opt 'sgd'\\''s'");
  const auto env = TrialEnv(*spec, "x-000004", 12, {0.001, 64, 1});
  EXPECT_EQ(env.at("GPUGEEK_TRIAL_ID"), "12");
  EXPECT_EQ(env.at("GPUGEEK_EXPERIMENT"), "x-000004");
  EXPECT_EQ(env.at("GPUGEEK_PARAMS"), R"({"lr":0.001,"opt":"sgd's","width":64})");
}

TEST(ExperimentSpecTest, ErrorsNameTheField) {
  auto err = [](const std::string& yaml) { return std::string(ParseExperimentSpec(yaml).status().message()); };
  const std::string base = "name: x\nspace: [{name: lr, type: float, low: 0.1, high: 1}]\n";
  const std::string trial = "trial:\n  resources: {accelerators: A100-80GB:1}\n  run: echo {{lr}}\n";
  EXPECT_THAT(err(base + trial), HasSubstr("budget: is required"));
  EXPECT_TRUE(ParseExperimentSpec(base + "budget: {trials: 5}\n" + trial).ok());
  // A parameter name that is not text (a byte the fuzz target found) is refused, not dumped into
  // GPUGEEK_PARAMS, where the JSON writer would throw.
  EXPECT_THAT(err("name: x\nspace: [{name: l\xf2, type: float, low: 0.1, high: 1}]\nbudget: {trials: 5}\n" + trial),
              HasSubstr("experiment spec: not UTF-8 text"));
  EXPECT_THAT(err(base + "budget: {trials: 0}\n" + trial), HasSubstr("budget.trials: must be a whole number 1..10000"));
  EXPECT_THAT(err(base + "budget: {trials: 5}\nparallelism: 6\n" + trial),
              HasSubstr("parallelism: 6 is more than budget.trials (5)"));
  EXPECT_THAT(err(base + "budget: {trials: 5, gpu_time: lots}\n" + trial),
              HasSubstr("budget.gpu_time: must be GPU time"));
  EXPECT_THAT(err(base + "budget: {trials: 5}\nsampler: bohb\n" + trial), HasSubstr("choose auto, random, tpe"));
  EXPECT_THAT(err(base + "budget: {trials: 5}\npruner: {name: asha, min_resource: 0}\n" + trial),
              HasSubstr("pruner.min_resource: must be a whole number 1.."));
  EXPECT_THAT(
      err(base + "budget: {trials: 5}\ntrial:\n  resources: {accelerators: A100-80GB:1}\n  run: echo {{depth}}\n"),
      HasSubstr("trial.run: {{depth}} names no parameter of the space"));
  EXPECT_THAT(
      err(base +
          "budget: {trials: 5}\ntrial: {run: echo, resources: {accelerators: A100-80GB:1}, env: {GPUGEEK_X: 1}}\n"),
      HasSubstr("trial.env.GPUGEEK_X"));
  EXPECT_THAT(err(base + "budget: {trials: 5}\nobjective: {direction: up}\n" + trial),
              HasSubstr("objective.direction: must be minimize or maximize"));
  EXPECT_THAT(err(base + "budget: {trials: 5}\nbudgets: 1\n" + trial), HasSubstr("budgets: is not a known field"));
  EXPECT_THAT(err("name: Bad_Name\n"), HasSubstr("name: must be 1-48 of a-z"));
  EXPECT_THAT(err("name: x\nspace: [{name: lr, type: float, low: 1, high: 0}]\nbudget: {trials: 1}\n" + trial),
              HasSubstr("low 1 must be below high 0"));
  EXPECT_THAT(err("name: x\nname: y\n"), HasSubstr("the key appears twice in the experiment spec"));
  EXPECT_THAT(err("name: x\n---\nname: y\n"), HasSubstr("submit one experiment per file"));
}

}  // namespace
}  // namespace gpugeek::hpo
