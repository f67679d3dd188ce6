#include "sim/fair_share.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "common/fake_clock.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "sched/cluster.h"
#include "sched/framework.h"

namespace gpugeek::sim {
namespace {

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

double MeanMilli(const std::vector<FairSharePodSize>& sizes) {
  double m = 0;
  for (const FairSharePodSize& s : sizes) m += s.p * s.num_gpus * s.gpu_milli;
  return m;
}

// Exponential with the given mean (inverse transform of a uniform draw).
double Exponential(Rng& rng, double mean) { return -mean * std::log1p(-rng.UniformDouble()); }

}  // namespace

absl::StatusOr<std::vector<SimPod>> FairShareWorkload(const FairShareOptions& o) {
  if (o.tenants.empty()) return absl::InvalidArgumentError("no tenants");
  for (const FairShareTenant& t : o.tenants) {
    if (!(t.weight > 0)) return absl::InvalidArgumentError(fmt::format("tenant '{}': weight not > 0", t.name));
  }
  if (o.horizon <= Duration::zero() || o.flood <= Duration::zero() || o.mean_runtime <= Duration::zero()) {
    return absl::InvalidArgumentError("horizon, flood and mean_runtime must be > 0");
  }
  if (o.flood_load < 0 || o.quiet_load < 0) return absl::InvalidArgumentError("negative load");
  if (o.nodes <= 0 || o.gpus_per_node <= 0) return absl::InvalidArgumentError("no GPUs");
  double p_sum = 0;
  for (const FairSharePodSize& s : o.sizes) {
    if (s.num_gpus < 1 || s.num_gpus > o.gpus_per_node || s.gpu_milli < 1 || s.gpu_milli > 1000 || s.p < 0 ||
        (s.num_gpus > 1 && s.gpu_milli < 1000)) {
      return absl::InvalidArgumentError(fmt::format("bad pod size {} x {} milli-GPU", s.num_gpus, s.gpu_milli));
    }
    p_sum += s.p;
  }
  if (std::abs(p_sum - 1) > 1e-9) return absl::InvalidArgumentError("pod size probabilities do not sum to 1");

  const double capacity_milli = double{1000} * o.nodes * o.gpus_per_node;
  const double mean_runtime_s = Seconds(o.mean_runtime);
  // Pods per second that offer `load` of the cluster: load x capacity / (mean milli x mean runtime).
  const double mean_milli = MeanMilli(o.sizes);
  auto rate = [&](double load) { return load * capacity_milli / (mean_milli * mean_runtime_s); };
  const double horizon_s = Seconds(o.horizon);
  const double flood_s = Seconds(o.flood);
  const size_t n = o.tenants.size();

  std::vector<SimPod> pods;
  Rng rng(o.seed);
  for (size_t ti = 0; ti < n; ++ti) {
    // One stream per tenant, drawn in turn from the one seeded generator: deterministic.
    double t = 0;
    size_t count = 0;
    while (true) {
      const auto phase = static_cast<size_t>(t / flood_s);
      const double r = rate(phase % n == ti ? o.flood_load : o.quiet_load);
      const double phase_end = static_cast<double>(phase + 1) * flood_s;
      // Piecewise-constant Poisson: a draw that crosses the phase's end restarts there (memoryless).
      const double next = r > 0 ? t + Exponential(rng, 1 / r) : phase_end;
      if (next >= phase_end) {
        t = phase_end;
        if (t >= horizon_s) break;
        continue;
      }
      t = next;
      if (t >= horizon_s) break;
      double u = rng.UniformDouble();
      const FairSharePodSize* size = &o.sizes.back();
      for (const FairSharePodSize& s : o.sizes) {
        if (u < s.p) {
          size = &s;
          break;
        }
        u -= s.p;
      }
      const double runtime_s = std::clamp(std::round(Exponential(rng, mean_runtime_s)), 60.0, 4 * 3600.0);
      SimPod pod;
      pod.id = fmt::format("{}-{}", o.tenants[ti].name, count++);
      pod.tenant = o.tenants[ti].name;
      pod.shape.cpu_milli = int64_t{1000} * std::max(1, size->num_gpus);
      pod.shape.memory_bytes = uint64_t{8} * kGiB * std::max(1, size->num_gpus);
      pod.shape.num_gpus = size->num_gpus;
      pod.shape.gpu_milli = size->gpu_milli;
      // Whole milliseconds: exact on the virtual clock.
      pod.arrival = std::chrono::milliseconds(static_cast<int64_t>(t * 1000));
      pod.runtime = std::chrono::seconds(static_cast<int64_t>(runtime_s));
      pods.push_back(std::move(pod));
    }
  }
  std::stable_sort(pods.begin(), pods.end(), [](const SimPod& x, const SimPod& y) { return x.arrival < y.arrival; });
  return pods;
}

absl::StatusOr<FairShareResult> RunFairShare(const FairShareOptions& o) {
  ASSIGN_OR_RETURN(std::vector<SimPod> pods, FairShareWorkload(o));
  std::vector<sched::NodeSpec> specs;
  for (int i = 0; i < o.nodes; ++i) {
    sched::NodeSpec s;
    s.name = fmt::format("node-{:03}", i);
    s.cpu_milli = 64000;
    s.memory_bytes = 1024 * kGiB;
    s.gpu_count = o.gpus_per_node;
    s.gpu_model = o.gpu_model;
    specs.push_back(std::move(s));
  }
  ASSIGN_OR_RETURN(sched::Cluster cluster, sched::Cluster::Create(std::move(specs)));
  sched::FrameworkOptions fo;
  fo.policy = o.policy;
  fo.seed = o.seed;
  ASSIGN_OR_RETURN(std::unique_ptr<sched::Framework> framework, sched::Framework::Create(fo, &cluster));
  FakeClock clock;
  SimulatorOptions so;
  so.requeue_unschedulable = true;
  so.queue.ledger.half_life = o.half_life;
  for (const FairShareTenant& t : o.tenants) so.tenants[t.name] = sched::TenantConfig{.weight = t.weight};
  Simulator sim(*framework, clock, so);

  const MonoTime origin = clock.Monotonic();
  std::vector<std::optional<Duration>> started(pods.size());
  RETURN_IF_ERROR(sim.Run(pods, [&](const SimEvent& e) {
    if (e.kind != SimEvent::Kind::kDeparture && e.decision != nullptr && e.decision->scheduled) {
      started[e.pod] = clock.Monotonic() - origin;
    }
  }));

  // Sweep over changes of what each tenant holds and waits for, clipped to [0, horizon].
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < o.tenants.size(); ++i) index[o.tenants[i].name] = i;
  struct Change {
    Duration at;
    size_t tenant;
    int64_t held, waiting;  // milli-GPU deltas
  };
  std::vector<Change> changes;
  FairShareResult result;
  result.pods = pods.size();
  result.tenants.resize(o.tenants.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    const SimPod& p = pods[i];
    const size_t t = index.at(p.tenant);
    ++result.tenants[t].pods;
    const int64_t milli = int64_t{p.shape.num_gpus} * p.shape.gpu_milli;
    changes.push_back({p.arrival, t, 0, milli});
    if (!started[i]) continue;  // never placed (cannot happen with requeueing: every pod fits an empty node)
    changes.push_back({*started[i], t, milli, -milli});
    changes.push_back({*started[i] + *p.runtime, t, -milli, 0});
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& x, const Change& y) { return x.at < y.at; });

  double weight_sum = 0;
  for (const FairShareTenant& t : o.tenants) weight_sum += t.weight;
  const double capacity_milli = double{1000} * o.nodes * o.gpus_per_node;
  std::vector<int64_t> held(o.tenants.size()), waiting(o.tenants.size());
  Duration last{0};
  double contended_s = 0, contended_delivered = 0;
  auto accumulate = [&](Duration until) {
    until = std::min(until, o.horizon);
    if (until <= last) return;
    const double dt = Seconds(until - last);
    bool contended = true;
    for (size_t t = 0; t < held.size(); ++t) {
      result.tenants[t].total_milli_gpu_seconds += static_cast<double>(held[t]) * dt;
      contended =
          contended && static_cast<double>(held[t] + waiting[t]) >= o.tenants[t].weight / weight_sum * capacity_milli;
    }
    if (contended) {
      contended_s += dt;
      for (size_t t = 0; t < held.size(); ++t) {
        result.tenants[t].contended_milli_gpu_seconds += static_cast<double>(held[t]) * dt;
        contended_delivered += static_cast<double>(held[t]) * dt;
      }
    }
    last = until;
  };
  for (const Change& c : changes) {
    accumulate(c.at);
    held[c.tenant] += c.held;
    waiting[c.tenant] += c.waiting;
  }
  accumulate(o.horizon);

  result.contended = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(contended_s));
  result.utilization = contended_s > 0 ? contended_delivered / (capacity_milli * contended_s) : 0;
  for (size_t t = 0; t < o.tenants.size(); ++t) {
    FairShareTenantResult& r = result.tenants[t];
    r.name = o.tenants[t].name;
    r.target = o.tenants[t].weight / weight_sum;
    r.share = contended_delivered > 0 ? r.contended_milli_gpu_seconds / contended_delivered : 0;
    r.error = r.share - r.target;
    result.max_abs_error = std::max(result.max_abs_error, std::abs(r.error));
  }
  return result;
}

}  // namespace gpugeek::sim
