#include "sim/spot.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>

#include "common/fake_clock.h"
#include "common/status_macros.h"
#include "sched/frag.h"
#include "sched/framework.h"
#include "sim/experiment.h"
#include "sim/parallel.h"
#include "sim/report.h"

namespace gpugeek::sim {
namespace {

constexpr int kGpusPerMember = 8;          // a gang member holds at most one 8-GPU node
constexpr int64_t kCpuMilliPerGpu = 4000;  // what each job asks per GPU
constexpr int64_t kSecondsPerMonth = 30 * 86400;

int64_t Dollars(double usd) { return std::llround(usd * 1e6); }

GpuPrice Price(double on_demand_usd) { return {Dollars(on_demand_usd), Dollars(on_demand_usd * 0.3)}; }

int64_t Seconds(Duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

// A job as a gang: up to 8 GPUs on one node, more as members of equal size (8, or the job's GPUs
// split evenly: 12 -> 2 x 6).
std::pair<int32_t, int32_t> GangOf(int32_t gpus) {
  if (gpus <= kGpusPerMember) return {1, gpus};
  const int32_t gang = (gpus + kGpusPerMember - 1) / kGpusPerMember;
  return gpus % gang == 0 ? std::pair{gang, gpus / gang} : std::pair{gang, kGpusPerMember};
}

std::vector<sched::CapacityType> CapacityOf(CapacityPolicy p) {
  switch (p) {
    case CapacityPolicy::kOnDemandOnly:
      return {sched::CapacityType::kOnDemand};
    case CapacityPolicy::kSpotFirst:
      return {sched::CapacityType::kSpot, sched::CapacityType::kOnDemand};
    case CapacityPolicy::kSpotOnly:
      return {sched::CapacityType::kSpot};
  }
  return {};
}

double Hours(int64_t seconds) { return static_cast<double>(seconds) / 3600.0; }

}  // namespace

std::map<std::string, GpuPrice> DefaultGpuPrices() {
  const GpuPrice a100 = Price(32.77 / 8);
  return {{"A100-SXM4-80GB", a100}, {"A800-SXM4-80GB", a100}, {"H800", Price(98.32 / 8)}, {"A10", Price(1.006)}};
}

std::string_view CapacityPolicyName(CapacityPolicy p) {
  switch (p) {
    case CapacityPolicy::kOnDemandOnly:
      return "on-demand";
    case CapacityPolicy::kSpotFirst:
      return "spot-first";
    case CapacityPolicy::kSpotOnly:
      return "spot-only";
  }
  return "?";
}

absl::StatusOr<SpotInputs> LoadSpotInputs(const SpotInputOptions& options,
                                          const std::map<std::string, GpuPrice>& prices) {
  if (options.node_stride < 1 || options.spot_stride < 1) {
    return absl::InvalidArgumentError("node_stride and spot_stride must be >= 1");
  }
  ASSIGN_OR_RETURN(const std::vector<SpotTraceNode> trace_nodes, ReadSpotNodeCsv(options.node_csv));
  ASSIGN_OR_RETURN(const std::vector<PhillyJob> trace_jobs, ReadPhillyCsv(options.job_csv));
  SpotInputs in;
  int priced = 0;
  for (const SpotTraceNode& n : trace_nodes) {
    if (!prices.contains(n.model) || priced++ % options.node_stride != 0) continue;
    sched::NodeSpec spec;
    spec.name = "node-" + n.name;
    spec.cpu_milli = n.cpu_milli;
    spec.gpu_count = n.gpus;
    spec.gpu_model = n.model;
    spec.capacity_type = in.nodes.size() % options.spot_stride == 0 && options.spot_stride > 1
                             ? sched::CapacityType::kSpot
                             : sched::CapacityType::kOnDemand;
    in.nodes.push_back(std::move(spec));
  }
  const int64_t end_s = options.window_start_s + Seconds(options.window);
  for (size_t i = 0; i < trace_jobs.size(); ++i) {
    const PhillyJob& j = trace_jobs[i];
    if (j.submit_s < options.window_start_s || j.submit_s >= end_s) continue;
    in.jobs.push_back(SpotJob{fmt::format("philly-{}", i + 2),
                              std::chrono::seconds(j.submit_s - options.window_start_s),
                              std::chrono::seconds(j.duration_s), j.num_gpus});
  }
  std::stable_sort(in.jobs.begin(), in.jobs.end(),
                   [](const SpotJob& a, const SpotJob& b) { return a.submit < b.submit; });
  if (in.nodes.empty())
    return absl::InvalidArgumentError(fmt::format("{}: no node of a priced model", options.node_csv));
  if (in.jobs.empty()) return absl::InvalidArgumentError(fmt::format("{}: no job in the window", options.job_csv));
  return in;
}

absl::StatusOr<SpotRunResult> RunSpotOnce(const SpotInputs& inputs, const std::map<std::string, GpuPrice>& prices,
                                          const SpotRunOptions& o) {
  if (!(o.interruptions_per_month >= 0) || o.checkpoint_interval <= Duration{0} || o.outage <= Duration{0}) {
    return absl::InvalidArgumentError("interruptions_per_month must be >= 0, checkpoint_interval and outage > 0");
  }
  ASSIGN_OR_RETURN(sched::Cluster cluster, sched::Cluster::Create(inputs.nodes));
  std::vector<SimPod> pods;
  std::vector<sched::ResourceShape> shapes;
  pods.reserve(inputs.jobs.size());
  for (const SpotJob& j : inputs.jobs) {
    const auto [gang, per_member] = GangOf(j.gpus);
    SimPod p;
    p.id = j.id;
    p.shape =
        sched::ResourceShape{.cpu_milli = kCpuMilliPerGpu * per_member, .num_gpus = per_member, .gpu_milli = 1000};
    p.arrival = j.submit;
    p.runtime = j.runtime;
    p.gang_size = gang;
    p.capacity = CapacityOf(o.policy);
    shapes.push_back(p.shape);
    pods.push_back(std::move(p));
  }
  sched::FrameworkOptions fo;
  fo.policy = "FGDFit";  // the control plane's default (controlplane/options.h)
  fo.seed = o.seed;
  fo.context.typical_pods = sched::ComputeTypicalPods(shapes, 95, cluster);
  fo.explain_unschedulable = false;
  ASSIGN_OR_RETURN(std::unique_ptr<sched::Framework> framework, sched::Framework::Create(fo, &cluster));

  // Reclaims: a Poisson process per spot node (exponential gaps of mean 30 days / rate).
  SimulatorOptions so;
  so.requeue_unschedulable = true;
  if (!o.reclaims.empty()) {
    so.outages = o.reclaims;
  } else if (o.policy != CapacityPolicy::kOnDemandOnly && o.interruptions_per_month > 0) {
    std::mt19937_64 rng(o.seed);
    std::exponential_distribution<double> gap(o.interruptions_per_month / kSecondsPerMonth);
    for (size_t n = 0; n < inputs.nodes.size(); ++n) {
      if (inputs.nodes[n].capacity_type != sched::CapacityType::kSpot) continue;
      for (double t = gap(rng); t < Seconds(o.horizon); t += gap(rng)) {
        so.outages.push_back({static_cast<sched::NodeIndex>(n), std::chrono::seconds(std::llround(t)), o.outage});
      }
    }
  }
  // The checkpoint contract: what a stopped run saved, and what the next one needs.
  const bool jit = o.just_in_time && o.checkpoint_write <= o.notice;
  std::vector<Duration> saved(pods.size(), Duration{0});
  std::vector<int> resumes(pods.size(), 0);
  so.remaining_after_eviction = [&](size_t i, Duration, Duration ran) {
    const Duration overhead = resumes[i] > 0 ? o.restart_overhead : Duration{0};
    const Duration progress = std::max(Duration{0}, ran - overhead);
    if (jit) {
      saved[i] += progress;
    } else {
      saved[i] = std::max(saved[i], (saved[i] + progress) / o.checkpoint_interval * o.checkpoint_interval);
    }
    ++resumes[i];
    return o.restart_overhead + (*pods[i].runtime - saved[i]);
  };

  FakeClock clock;
  const MonoTime t0 = clock.Monotonic();
  std::vector<std::vector<sched::Placement>> holding(pods.size());
  std::vector<Duration> since(pods.size()), first_start(pods.size(), Duration{-1}), finish(pods.size(), Duration{-1});
  SpotRunResult r;
  r.policy = o.policy;
  r.interruptions_per_month = o.interruptions_per_month;
  r.seed = o.seed;
  r.jobs = static_cast<int>(pods.size());
  int64_t gpu_seconds = 0, spot_gpu_seconds = 0;
  int64_t cost_x3600 = 0, on_demand_x3600 = 0;  // micro-units x 3600: exact until the end
  auto bill = [&](size_t i, Duration now) {
    const int64_t s = Seconds(now - since[i]);
    for (const sched::Placement& p : holding[i]) {
      const sched::NodeSpec& node = inputs.nodes[p.node];
      const GpuPrice& price = prices.at(node.gpu_model);
      const bool spot = node.capacity_type == sched::CapacityType::kSpot;
      gpu_seconds += s * p.num_gpus;
      if (spot) spot_gpu_seconds += s * p.num_gpus;
      cost_x3600 += s * p.num_gpus * (spot ? price.spot_micros : price.on_demand_micros);
      on_demand_x3600 += s * p.num_gpus * price.on_demand_micros;
    }
    holding[i].clear();
  };
  Simulator simulator(*framework, clock, so);
  RETURN_IF_ERROR(simulator.Run(pods, [&](const SimEvent& e) {
    const Duration now = clock.Monotonic() - t0;
    switch (e.kind) {
      case SimEvent::Kind::kArrival:
      case SimEvent::Kind::kRetry:
        if (e.decision != nullptr && e.decision->scheduled) {
          holding[e.pod] = e.decision->placements;
          since[e.pod] = now;
          if (first_start[e.pod] < Duration{0}) first_start[e.pod] = now;
        }
        break;
      case SimEvent::Kind::kEviction:
        bill(e.pod, now);
        ++r.evictions;
        break;
      case SimEvent::Kind::kDeparture:
        bill(e.pod, now);
        finish[e.pod] = now;
        break;
    }
  }));

  Duration end{0};
  int64_t useful_gpu_seconds = 0;
  std::vector<double> jct;
  double wait_h = 0;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (finish[i] < Duration{0}) continue;
    ++r.completed;
    end = std::max(end, finish[i]);
    useful_gpu_seconds += Seconds(*pods[i].runtime) * inputs.jobs[i].gpus;
    jct.push_back(Hours(Seconds(finish[i] - pods[i].arrival)));
    wait_h += Hours(Seconds(first_start[i] - pods[i].arrival));
  }
  for (const NodeOutage& out : so.outages) r.reclaims += out.at < end;
  r.billed_gpu_hours = Hours(gpu_seconds);
  r.spot_gpu_hours = Hours(spot_gpu_seconds);
  r.useful_gpu_hours = Hours(useful_gpu_seconds);
  r.lost_gpu_hours = Hours(gpu_seconds - useful_gpu_seconds);
  r.cost_micros = cost_x3600 / 3600;
  r.on_demand_micros = on_demand_x3600 / 3600;
  if (!jct.empty()) {
    r.mean_jct_h = Mean(jct);
    std::sort(jct.begin(), jct.end());
    r.p99_jct_h = jct[std::min(jct.size() - 1, static_cast<size_t>(std::ceil(0.99 * jct.size())) - 1)];
    r.mean_wait_h = wait_h / static_cast<double>(jct.size());
  }
  return r;
}

absl::StatusOr<std::vector<SpotRunResult>> RunSpotExperiment(const SpotInputs& inputs,
                                                             const std::map<std::string, GpuPrice>& prices,
                                                             const SpotExperimentOptions& options) {
  std::vector<SpotRunOptions> tasks;
  for (CapacityPolicy p : options.policies) {
    // On-demand uses no spot node: the rate changes nothing, so it runs once per seed (rate 0).
    const std::vector<double> rates = p == CapacityPolicy::kOnDemandOnly ? std::vector<double>{0} : options.rates;
    for (double rate : rates) {
      for (uint64_t seed : options.seeds) {
        SpotRunOptions o = options.run;
        o.policy = p;
        o.interruptions_per_month = rate;
        o.seed = seed;
        tasks.push_back(o);
      }
    }
  }
  std::vector<absl::StatusOr<SpotRunResult>> results(tasks.size(), absl::UnknownError("not run"));
  RunParallel(
      tasks.size(), options.jobs, [&](size_t i) { results[i] = RunSpotOnce(inputs, prices, tasks[i]); },
      options.on_progress);
  std::vector<SpotRunResult> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

std::vector<SpotRunResult> SummarizeSpot(const std::vector<SpotRunResult>& runs) {
  // The fields summed over seeds, then divided: counts (rounded), money (micro-units), the rest.
  constexpr int SpotRunResult::*kCounts[] = {&SpotRunResult::jobs, &SpotRunResult::completed, &SpotRunResult::reclaims,
                                             &SpotRunResult::evictions};
  constexpr int64_t SpotRunResult::*kMicros[] = {&SpotRunResult::cost_micros, &SpotRunResult::on_demand_micros};
  constexpr double SpotRunResult::*kMeans[] = {&SpotRunResult::useful_gpu_hours, &SpotRunResult::billed_gpu_hours,
                                               &SpotRunResult::spot_gpu_hours,   &SpotRunResult::lost_gpu_hours,
                                               &SpotRunResult::mean_jct_h,       &SpotRunResult::p99_jct_h,
                                               &SpotRunResult::mean_wait_h};
  std::vector<SpotRunResult> rows;
  std::vector<int> n;
  for (const SpotRunResult& r : runs) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const SpotRunResult& s) {
      return s.policy == r.policy && s.interruptions_per_month == r.interruptions_per_month;
    });
    if (it == rows.end()) {
      rows.push_back(SpotRunResult{.policy = r.policy, .interruptions_per_month = r.interruptions_per_month});
      n.push_back(0);
      it = rows.end() - 1;
    }
    ++n[it - rows.begin()];
    for (auto f : kCounts) *it.*f += r.*f;
    for (auto f : kMicros) *it.*f += r.*f;
    for (auto f : kMeans) *it.*f += r.*f;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    SpotRunResult& s = rows[i];
    const int k = n[i];
    s.seed = static_cast<uint64_t>(k);  // in a summary row: the number of seeds
    s.jobs /= k;
    s.completed /= k;
    s.reclaims = (s.reclaims + k / 2) / k;
    s.evictions = (s.evictions + k / 2) / k;
    for (auto f : kMicros) s.*f /= k;
    for (auto f : kMeans) s.*f /= k;
  }
  return rows;
}

namespace {

double PerUsefulHour(const SpotRunResult& r) {
  return r.useful_gpu_hours > 0 ? static_cast<double>(r.cost_micros) / 1e6 / r.useful_gpu_hours : NAN;
}

const SpotRunResult* OnDemandRow(const std::vector<SpotRunResult>& rows) {
  for (const SpotRunResult& r : rows) {
    if (r.policy == CapacityPolicy::kOnDemandOnly) return &r;
  }
  return nullptr;
}

}  // namespace

std::string SpotTable(const std::vector<SpotRunResult>& summary) {
  const SpotRunResult* base = OnDemandRow(summary);
  std::string out = fmt::format("{:<11} {:>9} {:>8} {:>9} {:>11} {:>10} {:>12} {:>9} {:>13} {:>12} {:>9} {:>9}\n",
                                "policy", "interrupt", "reclaims", "evictions", "completed", "billed", "lost", "spot",
                                "cost", "per useful", "mean JCT", "p99 JCT");
  out += fmt::format("{:<11} {:>9} {:>8} {:>9} {:>11} {:>10} {:>12} {:>9} {:>13} {:>12} {:>9} {:>9}\n", "", "%/month",
                     "", "", "jobs", "GPU-h", "GPU-h (%)", "share", "(vs on-dem.)", "GPU-h", "h", "h");
  for (const SpotRunResult& r : summary) {
    const std::string rate =
        r.policy == CapacityPolicy::kOnDemandOnly ? "-" : fmt::format("{:.1f}", r.interruptions_per_month * 100);
    const std::string vs =
        base != nullptr && base->cost_micros > 0
            ? fmt::format("{:+.1f}%",
                          100.0 * (static_cast<double>(r.cost_micros) / static_cast<double>(base->cost_micros) - 1))
            : "";
    out += fmt::format(
        "{:<11} {:>9} {:>8} {:>9} {:>11} {:>10.0f} {:>5.1f} {:>5.3f}% {:>8.1f}% {:>13} {:>12.3f} {:>9.2f} {:>9.1f}\n",
        CapacityPolicyName(r.policy), rate, r.reclaims, r.evictions, fmt::format("{}/{}", r.completed, r.jobs),
        r.billed_gpu_hours, r.lost_gpu_hours, r.useful_gpu_hours > 0 ? 100 * r.lost_gpu_hours / r.useful_gpu_hours : 0,
        r.billed_gpu_hours > 0 ? 100 * r.spot_gpu_hours / r.billed_gpu_hours : 0,
        fmt::format("{:.0f} {}", static_cast<double>(r.cost_micros) / 1e6, vs), PerUsefulHour(r), r.mean_jct_h,
        r.p99_jct_h);
  }
  return out;
}

std::string SpotCsv(const std::vector<SpotRunResult>& rows) {
  std::string out =
      "policy,interruptions_per_month,seed_or_seeds,jobs,completed,reclaims,evictions,useful_gpu_hours,"
      "billed_gpu_hours,spot_gpu_hours,lost_gpu_hours,cost_micros,on_demand_micros,mean_jct_h,p99_jct_h,mean_wait_h\n";
  for (const SpotRunResult& r : rows) {
    out += fmt::format("{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{},{},{:.4f},{:.4f},{:.4f}\n",
                       CapacityPolicyName(r.policy), r.interruptions_per_month, r.seed, r.jobs, r.completed, r.reclaims,
                       r.evictions, r.useful_gpu_hours, r.billed_gpu_hours, r.spot_gpu_hours, r.lost_gpu_hours,
                       r.cost_micros, r.on_demand_micros, r.mean_jct_h, r.p99_jct_h, r.mean_wait_h);
  }
  return out;
}

absl::Status WriteSpotReport(const std::string& dir, const std::vector<SpotRunResult>& runs,
                             const std::vector<SpotRunResult>& summary) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(fmt::format("cannot create '{}': {}", dir, ec.message()));
  double x_max = 0;
  for (const SpotRunResult& r : summary) x_max = std::max(x_max, 100 * r.interruptions_per_month);
  std::vector<Series> cost, lost;
  for (const SpotRunResult& r : summary) {
    const std::string name(CapacityPolicyName(r.policy));
    auto find = [&](std::vector<Series>& s) -> Series& {
      for (Series& x : s) {
        if (x.name == name) return x;
      }
      s.push_back(Series{name, {}});
      return s.back();
    };
    const double lost_pct = r.useful_gpu_hours > 0 ? 100 * r.lost_gpu_hours / r.useful_gpu_hours : NAN;
    if (r.policy == CapacityPolicy::kOnDemandOnly) {  // no spot: flat across the rates
      find(cost).points = {{0, PerUsefulHour(r)}, {x_max, PerUsefulHour(r)}};
      find(lost).points = {{0, lost_pct}, {x_max, lost_pct}};
      continue;
    }
    find(cost).points.emplace_back(100 * r.interruptions_per_month, PerUsefulHour(r));
    find(lost).points.emplace_back(100 * r.interruptions_per_month, lost_pct);
  }
  const std::vector<std::pair<std::string, std::string>> files = {
      {"summary.csv", SpotCsv(summary)},
      {"runs.csv", SpotCsv(runs)},
      {"cost.svg",
       LineChartSvg("Cost per useful GPU-hour by capacity policy", "spot interruptions, % of nodes per month",
                    "cost per useful GPU-hour (USD)", cost, 0, x_max)},
      {"lost.svg", LineChartSvg("GPU-hours lost to reclaims", "spot interruptions, % of nodes per month",
                                "lost GPU-hours, % of useful", lost, 0, x_max)},
  };
  for (const auto& [name, text] : files) {
    std::ofstream f(std::filesystem::path(dir) / name, std::ios::binary);
    f << text;
    if (!f) return absl::InternalError(fmt::format("cannot write '{}/{}'", dir, name));
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::sim
