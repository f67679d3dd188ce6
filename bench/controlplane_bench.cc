// Control-plane benchmarks over loopback HTTP against a real server (SQLite in WAL mode, every
// acknowledged submission fsync'ed; group commit batches concurrent ones).
//
//   build/bench/controlplane_bench
//
// BM_DurableSubmit/threads:N: durable submissions per second with N concurrent clients.
// Goal (issue: control plane): >= 2,000/s. Anchor: Slurm documents a sustained 500 jobs/s
// (slurm.schedmd.com/high_throughput.html).
//
// BM_SubmitToRunning: with 1,000 jobs queued (asking for GPUs the pool lacks, so every scheduling
// pass scans them), the time from a submission's acknowledgement to its job being RUNNING on a real
// in-process agent (emulated 8 x H100, 1 s heartbeats), over 40 jobs: p50 and p99 in ms.
// Goal: p99 < 1.5 s.
//
// BM_AdmissionFit/N: the per-submission capacity check on a pool of N nodes (admission_fit.h).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "agent/agent.h"
#include "controlplane/admission_fit.h"
#include "controlplane/server.h"
#include "http/client.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

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
  auto client = http::Client::Create({.base_url = Server().url(), .bearer_token = Server().admin_token()});
  const nlohmann::json body = {
      {"spec_yaml", "name: bench\nresources: {accelerators: H100-SXM-80GB:8}\nrun: python train.py\n"}};
  for (auto _ : state) {
    auto r = (*client)->Post("/v1/jobs", body);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DurableSubmit)->ThreadRange(1, 16)->UseRealTime()->MinTime(2.0)->Unit(benchmark::kMicrosecond);

void BM_SubmitToRunning(benchmark::State& state) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_latency_bench_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ServerOptions o;
  o.port = 0;
  o.data_dir = (dir / "server").string();
  auto server = ControlPlaneServer::Start(o);
  if (!server.ok()) return state.SkipWithError(server.status().ToString().c_str());
  // Queued before the node registers: admission refuses what no registered node could ever host, and
  // admits such jobs only while the pool is empty.
  {
    auto c = *http::Client::Create({.base_url = (*server)->url(), .bearer_token = (*server)->admin_token()});
    for (int i = 0; i < 1000; ++i) {
      (void)c->Post("/v1/jobs", {{"spec_yaml", "name: queued\nresources: {accelerators: MI300X:8}\nrun: true\n"}});
    }
  }
  auto discovery = hw::EmulatedDiscovery::Create({.spec = "8xH100-SXM-80GB"});
  agent::AgentOptions ao;
  ao.server_url = (*server)->url();
  ao.node = "bench-node";
  ao.discovery = discovery->get();
  ao.data_dir = (dir / "agent").string();
  ao.cgroup_limits = false;
  auto join = (*server)->nodes().LocalJoinToken();
  if (!join.ok()) return state.SkipWithError(join.status().ToString().c_str());
  ao.join_token = *join;
  auto agent = agent::Agent::Create(ao);
  if (!agent.ok()) return state.SkipWithError(agent.status().ToString().c_str());
  std::jthread agent_thread([a = agent->get()](std::stop_token stop) { (void)a->Run(stop); });
  auto client = *http::Client::Create({.base_url = (*server)->url(), .bearer_token = (*server)->admin_token()});
  std::vector<double> ms;
  for (auto _ : state) {
    for (int i = 0; i < 40; ++i) {
      auto job = client->Post("/v1/jobs", {{"spec_yaml",
                                            "name: probe\nresources: {accelerators: H100-SXM-80GB:1}\n"
                                            "run: sleep 0.3\n"}});
      const auto acked = std::chrono::steady_clock::now();
      if (!job.ok()) return state.SkipWithError(job.status().ToString().c_str());
      const std::string id = (*job)["id"];
      for (;;) {
        auto j = client->Get("/v1/jobs/" + id);
        if (j.ok() && ((*j)["state"] == "RUNNING" || (*j)["state"] == "SUCCEEDED")) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - acked).count());
    }
  }
  std::sort(ms.begin(), ms.end());
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  state.counters["max_ms"] = ms.back();
  (*agent)->Stop();
  agent_thread.join();
  (*server)->Stop();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SubmitToRunning)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// BM_AdmissionFit/N: admission's capacity check (admission_fit.h) for a 2-node gang of 8 x H100 on a pool
// of N registered 8 x H100 nodes: the scheduler's filters on the empty pool, per submission.
void BM_AdmissionFit(benchmark::State& state) {
  Snapshot snap;
  auto inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("8xH100-SXM-80GB"), "n",
                                              {"n", 64, uint64_t{512} << 30, 2, "bench"});
  for (int64_t i = 0; i < state.range(0); ++i) {
    auto r = std::make_shared<api::Registration>();
    r->node = fmt::format("node-{}", i);
    r->inventory = inventory;
    snap.nodes[r->node].registration = r;
  }
  sched::Request request;
  request.id = "bench";
  request.gang_size = 2;
  request.distinct_nodes = true;
  request.alternatives = {{.cpu_milli = 8000,
                           .memory_bytes = uint64_t{64} << 30,
                           .num_gpus = 8,
                           .gpu_milli = 1000,
                           .allowed_models = {"H100-SXM-80GB"}}};
  AdmissionFit fit;
  for (auto _ : state) {
    absl::Status s = fit.Check({request}, snap);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdmissionFit)->Arg(10)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpugeek::controlplane

BENCHMARK_MAIN();
