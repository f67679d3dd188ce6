#include "sim/experiment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "common/fake_clock.h"
#include "common/status_macros.h"
#include "sched/framework.h"
#include "sched/registry.h"
#include "sim/fgd_protocol.h"
#include "sim/parallel.h"
#include "sim/simulator.h"

namespace gpugeek::sim {

absl::StatusOr<FgdInputs> LoadFgdInputs(const std::string& trace_dir, const std::string& workload) {
  FgdInputs in;
  in.workload = workload;
  ASSIGN_OR_RETURN(const std::string file, WorkloadFileName(workload));
  ASSIGN_OR_RETURN(in.nodes, ReadNodeCsv(fmt::format("{}/csv/{}", trace_dir, kFgdNodeFile)));
  ASSIGN_OR_RETURN(in.pods, ReadPodCsv(fmt::format("{}/csv/{}", trace_dir, file)));
  return in;
}

absl::StatusOr<FgdRunResult> RunFgdOnce(const FgdInputs& inputs, const std::string& policy, uint64_t seed,
                                        double tune_ratio) {
  ASSIGN_OR_RETURN(sched::Cluster cluster, sched::Cluster::Create(ToNodeSpecs(inputs.nodes)));
  std::vector<sched::ResourceShape> shapes;
  shapes.reserve(inputs.pods.size());
  for (const TracePod& p : inputs.pods) shapes.push_back(ToShape(p));
  // Typical pods of the original (un-inflated) workload, top specs covering 95 % of pods.
  std::vector<sched::TypicalPod> typical = sched::ComputeTypicalPods(shapes, 95, cluster);

  sched::FrameworkOptions options;
  options.policy = policy;
  options.seed = seed;
  options.context.typical_pods = typical;
  options.explain_unschedulable = false;  // failures are counted, not explained, in bulk runs
  ASSIGN_OR_RETURN(std::unique_ptr<sched::Framework> framework, sched::Framework::Create(options, &cluster));

  const std::vector<size_t> order = FgdArrivalOrder(inputs.pods, seed, tune_ratio, cluster.total_gpu_milli());
  std::vector<SimPod> pods;
  pods.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    // One pod per virtual second; the protocol has no departures.
    pods.push_back(SimPod{inputs.pods[order[i]].name, shapes[order[i]], std::chrono::seconds(i), std::nullopt});
  }
  FgdRecorder recorder(cluster, std::move(typical));
  FakeClock clock;
  Simulator simulator(*framework, clock);
  RETURN_IF_ERROR(simulator.Run(pods, [&](const SimEvent& e) {
    recorder.Record(cluster, pods[e.pod].shape.num_gpus * int64_t{pods[e.pod].shape.gpu_milli}, *e.decision);
  }));
  FgdRunResult r;
  r.workload = inputs.workload;
  r.policy = framework->policy();
  r.seed = seed;
  r.curves = recorder.Finish();
  return r;
}

absl::StatusOr<std::vector<FgdRunResult>> RunFgdExperiment(const FgdExperimentOptions& options) {
  for (const std::string& p : options.policies) {
    if (sched::Registry::Builtin().FindPolicy(p) == nullptr) {
      return absl::NotFoundError(fmt::format("unknown placement policy '{}'", p));
    }
  }
  std::vector<FgdInputs> inputs;
  for (const std::string& w : options.workloads) {
    ASSIGN_OR_RETURN(FgdInputs in, LoadFgdInputs(options.trace_dir, w));
    inputs.push_back(std::move(in));
  }
  struct Task {
    size_t workload, policy;
    uint64_t seed;
  };
  std::vector<Task> tasks;
  for (size_t w = 0; w < inputs.size(); ++w) {
    for (size_t p = 0; p < options.policies.size(); ++p) {
      for (uint64_t s : options.seeds) tasks.push_back({w, p, s});
    }
  }
  std::vector<absl::StatusOr<FgdRunResult>> results(tasks.size(), absl::UnknownError("not run"));
  RunParallel(
      tasks.size(), options.jobs,
      [&](size_t i) {
        results[i] =
            RunFgdOnce(inputs[tasks[i].workload], options.policies[tasks[i].policy], tasks[i].seed, options.tune_ratio);
      },
      options.on_progress);
  std::vector<FgdRunResult> out;
  out.reserve(results.size());
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  int n = 0;
  for (double x : v) {
    if (std::isnan(x)) continue;
    sum += x;
    ++n;
  }
  return n ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

double SampleSd(const std::vector<double>& v) {
  const double m = Mean(v);
  double ss = 0;
  int n = 0;
  for (double x : v) {
    if (std::isnan(x)) continue;
    ss += (x - m) * (x - m);
    ++n;
  }
  return n > 1 ? std::sqrt(ss / (n - 1)) : 0;
}

double Median(std::vector<double> v) {
  std::erase_if(v, [](double x) { return std::isnan(x); });
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<FgdSummaryRow> Summarize(const std::vector<FgdRunResult>& results) {
  std::vector<FgdSummaryRow> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<std::vector<const FgdRunResult*>> groups;
  for (const FgdRunResult& r : results) {
    auto [it, inserted] = index.try_emplace({r.workload, r.policy}, groups.size());
    if (inserted) {
      groups.emplace_back();
      rows.push_back({r.workload, r.policy});
    }
    groups[it->second].push_back(&r);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<double> u100, u130, f100, fr100;
    for (const FgdRunResult* r : groups[g]) {
      u100.push_back(100 - r->curves.alloc_pct[100]);
      u130.push_back(100 - r->curves.alloc_pct[130]);
      f100.push_back(r->curves.frag_pct[100]);
      fr100.push_back(r->curves.frag_ratio_pct[100]);
    }
    FgdSummaryRow& row = rows[g];
    row.n_seeds = static_cast<int>(groups[g].size());
    row.unalloc100_mean = Mean(u100);
    row.unalloc100_sd = SampleSd(u100);
    row.unalloc100_median = Median(u100);
    row.unalloc130_mean = Mean(u130);
    row.unalloc130_sd = SampleSd(u130);
    row.unalloc130_median = Median(u130);
    row.frag100_median = Median(f100);
    row.frag_ratio100_median = Median(fr100);
  }
  return rows;
}

}  // namespace gpugeek::sim
