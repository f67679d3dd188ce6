#pragma once
// Measured training peaks, to compare the planner with real runs (`gpugeek plan --compare-measured FILE`).
//
// A CSV file, one run per line after a header line naming the columns (any order; unknown columns are
// refused; `#` starts a comment line; no quoted fields, so no commas inside values):
//   model          config.json path (relative: to the models directory given, else to the CSV's folder)
//   task           full | pretrain | lora | qlora
//   seq            tokens per sequence
//   batch          global batch in sequences
//   micro_batch    sequences per GPU per forward pass (optional; empty: the planner chooses)
//   gpu            catalog GPU the run used (e.g. H200-SXM-141GB); the plan is made for one of it
//   recipe         a preset (training_memory.h RecipePreset); empty: auto
//   precision, optimizer, recompute   overrides of the preset; empty: the preset's (recompute: auto)
//   measured_bytes the measured peak in bytes (e.g. torch.cuda.max_memory_allocated() + CUDA context)
//   source         where the figure comes from (free text)
// Required: model, task, seq, batch, gpu, measured_bytes.
//
// Errors: InvalidArgument naming the line and the column ("line 3, column seq: 'x' is not a positive
// integer"). At most kMaxMeasuredRows rows.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/gpu_catalog.h"
#include "workload/planner.h"

namespace gpugeek::workload {

inline constexpr size_t kMaxMeasuredRows = 10'000;

struct MeasuredRun {
  int line = 0;             // in the file, 1-based
  std::string model;        // as written
  Task task;                // kind, seq, batch, recipe
  int64_t micro_batch = 0;  // 0: the planner chooses
  std::string gpu;          // catalog name
  double measured_bytes = 0;
  std::string source;
};

absl::StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view csv);

struct MeasuredComparison {
  uint64_t planned_bytes = 0;  // the best one-GPU plan's memory per GPU
  std::string plan;            // its summary, e.g. "1 x H200-SXM-141GB TP1 PP1 DP1 recompute=full"
  double error = 0;            // (planned - measured) / measured
};
// Plans `run` on one of its GPU (at its micro-batch, with no safety margin: the estimate, not the
// admission, is compared) and compares. NotFound when the GPU is not in `catalog`;
// FailedPrecondition when no one-GPU plan fits (the planner says the run cannot happen).
absl::StatusOr<MeasuredComparison> CompareMeasured(const ModelConfig& config, const MeasuredRun& run,
                                                   const hw::GpuCatalog& catalog);

}  // namespace gpugeek::workload
