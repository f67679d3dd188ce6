// Durable job submissions per second on the embedded SQLite store (WAL, synchronous=FULL: every
// CreateJob is fsync'ed before it returns). Goal (issue: control plane): >= 2,000/s; Slurm's
// documented sustained submission rate is 500 jobs/s (Slurm high-throughput guide).
//
//   build/bench/store_bench --benchmark_filter=Submit

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "store/sqlite_store.h"

namespace gpugeek::store {
namespace {

void BM_DurableSubmit(benchmark::State& state) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_store_bench_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = SqliteStore::Open({.path = (dir / "bench.db").string()});
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  JobRecord job;
  job.tenant = "bench";
  job.name = "train";
  job.spec_yaml = "name: train\nresources: {accelerators: H100-SXM-80GB:8}\nrun: python train.py\n";
  int64_t n = 0;
  for (auto _ : state) {
    job.id = "j-" + std::to_string(n++);
    auto r = (*store)->CreateJob(job);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_DurableSubmit)->Unit(benchmark::kMicrosecond)->MinTime(2.0)->UseRealTime();

}  // namespace
}  // namespace gpugeek::store

BENCHMARK_MAIN();
