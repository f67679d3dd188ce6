#include "controlplane/controllers/gpu_health.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "controlplane/controllers/transitions.h"

namespace gpugeek::controlplane {
namespace {

// Why the sample says the GPU cannot be used now, or "" (XIDs are judged apart: they are events).
std::string StickyProblem(const hw::GpuHealth& h) {
  if (h.lost) return "lost (the device stopped answering)";
  if (h.ecc_uncorrected.has_value() && *h.ecc_uncorrected > 0) {
    return fmt::format("{} uncorrectable ECC error(s) since the driver loaded", *h.ecc_uncorrected);
  }
  if (h.retirement_pending.value_or(false)) return "a memory page retirement is pending (needs a GPU reset)";
  return "";
}

}  // namespace

void GpuHealthController::Reconcile(ControllerContext& ctx, MonoTime now) {
  const std::map<std::string, std::map<int, std::vector<uint64_t>>> xids = ctx.leases.TakeXids();
  const std::map<std::string, std::vector<hw::GpuSample>> samples = ctx.leases.Samples();
  for (auto& [name, node] : ctx.state.nodes) {
    const std::vector<hw::GpuDevice>& gpus = node.registration.inventory.gpus;
    // New XIDs: hardware ones (re)start the GPU's quarantine.
    if (auto x = xids.find(name); x != xids.end()) {
      for (const auto& [index, codes] : x->second) {
        if (index < 0 || index >= static_cast<int>(gpus.size())) continue;
        for (uint64_t code : codes) {
          if (HardwareXids().count(code) == 0) {
            spdlog::info("control plane: node {} GPU {} ({}) raised XID {} (an application error: not quarantined)",
                         name, index, gpus[index].uuid, code);
            continue;
          }
          quarantine_[{name, gpus[index].uuid}] = {now + ctx.options.gpu_quarantine, code};
          spdlog::warn("control plane: node {} GPU {} ({}) raised XID {}: quarantined for {} s", name, index,
                       gpus[index].uuid, code,
                       std::chrono::duration_cast<std::chrono::seconds>(ctx.options.gpu_quarantine).count());
        }
      }
    }
    std::map<std::string, std::string> unhealthy;
    auto s = samples.find(name);
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string& uuid = gpus[i].uuid;
      std::string why;
      if (s != samples.end() && i < s->second.size()) why = StickyProblem(s->second[i].health);
      if (auto q = quarantine_.find({name, uuid}); q != quarantine_.end()) {
        if (now < q->second.first) {
          const auto left = std::chrono::duration_cast<std::chrono::seconds>(q->second.first - now).count();
          const std::string xid = fmt::format("XID {} (quarantined for {} s more)", q->second.second, left);
          why = why.empty() ? xid : why + "; " + xid;
        } else {
          quarantine_.erase(q);
        }
      }
      if (!why.empty()) unhealthy[uuid] = fmt::format("GPU {}: {}", i, why);
    }
    // Only the set of GPUs matters to placement (the "s more" in a reason changes every second).
    const bool same_set = unhealthy.size() == node.unhealthy_gpus.size() &&
                          std::equal(unhealthy.begin(), unhealthy.end(), node.unhealthy_gpus.begin(),
                                     [](const auto& a, const auto& b) { return a.first == b.first; });
    std::set<std::string> newly;
    for (const auto& [uuid, why] : unhealthy) {
      if (node.unhealthy_gpus.count(uuid) == 0) newly.insert(uuid);
    }
    for (const auto& [uuid, why] : node.unhealthy_gpus) {
      if (unhealthy.count(uuid) == 0) spdlog::info("control plane: node {} GPU {} is healthy again", name, uuid);
    }
    if (unhealthy != node.unhealthy_gpus) ctx.state.dirty = true;  // the node view shows the reasons
    node.unhealthy_gpus = unhealthy;
    if (same_set) continue;
    ctx.state.CapacityChanged();  // the scheduler holds the new set as taken
    // Jobs with a live member on a GPU that just became unhealthy move elsewhere.
    for (const std::string& id : ctx.state.JobsOn(name)) {
      LiveJob& live = ctx.state.live.at(id);
      if (api::IsTerminal(live.record.state) || live.draining) continue;
      std::string hit;
      for (const AllocationMember& m : live.allocation.members) {
        if (m.node != name || live.members[m.rank].exited) continue;
        for (const std::string& uuid : m.gpu_uuids) {
          if (newly.count(uuid) > 0) hit = fmt::format("rank {} on node {} {}", m.rank, name, unhealthy.at(uuid));
        }
      }
      if (hit.empty()) continue;
      spdlog::warn("control plane: job {} moves: {}", id, hit);
      absl::Status st = RetryOrFail(ctx, id, api::RetryCause::kNodeFailure, fmt::format("unhealthy GPU: {}", hit));
      if (!st.ok()) spdlog::error("control plane: job {} on an unhealthy GPU: {}", id, st);
    }
  }
  // Quarantines of nodes that left.
  for (auto it = quarantine_.begin(); it != quarantine_.end();) {
    it = ctx.state.nodes.count(it->first.first) == 0 ? quarantine_.erase(it) : std::next(it);
  }
}

}  // namespace gpugeek::controlplane
