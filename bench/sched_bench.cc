// Placements per second of each policy on the trace's 1,213-node cluster and on a synthetic
// 20,000-node cluster, and the wall time of a whole 10-seed FGD run of the default workload.
//
//   ninja -C build-sched sched_bench && GPUGEEK_SHARED_DIR=../shared ./build-sched/bench/sched_bench
//
// Each iteration places one pod of the default workload (shuffled, seed 42) on a cluster that is
// reset to empty whenever 70 % of its GPUs are allocated, so timings cover the filled range.

#include <benchmark/benchmark.h>

#include <cstdlib>

#include "sched/framework.h"
#include "sim/experiment.h"
#include "sim/fgd_protocol.h"

namespace gpugeek {

// The shared data folder: $GPUGEEK_SHARED_DIR, else ../shared (run from the repository root).
const std::string kTraceDir =
    std::string(std::getenv("GPUGEEK_SHARED_DIR") ? std::getenv("GPUGEEK_SHARED_DIR") : "../shared") +
    "/traces/alibaba-gpu-v2023";

const sim::FgdInputs& Inputs() {
  static const auto* const kInputs = new sim::FgdInputs(*sim::LoadFgdInputs(kTraceDir, "default"));
  return *kInputs;
}

std::vector<sched::NodeSpec> Nodes(int64_t count) {
  std::vector<sched::NodeSpec> base = sim::ToNodeSpecs(Inputs().nodes);
  if (count <= static_cast<int64_t>(base.size())) return base;
  std::vector<sched::NodeSpec> out;
  for (int64_t i = 0; i < count; ++i) {  // synthetic: the trace's node mix, repeated
    sched::NodeSpec n = base[static_cast<size_t>(i) % base.size()];
    n.name = "syn-" + std::to_string(i);
    out.push_back(std::move(n));
  }
  return out;
}

void BM_Place(benchmark::State& state, const std::string& policy) {
  const std::vector<sched::NodeSpec> nodes = Nodes(state.range(0));
  const auto& in = Inputs();
  std::vector<sched::ResourceShape> shapes;
  for (const auto& p : in.pods) shapes.push_back(sim::ToShape(p));
  auto cluster = *sched::Cluster::Create(nodes);
  sched::FrameworkOptions o;
  o.policy = policy;
  o.seed = 42;
  o.context.typical_pods = sched::ComputeTypicalPods(shapes, 95, cluster);
  o.explain_unschedulable = false;
  const std::vector<size_t> order = sim::FgdArrivalOrder(in.pods, 42, 0, cluster.total_gpu_milli());
  std::unique_ptr<sched::Framework> fw;
  sched::AcceptAllBinder binder;
  sched::Request r;
  r.alternatives.resize(1);
  size_t next = 0;
  std::vector<sched::Placement> placed;
  auto reset = [&] {
    cluster = *sched::Cluster::Create(nodes);
    fw = *sched::Framework::Create(o, &cluster);
  };
  reset();
  for (auto _ : state) {
    r.alternatives[0] = shapes[order[next++ % order.size()]];
    auto d = fw->Schedule(r, binder);
    benchmark::DoNotOptimize(d);
    if (cluster.allocated_gpu_milli() * 10 > cluster.total_gpu_milli() * 7) {
      state.PauseTiming();
      reset();
      state.ResumeTiming();
    }
  }
  state.counters["placements/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_FgdDefault10Seeds(benchmark::State& state) {
  sim::FgdExperimentOptions o;
  o.trace_dir = kTraceDir;
  o.workloads = {"default"};
  o.policies = {"FGD"};
  for (uint64_t s = 42; s <= 51; ++s) o.seeds.push_back(s);
  o.jobs = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(sim::RunFgdExperiment(o));
}

}  // namespace gpugeek

using gpugeek::BM_FgdDefault10Seeds;
using gpugeek::BM_Place;

#define PLACE(policy) \
  BENCHMARK_CAPTURE(BM_Place, policy, std::string(#policy))->Arg(1213)->Arg(20000)->Unit(benchmark::kMicrosecond)
PLACE(Random);
PLACE(DotProd);
PLACE(GpuClustering);
PLACE(GpuPacking);
PLACE(BestFit);
PLACE(FGD);
PLACE(FGDFit);
BENCHMARK(BM_FgdDefault10Seeds)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_MAIN();
