// hpo_bench: our samplers on the reference test functions, and our pruners on the LCBench surrogate
// curves, in the shape of ../shared/bench/hpo/optuna_reference.py's JSON so that bench/hpo.sh can set the
// two side by side. Prints one JSON object on stdout; progress on stderr.
//
//   hpo_bench --trials 100 --seeds 10 [--functions branin,...] [--samplers tpe,gp,...] [--parallel 4]
//   hpo_bench ... --svg DIR [--reference optuna.json]   (charts of median best-so-far regret)
//   hpo_bench --functions '' --lcbench ../shared/bench/hpo/data/lcbench_surrogate_curves.csv.gz --seeds 5

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "common/line_chart.h"
#include "fmt/format.h"
#include "hpo/grace_check.h"
#include "hpo/pruner.h"
#include "hpo/study.h"
#include "hpo/successive_halving_pruner.h"
#include "hpo/testing/functions.h"
#include "hpo/testing/lcbench.h"
#include "nlohmann/json.hpp"

namespace gpugeek::hpo {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Round4(double x) { return std::stod(fmt::format("{:.4g}", x)); }

// Median best-so-far regret after each trial, per function and sampler: the charts' curves.
using Curves = std::map<std::string, std::vector<ChartSeries>>;

nlohmann::json RunFunctions(const std::vector<std::string>& functions, const std::vector<std::string>& samplers,
                            int trials, int seeds, int parallel, Curves& charts) {
  nlohmann::json results = nlohmann::json::object();
  std::vector<int> checkpoints;
  for (int c : {10, 25, 50, 100, 200}) {
    if (c <= trials) checkpoints.push_back(c);
  }
  for (testing::TestFunction& fn : testing::ReferenceFunctions()) {
    if (std::find(functions.begin(), functions.end(), fn.name) == functions.end()) continue;
    for (const std::string& name : samplers) {
      std::vector<std::vector<double>> curves;
      std::vector<double> ms_at_last;
      double total_ms = 0;
      for (int seed = 0; seed < seeds; ++seed) {
        auto sampler = MakeSampler(name, trials);
        if (!sampler.ok()) {
          std::cerr << sampler.status().message() << "\n";
          std::exit(2);
        }
        Study study(fn.space, Direction::kMinimize, *std::move(sampler), nullptr, static_cast<uint64_t>(seed));
        std::vector<double> best;
        double cur = INFINITY;
        double last_ms = 0;
        // `parallel` trials in flight: each completion (the oldest first) frees a worker that asks at once,
        // so a suggestion sees parallel - 1 running trials (the constant liar's case).
        std::deque<int64_t> running;
        auto ask = [&](bool last) {
          const auto start = std::chrono::steady_clock::now();
          const int64_t number = study.Ask().number;
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
          total_ms += ms;
          if (last) last_ms = ms;
          running.push_back(number);
        };
        for (int k = 0; k < std::min(parallel, trials); ++k) ask(k + 1 == trials);
        for (int t = 0; t < trials; ++t) {
          const int64_t number = running.front();
          running.pop_front();
          const double v = fn.f(study.trials()[number].params);
          (void)study.Tell(number, v);
          cur = std::min(cur, v);
          best.push_back(cur);
          if (static_cast<int>(study.trials().size()) < trials)
            ask(static_cast<int>(study.trials().size()) + 1 == trials);
        }
        ms_at_last.push_back(last_ms);
        curves.push_back(std::move(best));
      }
      ChartSeries series{.name = "gpugeek " + name};
      for (int t = 0; t < trials; ++t) {
        std::vector<double> regrets;
        for (const auto& curve : curves) regrets.push_back(curve[t] - fn.minimum);
        series.points.emplace_back(t + 1, Median(regrets));
      }
      charts[fn.name].push_back(std::move(series));
      nlohmann::json entry;
      for (int c : checkpoints) {
        std::vector<double> regrets;
        for (const auto& curve : curves) regrets.push_back(curve[c - 1] - fn.minimum);
        entry[fmt::format("regret@{}", c)] = Round4(Median(regrets));
      }
      entry["ms_per_trial"] = std::round(100 * total_ms / (trials * seeds)) / 100;
      entry[fmt::format("ms_at_trial_{}", trials)] = std::round(100 * Median(ms_at_last)) / 100;
      std::cerr << fmt::format("# {} {} {}\n", fn.name, name, entry.dump());
      results[fn.name][name] = entry;
    }
  }
  return results;
}

// The early-stopping check of optuna_reference.py's lcbench_check, with our pruners: random configurations,
// each trained epoch by epoch until pruned or 52 epochs, until the search has spent budget_full * 52
// epochs. Regret: best final accuracy in the table minus the best final accuracy among trials that ran all
// 52 epochs (100 if none did yet), after 1/4, 1/2 and all of the budget.
nlohmann::json RunLcBench(const std::string& path, int seeds, int budget_full,
                          const std::vector<std::pair<std::string, PrunerConfig>>& pruners) {
  auto tasks = testing::LoadLcBench(path);
  if (!tasks.ok()) {
    std::cerr << tasks.status().message() << "\n";
    std::exit(2);
  }
  const int64_t budget = int64_t{budget_full} * 52;
  const std::vector<std::string> mark_names = {"q1", "q2", "q4"};
  const std::vector<int64_t> marks = {budget / 4, budget / 2, budget};
  nlohmann::json out = {{"budget_epochs", budget}};
  for (const auto& [task, curves] : *tasks) {
    double best_possible = 0;
    for (const auto& a : curves.accuracy) best_possible = std::max(best_possible, a.back());
    for (const auto& [label, config] : pruners) {
      std::vector<std::vector<double>> regrets(marks.size());
      std::vector<double> started, gpu_seconds;
      std::string grace_message;
      for (int seed = 0; seed < seeds; ++seed) {
        const testing::LcBenchSearch run =
            testing::RunLcBenchSearch(curves, config, static_cast<uint64_t>(seed), budget, marks);
        for (size_t m = 0; m < marks.size(); ++m) {
          regrets[m].push_back(run.best_at[m] >= 0 ? best_possible - run.best_at[m] : 100.0);
        }
        started.push_back(static_cast<double>(run.trials.size()));
        gpu_seconds.push_back(run.gpu_seconds);
        if (config.name == "asha" && seed == 0) {
          const SuccessiveHalvingPruner sha({.min_resource = config.min_resource,
                                             .reduction_factor = config.reduction_factor,
                                             .max_resource = config.max_resource});
          grace_message = CheckGracePeriod(run.trials, sha.RungSteps(51), 52).message;
        }
      }
      nlohmann::json entry;
      for (size_t m = 0; m < marks.size(); ++m) {
        entry["regret@" + mark_names[m]] = std::round(1000 * Median(regrets[m])) / 1000;
      }
      entry["median_trials"] = Median(started);
      entry["median_gpu_s"] = std::round(Median(gpu_seconds));
      if (config.name == "asha") entry["grace_check"] = grace_message;
      std::cerr << fmt::format("# lcbench {} {} {}\n", task, label, entry.dump());
      out[task][label] = entry;
    }
  }
  return out;
}

}  // namespace
}  // namespace gpugeek::hpo

int main(int argc, char** argv) {
  using namespace gpugeek::hpo;
  using gpugeek::ChartSeries;
  using gpugeek::LineChartSvg;
  CLI::App app{"Our samplers and pruners on the reference HPO problems (JSON on stdout)"};
  int trials = 100, seeds = 10, budget = 100, parallel = 1;
  std::string functions = "branin,hartmann6,levy10,rosenbrock10,mixed";
  std::string samplers = "random,tpe,tpe-multivariate,cmaes,gp,auto";
  std::string lcbench, svg_dir, reference;
  app.add_option("--trials", trials, "trials per search")->check(CLI::Range(1, 100000));
  app.add_option("--seeds", seeds, "searches per function and sampler")->check(CLI::Range(1, 1000));
  app.add_option("--functions", functions, "comma-separated; '' for none");
  app.add_option("--parallel", parallel, "trials in flight at once (asynchronous workers)")->check(CLI::Range(1, 1000));
  app.add_option("--samplers", samplers, "comma-separated");
  app.add_option("--lcbench", lcbench, "LCBench surrogate curves (.csv.gz): run the early-stopping check");
  app.add_option("--lcbench-budget", budget, "compute budget, in full 52-epoch trainings")
      ->check(CLI::Range(1, 100000));
  app.add_option("--svg", svg_dir, "write FUNCTION.svg charts of median best-so-far regret into this folder");
  app.add_option("--reference", reference, "optuna_reference.py's JSON: its checkpoints join the charts");
  CLI11_PARSE(app, argc, argv);
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipEmpty())) out.emplace_back(p);
    return out;
  };
  const auto start = std::chrono::steady_clock::now();
  Curves charts;
  nlohmann::json res = {{"trials", trials},
                        {"parallel", parallel},
                        {"seeds", seeds},
                        {"stat", "median over seeds of best-so-far regret (f_best - f_min)"},
                        {"results", RunFunctions(split(functions), split(samplers), trials, seeds, parallel, charts)}};
  if (!svg_dir.empty()) {
    nlohmann::json ref;
    if (!reference.empty()) {
      std::ifstream in(reference);
      ref = nlohmann::json::parse(in, nullptr, false);
      if (ref.is_discarded() || !ref.contains("results")) {
        std::cerr << reference << ": not optuna_reference.py's JSON\n";
        return 2;
      }
    }
    std::filesystem::create_directories(svg_dir);
    for (auto& [fn, series] : charts) {
      if (ref.contains("results") && ref["results"].contains(fn)) {
        for (const auto& [name, entry] : ref["results"][fn].items()) {
          ChartSeries s{.name = "optuna " + name};
          for (const auto& [key, v] : entry.items()) {
            if (key.rfind("regret@", 0) == 0) s.points.emplace_back(std::stod(key.substr(7)), v.get<double>());
          }
          std::sort(s.points.begin(), s.points.end());
          series.push_back(std::move(s));
        }
      }
      std::ofstream(std::filesystem::path(svg_dir) / (fn + ".svg"))
          << LineChartSvg(fmt::format("{}: median best-so-far regret over {} seeds", fn, seeds), "trials",
                          "regret (log)", series, 1, trials, {.log_y = true});
    }
  }
  if (!lcbench.empty()) {
    res["lcbench"] = RunLcBench(lcbench, seeds, budget,
                                {{"none", {.name = "none"}},
                                 {"median", {.name = "median", .startup_trials = 5, .warmup_steps = 3}},
                                 {"asha", {.name = "asha", .min_resource = 1, .max_resource = 52}},
                                 {"asha_r4", {.name = "asha", .min_resource = 4, .max_resource = 52}},
                                 {"hyperband", {.name = "hyperband", .min_resource = 1, .max_resource = 52}}});
  }
  res["total_s"] =
      std::round(10 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) / 10;
  std::cout << res.dump() << "\n";
  return 0;
}
