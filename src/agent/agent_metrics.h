#pragma once
// AgentMetrics: the agent's instruments in a metrics::Registry, exactly the "Agent" half of
// docs/metrics.md (names, types and labels are that contract).
//
// Per GPU (labels node, gpu, uuid, model, vendor), written by a collector at scrape time from the
// samples the agent already takes for its heartbeats (the devices are never sampled per scrape):
//   gpugeek_gpu_info{...,name,driver} 1, gpugeek_gpu_utilization_ratio, gpugeek_gpu_memory_used_bytes,
//   gpugeek_gpu_memory_total_bytes, gpugeek_gpu_temperature_celsius, gpugeek_gpu_power_watts,
//   gpugeek_gpu_ecc_uncorrected_errors_total, gpugeek_gpu_retired_pages, gpugeek_gpu_healthy,
//   gpugeek_gpu_xid_errors_total{...,xid}.
// A value the vendor library does not report (nullopt in hw::GpuTelemetry / hw::GpuHealth) is absent,
// never 0; before the first sample only gpugeek_gpu_info and gpugeek_gpu_memory_total_bytes are there.
// XIDs are counted per (GPU, code) over every sample this agent took (NVML delivers each event once).
//
// Per agent (label node): gpugeek_agent_heartbeats_total{result=ok|error},
// gpugeek_agent_heartbeat_duration_seconds (histogram), gpugeek_agent_last_heartbeat_success_timestamp_seconds
// (absent until one succeeded), gpugeek_agent_workloads, gpugeek_agent_workload_exits_total{outcome},
// gpugeek_build_info{version} 1.
//
// Thread-safety: every method may be called from any thread. The collector holds a shared_ptr to this
// object, so a scrape after the agent is gone still reads valid (last) values.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/executor.h"
#include "common/clock.h"
#include "common/version.h"
#include "hw/device.h"
#include "metrics/registry.h"

namespace gpugeek::agent {

// How a workload ended, as gpugeek_agent_workload_exits_total labels it.
enum class ExitOutcome { kSucceeded, kFailed, kOomKilled, kCancelled };
// "succeeded", "failed", "oom_killed", "cancelled".
std::string_view ExitOutcomeName(ExitOutcome o);
// OOM kills in its cgroup win over everything (a cancelled workload may be OOM-killed while it
// checkpoints); then a cancel (whatever the exit code); then exit code 0 succeeded, else failed.
ExitOutcome OutcomeOf(const WorkloadExit& e);

class AgentMetrics {
 public:
  // Adds the agent's families and its GPU collector to `registry` (which must outlive every use of the
  // instruments; call before the registry is rendered concurrently). One agent per registry: a second
  // would write every family twice, and the writer drops the duplicates.
  static std::shared_ptr<AgentMetrics> Create(metrics::Registry& registry, const std::string& node,
                                              const std::string& version = kVersion);

  // The GPUs the node holds (gpugeek_gpu_info, memory_total_bytes); forgets earlier samples.
  void SetInventory(const hw::NodeInventory& inventory);
  // One sample per GPU of the inventory, in its order; ignored (logged) when the count differs.
  void RecordSamples(const std::vector<hw::GpuSample>& samples);
  // A heartbeat's round trip; `acknowledged` when the server answered 2xx. `now` is Unix time.
  void RecordHeartbeat(bool acknowledged, Duration round_trip, TimePoint now);
  void SetWorkloads(size_t running);
  void RecordExit(ExitOutcome outcome);
  // The agent fenced itself (its lease ran out; see agent.h): gpugeek_agent_fenced_total + 1.
  void RecordFenced();

 private:
  struct Instruments;
  AgentMetrics(std::string node, std::unique_ptr<Instruments> instruments);
  void Collect(metrics::Writer& w) const;

  const std::string node_;
  const std::unique_ptr<Instruments> in_;
  mutable std::mutex mu_;
  std::vector<hw::GpuDevice> gpus_;                    // guarded by mu_; telemetry/health of the last sample
  bool sampled_ = false;                               // guarded by mu_
  std::map<std::pair<int, uint64_t>, uint64_t> xids_;  // guarded by mu_; (gpu index, XID) -> events
};

}  // namespace gpugeek::agent
