#pragma once
// The FGD experiment: workloads x policies x seeds, each run one simulation of the protocol in
// fgd_protocol.h on the trace's 1,213 GPU nodes, measured as metrics.h describes.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/metrics.h"
#include "sim/trace_reader.h"

namespace gpugeek::sim {

struct FgdInputs {
  std::string workload;
  std::vector<TraceNode> nodes;
  std::vector<TracePod> pods;
};
// Reads `trace_dir`/csv/{openb_node_list_gpu_node.csv, openb_pod_list_<workload>.csv}.
// Errors: NotFound (unknown workload, missing file), InvalidArgument (a bad CSV row).
absl::StatusOr<FgdInputs> LoadFgdInputs(const std::string& trace_dir, const std::string& workload);

struct FgdRunResult {
  std::string workload;
  std::string policy;
  uint64_t seed = 0;
  FgdCurves curves;
};

// One run. Errors: NotFound for an unknown policy.
absl::StatusOr<FgdRunResult> RunFgdOnce(const FgdInputs& inputs, const std::string& policy, uint64_t seed,
                                        double tune_ratio = 1.3);

struct FgdExperimentOptions {
  std::string trace_dir;               // holds csv/
  std::vector<std::string> workloads;  // names from FgdWorkloads()
  std::vector<std::string> policies;   // names from sched::Registry
  std::vector<uint64_t> seeds;
  double tune_ratio = 1.3;
  int jobs = 1;  // runs in parallel (threads)
  // Called after each finished run with (done, total), from a worker thread, one call at a time.
  std::function<void(size_t, size_t)> on_progress;
};

// All runs, ordered by workload, policy, seed. Errors: the first failing load or run.
absl::StatusOr<std::vector<FgdRunResult>> RunFgdExperiment(const FgdExperimentOptions& options);

// Mean, sample sd and median over seeds per (workload, policy), as fgd_summary_derived.csv.
struct FgdSummaryRow {
  std::string workload;
  std::string policy;
  int n_seeds = 0;
  double unalloc100_mean = 0, unalloc100_sd = 0, unalloc100_median = 0;
  double unalloc130_mean = 0, unalloc130_sd = 0, unalloc130_median = 0;
  double frag100_median = 0, frag_ratio100_median = 0;
};
std::vector<FgdSummaryRow> Summarize(const std::vector<FgdRunResult>& results);

// Helpers on samples (NaNs skipped): mean, sample standard deviation (n-1), median.
double Mean(const std::vector<double>& v);
double SampleSd(const std::vector<double>& v);
double Median(std::vector<double> v);

}  // namespace gpugeek::sim
