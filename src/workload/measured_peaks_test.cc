// The measured-runs CSV reader: values, and errors that name the line and the column.

#include "workload/measured_peaks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::workload {
namespace {

using testing::HasSubstr;

std::string Error(std::string_view csv) {
  auto r = ParseMeasuredRuns(csv);
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : std::string(r.status().message());
}

TEST(MeasuredPeaksTest, ReadsColumnsInAnyOrderWithRecipeOverrides) {
  auto runs = ParseMeasuredRuns(
      "# a comment\n"
      "measured_bytes, gpu, model, task, seq, batch, recipe, precision, optimizer, recompute, micro_batch\r\n"
      "\n"
      "1.5e10, H200, llama.json, full, 2048, 8, torchtune, , adamw-8bit, none, 2\n"
      "2e9, H100, qwen.json, lora, 512, 1, , , , auto,\n");
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  const MeasuredRun& a = (*runs)[0];
  EXPECT_EQ(a.line, 4);
  EXPECT_EQ(a.model, "llama.json");
  EXPECT_EQ(a.task.kind, TaskKind::kFull);
  EXPECT_EQ(a.task.seq, 2048);
  EXPECT_EQ(a.task.batch, 8);
  EXPECT_EQ(a.micro_batch, 2);
  EXPECT_EQ(a.measured_bytes, 1.5e10);
  EXPECT_EQ(a.task.recipe.framework, Framework::kHuggingFace);  // torchtune's
  EXPECT_EQ(a.task.recipe.precision, Precision::kPureBf16);     // torchtune's, not overridden
  EXPECT_EQ(a.task.recipe.optimizer, Optimizer::kAdamW8bit);    // overridden
  EXPECT_EQ(a.task.recipe.recompute, Recompute::kNone);         // overridden
  const MeasuredRun& b = (*runs)[1];
  EXPECT_EQ(b.task.recipe.framework, Framework::kAuto);
  EXPECT_FALSE(b.task.recipe.recompute.has_value());
  EXPECT_EQ(b.micro_batch, 0);
}

TEST(MeasuredPeaksTest, ErrorsNameTheLineAndColumn) {
  const std::string head = "model,task,seq,batch,gpu,measured_bytes\n";
  EXPECT_THAT(Error(head + "m.json,full,x,8,H200,1e9\n"),
              HasSubstr("line 2, column seq: 'x' is not a positive integer"));
  EXPECT_THAT(Error(head + "m.json,full,0,8,H200,1e9\n"), HasSubstr("line 2, column seq: '0'"));
  EXPECT_THAT(Error(head + "m.json,inference,1,8,H200,1e9\n"), HasSubstr("line 2, column task: 'inference'"));
  EXPECT_THAT(Error(head + "m.json,full,1,8,H200,-3\n"), HasSubstr("line 2, column measured_bytes: '-3'"));
  EXPECT_THAT(Error(head + "m.json,full,1,8,H200,nan\n"), HasSubstr("column measured_bytes: 'nan'"));
  EXPECT_THAT(Error(head + "m.json,full,1,8,H200\n"), HasSubstr("line 2: 5 fields, the header has 6"));
  EXPECT_THAT(Error(head + ",full,1,8,H200,1\n"), HasSubstr("column model: empty"));
  EXPECT_THAT(Error("model,task,seq,batch,gpu,measured_bytes,colour\n"), HasSubstr("line 1, column colour: unknown"));
  EXPECT_THAT(Error("model,task,seq,batch,gpu\n"), HasSubstr("column measured_bytes: missing from the header"));
  EXPECT_THAT(Error("model,model,task,seq,batch,gpu,measured_bytes\n"), HasSubstr("column model: named twice"));
  EXPECT_THAT(Error("model,task,seq,batch,gpu,measured_bytes,recipe\nm,full,1,1,H200,1,sky\n"),
              HasSubstr("line 2, column recipe: unknown recipe 'sky'"));
  EXPECT_THAT(Error("# only a comment\n"), HasSubstr("no header line"));
}

TEST(MeasuredPeaksTest, ReadsLayoutColumnsAndDocumentedMisses) {
  auto runs = ParseMeasuredRuns(
      "model,task,seq,batch,micro_batch,gpu,gpus,tp,zero,offload,recipe,framework,features,lora_rank,lora_targets,"
      "measures,measured_bytes,expected_error,reason\n"
      "a.json,lora,2048,16,2,A100,8,2,3,optimizer+params,torchtune,hf,chunked-loss;compile,8,q_proj; v_proj,active,"
      "1e10,-0.2,compile not modelled\n"
      "b.json,inference,1024,1,,A10G,2,2,,,,,,,,weights,1.6e10,,\n"
      "c.json,full,512,1,,H200,,,,,,,,,,,1e9,,\n");
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u);
  const MeasuredRun& a = (*runs)[0];
  EXPECT_TRUE(a.own_layout);
  EXPECT_EQ(a.gpus, 8);
  EXPECT_EQ(a.tp, 2);
  EXPECT_EQ(a.zero_stage, 3);
  EXPECT_EQ(a.task.recipe.offload, Offload::kOptimizerAndParams);
  EXPECT_EQ(a.task.recipe.framework, Framework::kHuggingFace);
  EXPECT_TRUE(a.task.recipe.features.chunked_loss && a.task.recipe.features.compile);
  EXPECT_EQ(a.task.lora.rank, 8);
  EXPECT_EQ(a.task.lora.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(a.measures, Measure::kActive);
  EXPECT_EQ(a.expected_error, -0.2);
  EXPECT_EQ(a.reason, "compile not modelled");
  const MeasuredRun& b = (*runs)[1];
  EXPECT_EQ(b.task.kind, TaskKind::kInference);
  EXPECT_EQ(b.measures, Measure::kWeights);
  const MeasuredRun& c = (*runs)[2];
  EXPECT_FALSE(c.own_layout);
  EXPECT_EQ(c.measures, Measure::kAllocatedWithContext);
  EXPECT_FALSE(c.expected_error.has_value());
  // A documented miss is checked against its expected error.
  EXPECT_TRUE(MeasuredWithinTolerance(a, MeasuredComparison{0, "", -0.25}, 0.10));
  EXPECT_FALSE(MeasuredWithinTolerance(a, MeasuredComparison{0, "", 0.0}, 0.10));
  EXPECT_TRUE(MeasuredWithinTolerance(c, MeasuredComparison{0, "", 0.09}, 0.10));
  EXPECT_FALSE(MeasuredWithinTolerance(c, MeasuredComparison{0, "", -0.11}, 0.10));
}

TEST(MeasuredPeaksTest, LayoutColumnErrorsNameTheLineAndColumn) {
  const std::string head = "model,task,seq,batch,micro_batch,gpu,gpus,tp,zero,features,measures,measured_bytes\n";
  EXPECT_THAT(Error(head + "m,full,1,8,1,H200,0,,,,,1\n"), HasSubstr("line 2, column gpus: '0'"));
  EXPECT_THAT(Error(head + "m,full,1,8,1,H200,8,3,,,,1\n"), HasSubstr("column tp: 3 does not divide the 8 GPUs"));
  EXPECT_THAT(Error(head + "m,full,1,8,1,H200,8,,4,,,1\n"), HasSubstr("column zero: '4' is not a ZeRO stage"));
  EXPECT_THAT(Error(head + "m,full,1,8,1,H200,,,,fp8,,1\n"), HasSubstr("column features: unknown recipe feature"));
  EXPECT_THAT(Error(head + "m,full,1,8,1,H200,,,,,peak,1\n"), HasSubstr("column measures: unknown measure 'peak'"));
  EXPECT_THAT(Error(head + "m,full,1,8,,H200,2,,,,,1\n"), HasSubstr("column micro_batch: empty: a row with its own"));
  EXPECT_THAT(Error(head + "m,inference,1,8,1,H200,,,,,,1\n"), HasSubstr("column task: 'inference' is not a training"));
  EXPECT_THAT(Error(head + "m,full,1,8,1,H200,,,,,weights,1\n"), HasSubstr("measures=weights is a serving figure"));
  const std::string miss = "model,task,seq,batch,gpu,measured_bytes,expected_error,reason\n";
  EXPECT_THAT(Error(miss + "m,full,1,8,H200,1,-0.3,\n"), HasSubstr("line 2, column reason: empty"));
  EXPECT_THAT(Error(miss + "m,full,1,8,H200,1,x,why\n"), HasSubstr("column expected_error: 'x' is not a number"));
  EXPECT_THAT(Error(miss + "m,full,1,8,H200,1,-1,why\n"), HasSubstr("column expected_error: -1 is not a fraction"));
}

TEST(MeasuredPeaksTest, UnknownGpuIsNotFound) {
  auto runs = ParseMeasuredRuns("model,task,seq,batch,gpu,measured_bytes\nm.json,full,1,1,TPU-v9,1e9\n");
  ASSERT_TRUE(runs.ok());
  ModelConfig c;
  auto r = CompareMeasured(c, (*runs)[0], hw::GpuCatalog::Builtin());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("line 2: no GPU 'TPU-v9' in the catalog"));
}

}  // namespace
}  // namespace gpugeek::workload
