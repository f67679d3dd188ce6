// Planner search benchmarks (issue 3: "planning Llama-3.1-405B over the whole catalog for 1 to
// 4,096 GPUs in under 200 ms"). Run: build/bench/workload_bench --benchmark_filter=Plan

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "hw/gpu_catalog.h"
#include "workload/model_config.h"
#include "workload/param_count.h"
#include "workload/planner.h"

namespace gpugeek::workload {
namespace {

// The shared models live beside the repository: <repo>/../shared/models. CMake compiles this file by
// its absolute path, so __FILE__ locates the repository without a compile definition.
std::string ModelsDir() {
  if (const char* dir = std::getenv("GPUGEEK_SHARED_DIR")) return std::string(dir) + "/models/";
  const std::string file = __FILE__;
  return file.substr(0, file.rfind("/bench/")) + "/../shared/models/";
}

ModelConfig Load(const std::string& file) {
  auto c = LoadModelConfig(ModelsDir() + file);
  if (!c.ok()) std::abort();
  return *c;
}

// Every disclosed GPU model of the built-in catalog, 4,096 of each.
std::vector<PoolEntry> WholeCatalog(int count) {
  std::vector<PoolEntry> pool;
  for (const hw::GpuModel& m : hw::GpuCatalog::Builtin().models()) {
    if (m.disclosed && m.memory_bytes > 0) pool.push_back(PoolEntry{&m, count, 2'000'000});
  }
  return pool;
}

void BM_Plan405bWholeCatalog(benchmark::State& state) {
  const ModelConfig llama = Load("llama/Meta-Llama-3.1-405B.json");
  const auto kind = static_cast<TaskKind>(state.range(0));
  Task task{kind, 8192, kind == TaskKind::kPretrain || kind == TaskKind::kFull ? 2048 : 16};
  task.tokens = 1e12;
  const std::vector<PoolEntry> pool = WholeCatalog(4096);
  int64_t layouts = 0;
  for (auto _ : state) {
    auto plan = MakePlan(llama, task, pool);
    if (!plan.ok()) std::abort();
    layouts = plan->layouts_evaluated;
    benchmark::DoNotOptimize(plan->candidates.data());
  }
  state.counters["layouts"] = static_cast<double>(layouts);
  state.counters["gpu_models"] = static_cast<double>(pool.size());
  state.SetLabel(std::string(TaskKindName(kind)));
}
BENCHMARK(BM_Plan405bWholeCatalog)
    ->Arg(static_cast<int>(TaskKind::kPretrain))
    ->Arg(static_cast<int>(TaskKind::kLora))
    ->Arg(static_cast<int>(TaskKind::kInference))
    ->Unit(benchmark::kMillisecond);

void BM_Plan70bLoraDefaultPool(benchmark::State& state) {
  const ModelConfig llama = Load("llama/Llama-2-70b-hf.json");
  const std::vector<PoolEntry> pool = DefaultPool(hw::GpuCatalog::Builtin());
  for (auto _ : state) {
    auto plan = MakePlan(llama, Task{TaskKind::kLora, 4096, 8}, pool);
    benchmark::DoNotOptimize(plan->candidates.data());
  }
}
BENCHMARK(BM_Plan70bLoraDefaultPool)->Unit(benchmark::kMillisecond);

void BM_ParseAndCount(benchmark::State& state) {
  for (auto _ : state) {
    ModelConfig c = Load("deepseek/DeepSeek-V3.json");
    benchmark::DoNotOptimize(CountParameters(c).total);
  }
}
BENCHMARK(BM_ParseAndCount)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpugeek::workload

BENCHMARK_MAIN();
