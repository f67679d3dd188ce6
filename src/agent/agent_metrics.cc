#include "agent/agent_metrics.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpugeek::agent {

std::string_view ExitOutcomeName(ExitOutcome o) {
  switch (o) {
    case ExitOutcome::kSucceeded:
      return "succeeded";
    case ExitOutcome::kFailed:
      return "failed";
    case ExitOutcome::kOomKilled:
      return "oom_killed";
    case ExitOutcome::kCancelled:
      return "cancelled";
  }
  return "failed";
}

ExitOutcome OutcomeOf(const WorkloadExit& e) {
  if (e.oom_kills > 0) return ExitOutcome::kOomKilled;
  if (e.cancelled) return ExitOutcome::kCancelled;
  return e.succeeded() ? ExitOutcome::kSucceeded : ExitOutcome::kFailed;
}

struct AgentMetrics::Instruments {
  metrics::Counter* heartbeats_ok = nullptr;
  metrics::Counter* heartbeats_error = nullptr;
  metrics::Histogram* heartbeat_duration = nullptr;
  metrics::Family<metrics::Gauge>* last_success = nullptr;  // child created on the first success
  metrics::Gauge* workloads = nullptr;
  std::map<ExitOutcome, metrics::Counter*> exits;
  metrics::Counter* fenced = nullptr;
};

std::shared_ptr<AgentMetrics> AgentMetrics::Create(metrics::Registry& registry, const std::string& node,
                                                   const std::string& version) {
  auto in = std::make_unique<Instruments>();
  auto& heartbeats =
      registry.AddCounter("gpugeek_agent_heartbeats_total",
                          "Heartbeats this agent sent, by result (ok: the server answered 2xx).", {"node", "result"});
  in->heartbeats_ok = &heartbeats.With({node, "ok"});
  in->heartbeats_error = &heartbeats.With({node, "error"});
  // 0.5 ms .. 8.2 s; the request timeout is 10 s.
  in->heartbeat_duration =
      &registry
           .AddHistogram("gpugeek_agent_heartbeat_duration_seconds", "Round trip of one heartbeat to the server.",
                         {"node"}, metrics::ExponentialBuckets(0.0005, 2, 15))
           .With({node});
  in->last_success = &registry.AddGauge("gpugeek_agent_last_heartbeat_success_timestamp_seconds",
                                        "Unix time of the last heartbeat the server acknowledged.", {"node"});
  in->workloads =
      &registry
           .AddGauge("gpugeek_agent_workloads", "Workloads this agent runs now (including ones stopping).", {"node"})
           .With({node});
  auto& exits =
      registry.AddCounter("gpugeek_agent_workload_exits_total",
                          "Workloads that ended on this agent, by outcome (succeeded, failed, oom_killed, cancelled).",
                          {"node", "outcome"});
  for (ExitOutcome o :
       {ExitOutcome::kSucceeded, ExitOutcome::kFailed, ExitOutcome::kOomKilled, ExitOutcome::kCancelled}) {
    in->exits[o] = &exits.With({node, std::string(ExitOutcomeName(o))});
  }
  in->fenced = &registry
                    .AddCounter("gpugeek_agent_fenced_total",
                                "Times this agent fenced itself: its lease ran out with no heartbeat answered, so it "
                                "stopped every workload it held.",
                                {"node"})
                    .With({node});
  registry.AddGauge("gpugeek_build_info", "1, labelled with the gpugeek version.", {"node", "version"})
      .With({node, version})
      .Set(1);
  std::shared_ptr<AgentMetrics> self(new AgentMetrics(node, std::move(in)));
  registry.AddCollector([self](metrics::Writer& w) { self->Collect(w); });
  return self;
}

AgentMetrics::AgentMetrics(std::string node, std::unique_ptr<Instruments> instruments)
    : node_(std::move(node)), in_(std::move(instruments)) {}

void AgentMetrics::SetInventory(const hw::NodeInventory& inventory) {
  std::lock_guard<std::mutex> lock(mu_);
  gpus_ = inventory.gpus;
  for (hw::GpuDevice& d : gpus_) {
    d.telemetry = {};
    d.health = {};
  }
  sampled_ = false;
  xids_.clear();
}

void AgentMetrics::RecordSamples(const std::vector<hw::GpuSample>& samples) {
  std::lock_guard<std::mutex> lock(mu_);
  if (samples.size() != gpus_.size()) {
    spdlog::warn("agent {}: metrics: {} GPU samples for {} GPUs; ignored", node_, samples.size(), gpus_.size());
    return;
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    gpus_[i].telemetry = samples[i].telemetry;
    gpus_[i].health = samples[i].health;
    for (uint64_t xid : samples[i].health.xid_errors) ++xids_[{gpus_[i].index, xid}];
  }
  sampled_ = true;
}

void AgentMetrics::RecordHeartbeat(bool acknowledged, Duration round_trip, TimePoint now) {
  (acknowledged ? in_->heartbeats_ok : in_->heartbeats_error)->Inc();
  in_->heartbeat_duration->Observe(std::chrono::duration<double>(round_trip).count());
  if (acknowledged) {
    in_->last_success->With({node_}).Set(std::chrono::duration<double>(now.time_since_epoch()).count());
  }
}

void AgentMetrics::SetWorkloads(size_t running) { in_->workloads->Set(static_cast<double>(running)); }

void AgentMetrics::RecordExit(ExitOutcome outcome) { in_->exits.at(outcome)->Inc(); }

void AgentMetrics::RecordFenced() { in_->fenced->Inc(); }

void AgentMetrics::Collect(metrics::Writer& w) const {
  using metrics::Type;
  std::lock_guard<std::mutex> lock(mu_);
  const auto labels = [&](const hw::GpuDevice& d) -> metrics::Labels {
    return {{"node", node_},
            {"gpu", std::to_string(d.index)},
            {"uuid", d.uuid},
            {"model", d.model_id.empty() ? d.name : d.model_id},
            {"vendor", std::string(hw::VendorName(d.vendor))}};
  };
  // One family at a time (the text format wants each family's samples together), every GPU in it.
  const auto family = [&](const char* name, const char* help, Type type, const auto& value_of) {
    w.Family(name, help, type);
    for (const hw::GpuDevice& d : gpus_) {
      if (const std::optional<double> v = value_of(d); v.has_value()) w.Sample(labels(d), *v);
    }
  };
  using Value = std::optional<double>;
  const bool sampled = sampled_;
  const auto sampled_value = [sampled](const auto& opt) -> Value {
    if (!sampled || !opt.has_value()) return std::nullopt;
    return static_cast<double>(*opt);
  };

  w.Family("gpugeek_gpu_info", "1 per GPU; name is what the vendor library reported, driver its driver version.",
           Type::kGauge);
  for (const hw::GpuDevice& d : gpus_) {
    metrics::Labels l = labels(d);
    l.emplace_back("name", d.name);
    l.emplace_back("driver", d.driver_version);
    w.Sample(l, 1);
  }
  family("gpugeek_gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU, 0..1.",
         Type::kGauge, [&](const hw::GpuDevice& d) -> Value {
           Value v = sampled_value(d.telemetry.utilization_percent);
           return v.has_value() ? Value(*v / 100) : std::nullopt;
         });
  family("gpugeek_gpu_memory_used_bytes", "Device memory in use.", Type::kGauge,
         [&](const hw::GpuDevice& d) { return sampled_value(d.telemetry.memory_used_bytes); });
  family("gpugeek_gpu_memory_total_bytes", "Device memory.", Type::kGauge, [](const hw::GpuDevice& d) -> Value {
    if (d.memory_total_bytes == 0) return std::nullopt;  // not reported
    return static_cast<double>(d.memory_total_bytes);
  });
  family("gpugeek_gpu_temperature_celsius", "GPU die (NVIDIA) / edge (AMD) temperature.", Type::kGauge,
         [&](const hw::GpuDevice& d) { return sampled_value(d.telemetry.temperature_celsius); });
  family("gpugeek_gpu_power_watts", "Board (NVIDIA) / socket (AMD) power draw.", Type::kGauge,
         [&](const hw::GpuDevice& d) -> Value {
           Value v = sampled_value(d.telemetry.power_milliwatts);
           return v.has_value() ? Value(*v / 1000) : std::nullopt;
         });
  family("gpugeek_gpu_ecc_uncorrected_errors_total", "Uncorrectable ECC errors since the driver loaded.",
         Type::kCounter, [&](const hw::GpuDevice& d) { return sampled_value(d.health.ecc_uncorrected); });
  family("gpugeek_gpu_retired_pages", "Memory pages retired (NVIDIA) / reserved (AMD).", Type::kGauge,
         [&](const hw::GpuDevice& d) { return sampled_value(d.health.retired_pages); });
  family("gpugeek_gpu_healthy",
         "1 healthy; 0 lost, uncorrectable ECC errors, a page retirement pending or an XID in the last sample.",
         Type::kGauge, [&](const hw::GpuDevice& d) -> Value {
           if (!sampled) return std::nullopt;
           return d.health.Healthy() ? 1.0 : 0.0;
         });
  w.Family("gpugeek_gpu_xid_errors_total", "NVIDIA XID events this agent saw, by XID code.", Type::kCounter);
  for (const auto& [key, count] : xids_) {
    const auto& [index, xid] = key;
    if (index < 0 || static_cast<size_t>(index) >= gpus_.size()) continue;
    metrics::Labels l = labels(gpus_[static_cast<size_t>(index)]);
    l.emplace_back("xid", std::to_string(xid));
    w.Sample(l, static_cast<double>(count));
  }
}

}  // namespace gpugeek::agent
