// The control plane's periodic work on a large pool, without HTTP (FakeClock, SQLite store):
//
//   build/bench/pool_bench
//
// BM_SchedulingPass: one Reconcile() with 1,000 nodes (8 x H100 each, half the GPUs taken by 500
// running 4-GPU jobs) and 1,000 jobs queued that fit nowhere (MI300X, 80 distinct shapes), so the
// pass has to decide every one of them. The server runs a pass every 100 ms: the pass must stay far under that. A job
// that did not fit is not tried again until capacity changes (BM_SchedulingPassAfterCapacityChange: the pass that
// follows a change and retries all 1,000). BM_MetricsScrape: GET /metrics's text for the same pool (the collectors read
// the pool, the nodes and the queue). Prometheus scrapes every 15 s by default (deploy/prometheus/prometheus.yml).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "common/fake_clock.h"
#include "controlplane/control_plane.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"
#include "metrics/registry.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane {
namespace {

struct Pool {
  FakeClock clock{TimePoint(std::chrono::seconds(1'800'000'000))};
  std::unique_ptr<store::SqliteStore> store;
  metrics::Registry registry;
  std::unique_ptr<ControlPlane> cp;
};

Pool& LargePool() {
  static Pool* pool = [] {
    auto* p = new Pool;
    const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_pool_bench_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    p->store = *store::SqliteStore::Open({.path = (dir / "gpugeek.db").string(), .clock = &p->clock});
    p->cp = *ControlPlane::Create(
        {.store = p->store.get(), .clock = &p->clock, .data_dir = (dir / "data").string(), .metrics = &p->registry});
    const auto spec = *hw::ParseEmulateSpec("8xH100-SXM-80GB");
    for (int i = 0; i < 1000; ++i) {
      const std::string name = "node-" + std::to_string(i);
      api::Registration r;
      r.node = name;
      r.address = "10.0.0.1";
      r.inventory = hw::BuildEmulatedInventory(spec, name, {name, 128, uint64_t{2} << 40, 2, ""});
      if (!p->cp->Register(r).ok()) abort();
    }
    for (int i = 0; i < 500; ++i) {
      (void)p->cp->Submit({.spec_yaml = "name: run\nresources: {accelerators: H100-SXM-80GB:4}\nrun: x\n"});
    }
    p->cp->Reconcile();  // places the 500
    for (int i = 0; i < 1000; ++i) {
      // 80 distinct shapes (GPUs x CPUs), as a queue of sweeps from several users looks.
      (void)p->cp->Submit(
          {.spec_yaml = fmt::format("name: waits\nresources: {{accelerators: MI300X:{}, cpus: {}}}\nrun: x\n",
                                    1 + i % 8, 1 + i % 10)});
    }
    p->cp->Reconcile();
    return p;
  }();
  return *pool;
}

void BM_SchedulingPass(benchmark::State& state) {
  Pool& pool = LargePool();
  for (auto _ : state) pool.cp->Reconcile();
  state.counters["queued"] = 1000;
  state.counters["nodes"] = 1000;
}
BENCHMARK(BM_SchedulingPass)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// The same pass right after capacity changed (a node uncordoned): the snapshot is rebuilt and every
// queued job is tried again.
void BM_SchedulingPassAfterCapacityChange(benchmark::State& state) {
  Pool& pool = LargePool();
  for (auto _ : state) {
    state.PauseTiming();
    (void)pool.cp->SetCordoned("node-0", false);
    state.ResumeTiming();
    pool.cp->Reconcile();
  }
}
BENCHMARK(BM_SchedulingPassAfterCapacityChange)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_MetricsScrape(benchmark::State& state) {
  Pool& pool = LargePool();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = pool.registry.Render();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsScrape)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace gpugeek::controlplane

BENCHMARK_MAIN();
