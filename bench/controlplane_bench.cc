// Control-plane benchmarks over loopback HTTP against a real server (SQLite in WAL mode, every
// acknowledged submission fsync'ed; group commit batches concurrent ones).
//
//   build/bench/controlplane_bench
//
// BM_DurableSubmit/threads:N: durable submissions per second with N concurrent clients.
// Goal (issue: control plane): >= 2,000/s. Anchor: Slurm documents a sustained 500 jobs/s
// (slurm.schedmd.com/high_throughput.html).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "controlplane/server.h"
#include "http/client.h"

namespace gpugeek::controlplane {
namespace {

ControlPlaneServer& Server() {
  static ControlPlaneServer* server = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_cp_bench_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    ServerOptions o;
    o.port = 0;
    o.data_dir = dir.string();
    o.reconcile_interval = std::chrono::seconds(3600);  // measure admission + durability alone
    auto s = ControlPlaneServer::Start(o);
    if (!s.ok()) abort();
    return s->release();
  }();
  return *server;
}

void BM_DurableSubmit(benchmark::State& state) {
  auto client = http::Client::Create({.base_url = Server().url()});
  const nlohmann::json body = {
      {"spec_yaml", "name: bench\nresources: {accelerators: H100-SXM-80GB:8}\nrun: python train.py\n"}};
  for (auto _ : state) {
    auto r = (*client)->Post("/v1/jobs", body);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DurableSubmit)->ThreadRange(1, 16)->UseRealTime()->MinTime(2.0)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpugeek::controlplane

BENCHMARK_MAIN();
