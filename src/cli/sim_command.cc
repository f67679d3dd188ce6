// `gpugeek sim fgd`: replays Alibaba's 2023 GPU trace through our scheduler under the FGD paper's
// protocol (shared/anchors/fgd.md) and reports unallocated GPU % and fragmentation per policy.

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "common/clock.h"
#include "sched/registry.h"
#include "sim/experiment.h"
#include "sim/fgd_protocol.h"
#include "sim/published.h"
#include "sim/report.h"

namespace gpugeek::cli {
namespace {

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "gpugeek sim: " << message << "\n";
  throw CLI::RuntimeError(2);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out = absl::StrSplit(s, ',', absl::SkipEmpty());
  return out;
}

// "42-51" or "42,43,50".
std::vector<uint64_t> ParseSeeds(const std::string& s) {
  std::vector<uint64_t> out;
  for (const std::string& part : SplitList(s)) {
    const std::vector<std::string> range = absl::StrSplit(part, '-');
    uint64_t lo = 0, hi = 0;
    if (range.size() == 1 && absl::SimpleAtoi(range[0], &lo)) {
      out.push_back(lo);
    } else if (range.size() == 2 && absl::SimpleAtoi(range[0], &lo) && absl::SimpleAtoi(range[1], &hi) && lo <= hi &&
               hi - lo < 100000) {
      for (uint64_t x = lo; x <= hi; ++x) out.push_back(x);
    } else {
      Fail(fmt::format("bad --seeds '{}': use 42-51 or 42,43", s));
    }
  }
  if (out.empty()) Fail("--seeds is empty");
  return out;
}

std::string DefaultSharedDir() {
  if (const char* env = std::getenv("GPUGEEK_SHARED_DIR"); env != nullptr && *env != '\0') return env;
  return "../shared";
}

nlohmann::json Json(const sim::FgdSummaryRow& r, const sim::PublishedSummary* published) {
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json j = {
      {"workload", r.workload},
      {"policy", r.policy},
      {"seeds", r.n_seeds},
      {"unallocated_pct_at_100",
       {{"mean", num(r.unalloc100_mean)}, {"sd", num(r.unalloc100_sd)}, {"median", num(r.unalloc100_median)}}},
      {"unallocated_pct_at_130",
       {{"mean", num(r.unalloc130_mean)}, {"sd", num(r.unalloc130_sd)}, {"median", num(r.unalloc130_median)}}},
      {"frag_pct_of_total_at_100_median", num(r.frag100_median)},
      {"frag_pct_of_idle_at_100_median", num(r.frag_ratio100_median)}};
  if (published) {
    auto it = published->find({r.workload, r.policy});
    if (it != published->end()) {
      j["published"] = {
          {"unallocated_pct_at_100", {{"mean", it->second.unalloc100_mean}, {"sd", it->second.unalloc100_sd}}},
          {"unallocated_pct_at_130", {{"mean", it->second.unalloc130_mean}, {"sd", it->second.unalloc130_sd}}}};
    }
  }
  return j;
}

}  // namespace

void RegisterSimCommand(CLI::App& app) {
  struct Options {
    std::string workload = "default";
    std::string policies = "all";
    std::string seeds = "42-51";
    std::string out;
    std::string shared_dir = DefaultSharedDir();
    bool json = false;
    bool compare = false;
    int jobs = 2;
    double tune = 1.3;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sim = app.add_subcommand("sim", "Trace-driven simulation of the scheduler");
  sim->require_subcommand(1);
  CLI::App* fgd = sim->add_subcommand("fgd", "Reproduce FGD (ATC'23) on Alibaba's 2023 GPU trace and compare policies");
  fgd->add_option("--workload", opts->workload, "default, a comma list, or all (the 17 workloads)");
  fgd->add_option("--policies", opts->policies, "all, or a comma list of Random, DotProd, GpuClustering, ...");
  fgd->add_option("--seeds", opts->seeds, "seed range 42-51 or list 42,43");
  fgd->add_option("--out", opts->out, "write per-run CSVs, summary.csv and SVG charts into this folder");
  fgd->add_option("--shared-dir", opts->shared_dir,
                  "the shared data folder (default $GPUGEEK_SHARED_DIR or ../shared)");
  fgd->add_option("--jobs", opts->jobs, "runs in parallel")->check(CLI::Range(1, 256));
  fgd->add_option("--tune", opts->tune, "inflate the pod list to this multiple of GPU capacity");
  fgd->add_flag("--json", opts->json, "print JSON instead of a table");
  fgd->add_flag("--compare", opts->compare, "print the published numbers beside ours");
  fgd->callback([opts] {
    sim::FgdExperimentOptions o;
    o.trace_dir = opts->shared_dir + "/traces/alibaba-gpu-v2023";
    o.workloads = opts->workload == "all" ? sim::FgdWorkloads() : SplitList(opts->workload);
    if (opts->policies == "all") {
      for (const auto& p : sched::Registry::Builtin().policies()) o.policies.push_back(p.name);
    } else {
      o.policies = SplitList(opts->policies);
    }
    o.seeds = ParseSeeds(opts->seeds);
    o.jobs = opts->jobs;
    o.tune_ratio = opts->tune;
    const bool bar = isatty(STDERR_FILENO) != 0;
    if (bar) {
      o.on_progress = [](size_t done, size_t total) {
        constexpr size_t kWidth = 40;
        const size_t filled = done * kWidth / total;
        std::cerr << fmt::format("\r[{}{}] {}/{} runs", std::string(filled, '#'), std::string(kWidth - filled, ' '),
                                 done, total)
                  << std::flush;
        if (done == total) std::cerr << "\n";
      };
    }
    const TimePoint start = RealClock().Now();
    auto runs = sim::RunFgdExperiment(o);
    if (!runs.ok()) Fail(std::string(runs.status().message()));
    const double wall_s = std::chrono::duration<double>(RealClock().Now() - start).count();
    const std::vector<sim::FgdSummaryRow> summary = sim::Summarize(*runs);
    sim::PublishedSummary published;
    if (opts->compare) {
      auto p = sim::ReadPublishedSummary(o.trace_dir + "/fgd_expected_results/fgd_summary_derived.csv");
      if (!p.ok()) Fail(std::string(p.status().message()));
      published = *std::move(p);
    }
    if (!opts->out.empty()) {
      if (absl::Status s = sim::WriteReport(opts->out, *runs, summary, opts->tune); !s.ok()) {
        Fail(std::string(s.message()));
      }
    }
    if (opts->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : summary) out.push_back(Json(r, opts->compare ? &published : nullptr));
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << sim::SummaryTable(summary, opts->compare ? &published : nullptr);
    std::cout << fmt::format(
        "\nUnallocated GPU % at arrived 100 % and 130 % of GPU capacity: mean +/- sd over {} seed(s); "
        "{} runs in {:.1f} s wall ({} jobs).\n",
        o.seeds.size(), runs->size(), wall_s, o.jobs);
    if (!opts->out.empty()) std::cout << "Report written to " << opts->out << "\n";
  });
}

}  // namespace gpugeek::cli
