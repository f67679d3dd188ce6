#include "controlplane/metrics.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "common/version.h"
#include "controlplane/control_plane.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using metrics::Type;
using metrics::Writer;

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// Failure -> RUNNING again, and its phases: tenths of a second (a placement) to an hour (waiting for GPUs);
// 3, 4 and 5 s resolve the 5 s goal of fast failure detection (docs/architecture.md, "Fencing").
std::vector<double> RecoveryBuckets() {
  return {0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 7.5, 10, 30, 60, 120, 300, 600, 1800, 3600};
}

void WriteNodes(ControlPlane& cp, Writer& w) {
  const std::vector<NodeView> nodes = cp.Nodes();
  w.Family("gpugeek_node_up",
           "1 when the node is ready, suspect or cordoned, 0 when down (its lease lapsed past the fencing deadline).",
           Type::kGauge);
  for (const NodeView& n : nodes) {
    const api::Registration& r = n.registration;
    w.Sample({{"node", r.node}, {"capacity_type", r.capacity_type}, {"region", r.region}}, n.state == "down" ? 0 : 1);
  }
  w.Family("gpugeek_node_cordoned", "1 when no new placements go to the node.", Type::kGauge);
  for (const NodeView& n : nodes) w.Sample({{"node", n.registration.node}}, n.cordoned ? 1 : 0);
  w.Family("gpugeek_node_heartbeat_age_seconds", "Seconds since the node's last heartbeat (monotonic).", Type::kGauge);
  for (const NodeView& n : nodes) {
    w.Sample({{"node", n.registration.node}}, std::max(0.0, Seconds(n.heartbeat_age)));
  }
}

void WritePool(ControlPlane& cp, Writer& w) {
  const PoolView pool = cp.Pool();
  struct Column {
    const char* name;
    const char* help;
    double (*value)(const PoolRow&);
  };
  static constexpr Column kColumns[] = {
      {"gpugeek_pool_gpus", "GPUs of schedulable nodes.", [](const PoolRow& r) { return double(r.gpus); }},
      {"gpugeek_pool_gpus_allocated", "GPUs with any allocation on them.",
       [](const PoolRow& r) { return double(r.gpus_allocated); }},
      {"gpugeek_pool_gpus_free", "GPUs with nothing allocated.",
       [](const PoolRow& r) { return double(r.gpus_fully_free); }},
      {"gpugeek_pool_capacity_milligpus", "Milli-GPU in all (1000 = one GPU).",
       [](const PoolRow& r) { return double(r.gpu_milli_total); }},
      {"gpugeek_pool_allocated_milligpus", "Milli-GPU allocated.",
       [](const PoolRow& r) { return double(r.gpu_milli_allocated); }},
      {"gpugeek_pool_fragmentation_milligpus",
       "FGD fragmentation: expected milli-GPU the typical request mix cannot use (Weng et al., ATC '23).",
       [](const PoolRow& r) { return r.frag_gpu_milli; }},
      {"gpugeek_pool_unallocatable_gpus", "GPUs with free capacity that no request of the typical mix fits on.",
       [](const PoolRow& r) { return double(r.unallocatable_gpus); }},
  };
  for (const Column& c : kColumns) {
    w.Family(c.name, c.help, Type::kGauge);
    for (const PoolRow& r : pool.rows) {
      w.Sample({{"model", r.gpu_model}, {"capacity_type", r.capacity_type}}, c.value(r));
    }
  }
  w.Family("gpugeek_pool_fragmentation_ratio", "Pool-wide fragmentation / idle milli-GPU, 0..1.", Type::kGauge);
  w.Sample({}, pool.frag_rate);
}

void WriteJobs(ControlPlane& cp, Writer& w) {
  auto counts = cp.CountJobs();
  const TimePoint now = cp.clock().Now();
  w.Family("gpugeek_jobs", "Jobs by state and priority (the queue: state=\"PENDING\").", Type::kGauge);
  if (!counts.ok()) {
    // No samples rather than wrong zeros: the series go stale and an absent() alert can tell.
    spdlog::warn("metrics: cannot count jobs: {}", counts.status());
    w.Family("gpugeek_jobs_oldest_pending_age_seconds", "Seconds the longest-waiting PENDING job has waited.",
             Type::kGauge);
    return;
  }
  // Every state has at least its priority-0 series, so a state without jobs reads 0, not absent.
  std::map<JobState, std::map<int, int64_t>> by_state;
  for (JobState s : {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelled}) {
    by_state[s][0] = 0;
  }
  std::optional<TimePoint> oldest_pending;
  for (const store::JobCount& c : *counts) {
    by_state[c.state][c.priority] += c.count;
    if (c.state == JobState::kPending && c.count > 0) {
      oldest_pending = oldest_pending ? std::min(*oldest_pending, c.oldest_update) : c.oldest_update;
    }
  }
  for (const auto& [state, priorities] : by_state) {
    for (const auto& [priority, n] : priorities) {
      w.Sample({{"state", std::string(api::JobStateName(state))}, {"priority", std::to_string(priority)}},
               static_cast<double>(n));
    }
  }
  w.Family("gpugeek_jobs_oldest_pending_age_seconds",
           "Seconds the longest-waiting PENDING job has waited (since submission or requeue); 0 when none.",
           Type::kGauge);
  w.Sample({}, oldest_pending ? std::max(0.0, Seconds(now - *oldest_pending)) : 0);
}

// The marketplace's money (billing.h), from the ledger at scrape time.
void WriteBilling(ControlPlane& cp, Writer& w) {
  w.Family("gpugeek_spend_micros_total",
           "What tenants were charged for GPU time, in micro-units of the pool's currency (docs/billing.md).",
           Type::kCounter);
  for (const auto& [key, micros] : cp.billing().Spend()) {
    w.Sample({{"tenant", key.tenant}, {"model", key.gpu_model}, {"capacity_type", key.capacity_type}},
             static_cast<double>(micros));
  }
  const std::map<std::string, ledger::Money> balances = cp.billing().Balances();
  w.Family("gpugeek_tenant_balance_micros",
           "A tenant's accounts: its cash (below zero when it spent more than it had) and each unexpired or not yet "
           "expired credit grant.",
           Type::kGauge);
  for (const auto& [account, balance] : balances) {
    // tenant:T:cash | tenant:T:credit:G
    if (!account.starts_with("tenant:")) continue;
    const size_t colon = account.find(':', 7);
    w.Sample({{"tenant", account.substr(7, colon - 7)}, {"account", account.substr(colon + 1)}},
             static_cast<double>(balance.micros));
  }
  w.Family("gpugeek_provider_payable_micros", "What the platform owes each provider.", Type::kGauge);
  for (const auto& [account, balance] : balances) {
    if (!account.starts_with("provider:")) continue;
    w.Sample({{"provider", account.substr(9, account.rfind(':') - 9)}}, static_cast<double>(balance.micros));
  }
  w.Family("gpugeek_ledger_imbalance_micros", "Sum of every ledger balance: 0 unless the ledger is broken.",
           Type::kGauge);
  w.Sample({}, static_cast<double>(cp.billing().Total().micros));
  // Monthly budgets (budgets.h): what each has spent this month (charges posted, net of refunds) over its limit.
  const std::vector<store::BudgetRecord> budgets = cp.billing().budgets().List("");
  const std::string period = Billing::Period(cp.clock().Now());
  w.Family("gpugeek_budget_used_ratio",
           "A monthly budget's spend this month (UTC) over its limit (user=\"\": the whole tenant); 1 = spent.",
           Type::kGauge);
  for (const store::BudgetRecord& b : budgets) {
    w.Sample({{"tenant", b.tenant}, {"user", b.user}},
             static_cast<double>(cp.billing().MonthSpend(b.tenant, b.user, period).micros) /
                 static_cast<double>(b.monthly_limit_micros));
  }
  w.Family("gpugeek_budget_limit_micros", "A monthly budget's limit.", Type::kGauge);
  for (const store::BudgetRecord& b : budgets) {
    w.Sample({{"tenant", b.tenant}, {"user", b.user}}, static_cast<double>(b.monthly_limit_micros));
  }
  // Reserved capacity (reservations.h): GPU time held (charged) and used by the tenant on its held nodes.
  w.Family("gpugeek_reservation_gpu_seconds",
           "A reservation's GPU time: kind=\"held\" (charged, hour by hour) or \"used\" (its tenant's segments on "
           "held nodes, open ones too); held - used went unused.",
           Type::kGauge);
  for (const store::ReservationRecord& r : cp.billing().reservations().List("")) {
    const int64_t used = r.used_gpu_milli_seconds + cp.billing().reservations().OpenUsed(r.id);
    for (const auto& [kind, milli_seconds] : {std::pair{"held", r.held_gpu_milli_seconds}, std::pair{"used", used}}) {
      w.Sample({{"reservation", r.id}, {"tenant", r.tenant}, {"model", r.gpu_model}, {"kind", kind}},
               static_cast<double>(milli_seconds) / 1000.0);
    }
  }
}

}  // namespace

ControlPlaneMetrics::ControlPlaneMetrics(metrics::Registry& registry)
    : registry_(registry),
      transitions_(registry.AddCounter("gpugeek_job_transitions_total", "Job state changes.", {"from", "to"})),
      submissions_(registry.AddCounter("gpugeek_job_submissions_total", "Job submissions by result.", {"result"})),
      recovery_(registry.AddHistogram("gpugeek_job_recovery_duration_seconds",
                                      "From a job's failure (its node's last heartbeat when the node was lost; "
                                      "else its requeue) to RUNNING again.",
                                      {}, RecoveryBuckets())),
      recovery_phase_(registry.AddHistogram("gpugeek_job_recovery_phase_seconds",
                                            "Phases of a recovery: detect (failure -> requeued), stop (-> every "
                                            "member stopped), place (-> placed again), start (-> running).",
                                            {"phase"}, RecoveryBuckets())),
      scheduling_cycle_(registry.AddHistogram("gpugeek_scheduling_cycle_duration_seconds",
                                              "One scheduling pass over the pending queue.", {},
                                              metrics::ExponentialBuckets(0.0001, 4, 10))),
      placements_(registry.AddCounter("gpugeek_scheduling_placements_total", "Jobs placed, by policy.", {"policy"})),
      nodes_lost_(registry.AddCounter("gpugeek_nodes_lost_total",
                                      "Nodes declared down: lease lapsed past the fencing deadline.", {})),
      http_requests_(registry.AddHistogram("gpugeek_http_request_duration_seconds",
                                           "REST API latency by method, route pattern and status code.",
                                           {"method", "route", "code"}, metrics::ExponentialBuckets(0.0005, 2, 17))),
      build_info_(registry.AddGauge("gpugeek_build_info", "1; the version of gpugeek.", {"version"})) {
  build_info_.With({kVersion}).Set(1);
  // Counters that rules compare with increase() exist from the start, at 0: a series that appears only
  // at its first event would leave `increase(...) == 0` with no data (GpugeekQueueStuck never firing).
  submissions_.With({"accepted"});
  submissions_.With({"rejected"});
  nodes_lost_.With({});
}

void ControlPlaneMetrics::NodeLost() { nodes_lost_.With({}).Inc(); }

void ControlPlaneMetrics::DeclarePolicy(const std::string& policy) { placements_.With({policy}); }

void ControlPlaneMetrics::RegisterCollectors(ControlPlane& cp) {
  registry_.AddCollector([&cp](Writer& w) { WriteBilling(cp, w); });
  registry_.AddCollector([&cp](Writer& w) { WriteNodes(cp, w); });
  registry_.AddCollector([&cp](Writer& w) { WritePool(cp, w); });
  registry_.AddCollector([&cp](Writer& w) { WriteJobs(cp, w); });
}

void ControlPlaneMetrics::Transition(JobState from, JobState to) {
  transitions_.With({std::string(api::JobStateName(from)), std::string(api::JobStateName(to))}).Inc();
}

void ControlPlaneMetrics::Submission(bool accepted) { submissions_.With({accepted ? "accepted" : "rejected"}).Inc(); }

void ControlPlaneMetrics::Recovered(const RecoveryPhases& p) {
  recovery_.With({}).Observe(p.total_s);
  recovery_phase_.With({"detect"}).Observe(p.detect_s);
  recovery_phase_.With({"stop"}).Observe(p.stop_s);
  recovery_phase_.With({"place"}).Observe(p.place_s);
  recovery_phase_.With({"start"}).Observe(p.start_s);
}

void ControlPlaneMetrics::SchedulingCycle(Duration elapsed) {
  scheduling_cycle_.With({}).Observe(std::max(0.0, Seconds(elapsed)));
}

void ControlPlaneMetrics::Placed(const std::string& policy) { placements_.With({policy}).Inc(); }

void ControlPlaneMetrics::HttpRequest(const std::string& method, const std::string& route, int status,
                                      Duration elapsed) {
  http_requests_.With({method, route, std::to_string(status)}).Observe(std::max(0.0, Seconds(elapsed)));
}

}  // namespace gpugeek::controlplane
