// `gpugeek sim fgd`: replays Alibaba's 2023 GPU trace through our scheduler under the FGD paper's
// protocol (shared/anchors/fgd.md) and reports unallocated GPU % and fragmentation per policy.
// `gpugeek sim spot`: the spot experiment (sim/spot.h): cost and lost GPU-hours of capacity policies
// when spot nodes are reclaimed at AWS Spot Instance Advisor's interruption rates.

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "api/price_table.h"
#include "api/quantity.h"
#include "cli/commands.h"
#include "common/clock.h"
#include "sched/registry.h"
#include "sim/experiment.h"
#include "sim/fgd_protocol.h"
#include "sim/published.h"
#include "sim/report.h"
#include "sim/spot.h"

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

// Progress on a terminal: "[####    ] 3/15 runs".
std::function<void(size_t, size_t)> ProgressBar() {
  if (isatty(STDERR_FILENO) == 0) return nullptr;
  return [](size_t done, size_t total) {
    constexpr size_t kWidth = 40;
    const size_t filled = done * kWidth / total;
    std::cerr << fmt::format("\r[{}{}] {}/{} runs", std::string(filled, '#'), std::string(kWidth - filled, ' '), done,
                             total)
              << std::flush;
    if (done == total) std::cerr << "\n";
  };
}

Duration DurationFlag(const std::string& flag, const std::string& text) {
  auto d = api::ParseDuration(text);
  if (!d.ok() || *d <= Duration{0}) Fail(fmt::format("bad {} '{}': use a duration such as 30m, 2h, 90s", flag, text));
  return *d;
}

// The spot experiment's prices from a provider price list (api/price_table.h): each model's on-demand and
// spot price; a model with only one of them is an error naming it.
std::map<std::string, sim::GpuPrice> ReadPrices(const std::string& path) {
  absl::StatusOr<api::PriceTable> table = api::ReadPriceTable(path);
  if (!table.ok()) Fail(fmt::format("--prices: {}", std::string(table.status().message())));
  std::map<std::string, sim::GpuPrice> prices;
  for (const auto& [key, micros] : *table) {
    const auto& [model, capacity] = key;
    if (capacity == "on-demand") prices[model].on_demand_micros = micros;
    if (capacity == "spot") prices[model].spot_micros = micros;
  }
  for (const auto& [model, p] : prices) {
    if (p.on_demand_micros == 0 || p.spot_micros == 0) {
      Fail(fmt::format("--prices {}: {} needs both an on-demand and a spot price", path, model));
    }
  }
  return prices;
}

void RegisterSpot(CLI::App& sim) {
  struct Options {
    std::string shared_dir = DefaultSharedDir();
    std::string seeds = "42-44";
    std::string rates = "2.5,7.5,12.5,17.5,25";
    std::string policies = "on-demand,spot-first,spot-only";
    std::string prices;
    std::string out;
    std::string start = "2017-10-02";
    int days = 7;
    int node_stride = 10, spot_stride = 2;
    std::string checkpoint_interval = "30m", outage = "2h", restart = "2m";
    bool no_jit = false;
    int jobs = 2;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* spot = sim.add_subcommand(
      "spot",
      "Cost and lost GPU-hours of on-demand, spot-first and spot-only jobs under spot reclaims (Philly jobs "
      "on an Alibaba spot-GPU pool)");
  spot->add_option("--shared-dir", opts->shared_dir,
                   "the shared data folder (default $GPUGEEK_SHARED_DIR or ../shared)");
  spot->add_option("--seeds", opts->seeds, "seed range 42-44 or list 42,43 (reclaim draws, tie order)");
  spot->add_option("--rates", opts->rates,
                   "spot interruptions, % of nodes per month (default: AWS Spot Instance Advisor's buckets "
                   "<5, 5-10, 10-15, 15-20, >20 by 2.5,7.5,12.5,17.5,25)");
  spot->add_option("--policies", opts->policies, "a comma list of on-demand, spot-first, spot-only");
  spot->add_option("--prices", opts->prices,
                   "CSV of GPU_MODEL,CAPACITY,PRICE per GPU-hour with an on-demand and a spot line per model "
                   "(default: AWS list prices, spot at 30 %)");
  spot->add_option("--start", opts->start, "first day of the Philly window (YYYY-MM-DD, 2017-09-04..2017-12-22)");
  spot->add_option("--days", opts->days, "length of the window in days")->check(CLI::Range(1, 120));
  spot->add_option("--node-stride", opts->node_stride, "every Nth node of the spot-GPU trace's priced nodes")
      ->check(CLI::Range(1, 1000));
  spot->add_option("--spot-stride", opts->spot_stride, "every Nth node of the pool is spot (1: none)")
      ->check(CLI::Range(1, 1000));
  spot->add_option("--checkpoint-interval", opts->checkpoint_interval, "periodic checkpoint, of progress");
  spot->add_option("--outage", opts->outage, "a reclaimed node returns after this");
  spot->add_option("--restart", opts->restart, "loading a checkpoint on each resume");
  spot->add_flag("--no-jit", opts->no_jit, "no just-in-time checkpoint on the reclaim notice (periodic only)");
  spot->add_option("--jobs", opts->jobs, "runs in parallel")->check(CLI::Range(1, 256));
  spot->add_option("--out", opts->out, "write summary.csv, runs.csv, cost.svg and lost.svg into this folder");
  spot->callback([opts] {
    const std::map<std::string, sim::GpuPrice> prices =
        opts->prices.empty() ? sim::DefaultGpuPrices() : ReadPrices(opts->prices);
    sim::SpotInputOptions in;
    in.node_csv = opts->shared_dir + "/traces/alibaba-spot-gpu-v2026/node_info_df.csv";
    in.job_csv = opts->shared_dir + "/traces/philly/philly_jobs.csv";
    in.node_stride = opts->node_stride;
    in.spot_stride = opts->spot_stride;
    absl::Time day;
    std::string err;
    if (!absl::ParseTime("%Y-%m-%d", opts->start, absl::UTCTimeZone(), &day, &err)) {
      Fail(fmt::format("bad --start '{}': use YYYY-MM-DD ({})", opts->start, err));
    }
    in.window_start_s = absl::ToUnixSeconds(day);  // the trace's clock read as UTC, as the reader does
    in.window = std::chrono::hours(24 * opts->days);
    auto inputs = sim::LoadSpotInputs(in, prices);
    if (!inputs.ok()) Fail(std::string(inputs.status().message()));

    sim::SpotExperimentOptions o;
    o.policies.clear();
    for (const std::string& p : SplitList(opts->policies)) {
      if (p == "on-demand") {
        o.policies.push_back(sim::CapacityPolicy::kOnDemandOnly);
      } else if (p == "spot-first") {
        o.policies.push_back(sim::CapacityPolicy::kSpotFirst);
      } else if (p == "spot-only") {
        o.policies.push_back(sim::CapacityPolicy::kSpotOnly);
      } else {
        Fail(fmt::format("bad --policies entry '{}': use on-demand, spot-first or spot-only", p));
      }
    }
    o.rates.clear();
    for (const std::string& r : SplitList(opts->rates)) {
      double pct = 0;
      if (!absl::SimpleAtod(r, &pct) || pct < 0 || pct > 10000) Fail(fmt::format("bad --rates entry '{}'", r));
      o.rates.push_back(pct / 100);
    }
    o.seeds = ParseSeeds(opts->seeds);
    o.run.checkpoint_interval = DurationFlag("--checkpoint-interval", opts->checkpoint_interval);
    o.run.outage = DurationFlag("--outage", opts->outage);
    o.run.restart_overhead = DurationFlag("--restart", opts->restart);
    o.run.just_in_time = !opts->no_jit;
    o.jobs = opts->jobs;
    o.on_progress = ProgressBar();
    size_t gpus = 0, spot_gpus = 0;
    for (const auto& n : inputs->nodes) {
      gpus += n.gpu_count;
      if (n.capacity_type == sched::CapacityType::kSpot) spot_gpus += n.gpu_count;
    }
    std::cout << fmt::format("Pool: {} nodes, {} GPUs ({} spot); {} Philly jobs submitted in {} days from {}.\n",
                             inputs->nodes.size(), gpus, spot_gpus, inputs->jobs.size(), opts->days, opts->start);
    const TimePoint start = RealClock().Now();
    auto runs = sim::RunSpotExperiment(*inputs, prices, o);
    if (!runs.ok()) Fail(std::string(runs.status().message()));
    const double wall_s = std::chrono::duration<double>(RealClock().Now() - start).count();
    const std::vector<sim::SpotRunResult> summary = sim::SummarizeSpot(*runs);
    std::cout << sim::SpotTable(summary);
    std::cout << fmt::format(
        "\nMeans over {} seed(s); checkpoints every {} of progress, {}; {} runs in {:.1f} s wall.\n", o.seeds.size(),
        opts->checkpoint_interval, o.run.just_in_time ? "just-in-time on the 2-minute notice" : "no just-in-time one",
        runs->size(), wall_s);
    if (!opts->out.empty()) {
      if (absl::Status s = sim::WriteSpotReport(opts->out, *runs, summary); !s.ok()) Fail(std::string(s.message()));
      std::cout << "Report written to " << opts->out << "\n";
    }
  });
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
    o.on_progress = ProgressBar();
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
  RegisterSpot(*sim);
}

}  // namespace gpugeek::cli
