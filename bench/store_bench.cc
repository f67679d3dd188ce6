// Durable job submissions per second on each store backend:
//   - SQLite (WAL, synchronous=FULL: every CreateJob is fsync'ed before it returns);
//   - PostgreSQL 15 at its defaults (fsync on, synchronous_commit on: every commit's WAL record is flushed
//     before it returns), on the server GPUGEEK_BENCH_POSTGRES_URL names (bench/store_backends.sh starts
//     one; the benchmark is skipped without it).
// One submitter, and 8 submitting at once (the API's group commit batches concurrent submissions in
// CreateJobs; here each thread calls CreateJob, so PostgreSQL's pool and the server's own group commit
// show). Goal (issue: control plane): >= 2,000/s; Slurm's documented sustained submission rate is
// 500 jobs/s (Slurm high-throughput guide).
//
//   bash bench/store_backends.sh        (both backends, one run)
//   build/bench/store_bench --benchmark_filter=Sqlite

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace gpugeek::store {
namespace {

JobRecord BenchJob() {
  JobRecord job;
  job.tenant = "bench";
  job.name = "train";
  job.spec_yaml = "name: train\nresources: {accelerators: H100-SXM-80GB:8}\nrun: python train.py\n";
  return job;
}

// One store per benchmark run, shared by its threads.
std::unique_ptr<Store> g_store;
std::atomic<int64_t> g_next{0};

void OpenSqlite(benchmark::State& state) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_store_bench_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = SqliteStore::Open({.path = (dir / "bench.db").string()});
  if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
  g_store = *std::move(store);
}

void OpenPostgres(benchmark::State& state) {
  const char* url = std::getenv("GPUGEEK_BENCH_POSTGRES_URL");
  if (url == nullptr || *url == '\0') return state.SkipWithError("GPUGEEK_BENCH_POSTGRES_URL is not set");
  auto store = PostgresStore::Open({.url = url, .connections = 8});
  if (!store.ok()) return state.SkipWithError(store.status().ToString().c_str());
  g_store = *std::move(store);
}

void Submit(benchmark::State& state, void (*open)(benchmark::State&)) {
  if (state.thread_index() == 0) open(state);  // ids keep counting across runs: the PostgreSQL rows stay
  // Threads start their loops together (Google Benchmark's barrier), after thread 0 opened the store.
  JobRecord job = BenchJob();
  const std::string prefix = "j-" + std::to_string(::getpid()) + "-" + std::to_string(state.thread_index()) + "-";
  for (auto _ : state) {
    if (g_store == nullptr) break;
    job.id = prefix + std::to_string(g_next++);
    auto r = g_store->CreateJob(job);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    g_store.reset();
    std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                ("gpugeek_store_bench_" + std::to_string(::getpid())));
  }
}

void BM_DurableSubmitSqlite(benchmark::State& state) { Submit(state, OpenSqlite); }
void BM_DurableSubmitPostgres(benchmark::State& state) { Submit(state, OpenPostgres); }
BENCHMARK(BM_DurableSubmitSqlite)->Unit(benchmark::kMicrosecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_DurableSubmitSqlite)->Unit(benchmark::kMicrosecond)->MinTime(2.0)->UseRealTime()->Threads(8);
BENCHMARK(BM_DurableSubmitPostgres)->Unit(benchmark::kMicrosecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_DurableSubmitPostgres)->Unit(benchmark::kMicrosecond)->MinTime(2.0)->UseRealTime()->Threads(8);

}  // namespace
}  // namespace gpugeek::store

BENCHMARK_MAIN();
