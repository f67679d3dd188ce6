// libFuzzer target for the config.json reader: any input must give a config or an error, never a
// crash, a sanitizer report or a hang; accepted configs must also survive counting, memory and
// FLOP estimates (the reader's bounds keep that arithmetic in range).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "workload/flops.h"
#include "workload/inference_memory.h"
#include "workload/model_config.h"
#include "workload/param_count.h"
#include "workload/training_memory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::workload;
  auto config = ParseModelConfig(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!config.ok()) return 0;
  const ParamCounts n = CountParameters(*config);
  if (n.total < 0 || n.active < 0 || n.active > n.total) __builtin_trap();
  InferenceOptions io;
  io.layout.tp = 2;
  (void)InferenceMemory(*config, io);
  (void)KvBytesPerToken(*config, 2, 8);
  TrainingOptions to;
  to.layout.pp = 2;
  (void)EstimateTrainingMemory(*config, to);
  (void)ComputeFlopsPerToken(*config, 4096, Recompute::kFull);
  return 0;
}
