#pragma once
// A checkpoint's parameters as its safetensors headers state them: the exact count and bytes per
// dtype, for any architecture, without reading tensor data.
//
// Input: a `*.safetensors` file, a `model.safetensors.index.json` (its `weight_map` names the shard
// files beside it; `metadata.total_size` is their tensor bytes), or a directory holding either.
// Every shard's header is read (models/safetensors.h, the header only); tensors that are not parameters are
// left out and listed with the reason: rotary `inv_freq` buffers, causal-mask buffers (`attn.bias`
// of rank >= 3, `masked_bias`), `position_ids`, and quantization state (fp8 `weight_scale_inv` /
// `*_scale`, GPTQ / AWQ `scales` / `qzeros` / `g_idx`, bitsandbytes `absmax` / `quant_map` /
// `quant_state`). Packed quantized weights (`qweight`) hold several parameters per stored element:
// they are counted as stored and the summary is then marked not exact. This is the caution of
// ../shared/models/INDEX.md ("Do not derive parameter counts from checkpoint byte totals") turned
// into rules.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workload/model_config.h"

namespace gpugeek::workload {

struct WeightsSummary {
  std::string
      source;  // what was read, e.g. "safetensors headers of 4 files listed by DIR/model.safetensors.index.json"
  bool exact = false;  // true: `parameters` is the exact sum of the parameter tensors' shapes
  int64_t files = 0;
  int64_t tensors = 0;     // parameter tensors
  int64_t parameters = 0;  // elements of the parameter tensors
  uint64_t bytes = 0;      // bytes of the parameter tensors as stored
  std::map<std::string, int64_t> parameters_by_dtype;
  std::map<std::string, uint64_t> bytes_by_dtype;
  int64_t excluded_tensors = 0;  // non-parameter tensors left out
  uint64_t excluded_bytes = 0;
  std::vector<std::string> exclusions;    // one line per reason: "64 x rotary inv_freq buffer (...)"
  std::vector<HeaderTensorGroup> groups;  // parameter tensors grouped by name pattern and shape
  int64_t layers = 0;                     // distinct layer indices among the tensor names
  uint64_t index_total_size = 0;          // the index's metadata.total_size, 0 when none was read
};

// Reads the headers under `path` (see the file comment). NotFound when nothing safetensors-shaped is
// there; InvalidArgument for a malformed header or index (the message names the file and field).
// When an index names shard files that are absent, returns the index's view: `exact` false,
// `parameters` estimated as total_size / 2 (16-bit weights), and the reason in `source`.
absl::StatusOr<WeightsSummary> SummarizeSafetensors(const std::string& path);

// A human summary: "8,030,261,248 parameters (BF16 8,030,261,248) in 291 tensors from ...; left out: ...".
std::string DescribeWeights(const WeightsSummary& w);

}  // namespace gpugeek::workload
