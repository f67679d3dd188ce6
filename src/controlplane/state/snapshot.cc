#include "controlplane/state/snapshot.h"

#include <algorithm>

#include "api/job_state.h"

namespace gpugeek::controlplane {

std::vector<std::string> State::JobsOn(const std::string& node) const {
  std::vector<std::string> ids;
  for (const auto& [id, job] : live) {
    for (const AllocationMember& m : job.allocation.members) {
      if (m.node == node) {
        ids.push_back(id);
        break;
      }
    }
  }
  return ids;
}

std::unordered_map<std::string, std::vector<api::Assignment>> BuildAssignments(const State& state) {
  std::unordered_map<std::string, std::vector<api::Assignment>> out;
  for (const auto& [id, live] : state.live) {
    for (const AllocationMember& m : live.allocation.members) {
      if (live.members[m.rank].exited) continue;
      api::Assignment a;
      a.job_id = id;
      a.epoch = live.record.epoch;
      a.node_rank = m.rank;
      a.num_nodes = static_cast<int>(live.allocation.members.size());
      a.gpu_uuids = m.gpu_uuids;
      a.gpu_milli = m.gpu_milli;
      a.cpu_milli = m.cpu_milli;
      a.memory_bytes = m.memory_bytes;
      a.master_addr = live.allocation.master_addr;
      a.master_port = live.allocation.master_port;
      a.run = live.spec.run;
      a.setup = live.spec.setup;
      a.workdir_digest = live.spec.workdir_digest;
      a.file_archives = live.spec.file_archives;
      if (!live.spec.dataset.empty()) {
        a.dataset = live.spec.dataset;
        a.dataset_commit = live.spec.dataset_rev;  // admission stored the resolved digest
      }
      if (!live.spec.weights.empty()) {
        a.model_owner = live.spec.weights_owner;  // admission wrote the owner and the resolved digest
        a.model = live.spec.weights;
        a.model_commit = live.spec.weights_rev;
        a.model_signer_pem = live.spec.weights_signer_pem;
      }
      a.launcher = live.spec.launcher;
      a.image = live.spec.image;
      a.engine = live.spec.engine;
      a.procs_per_node = live.spec.procs_per_node;
      a.tp = live.tp;
      a.pp = live.pp;
      a.dp = live.dp;
      a.zero_stage = live.zero_stage;
      a.micro_batch = live.micro_batch;
      a.env = live.spec.env;
      a.tenant = live.record.tenant;
      a.checkpoint_dir = live.spec.checkpoint.dir;
      a.grace_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(live.stop_grace.value_or(live.spec.checkpoint.grace))
              .count();
      a.restart_count = live.record.restarts - (live.draining ? 1 : 0);
      a.cancel = api::IsTerminal(live.record.state) || live.draining || live.reform;
      a.metrics_stored = std::max<int64_t>(0, live.members[static_cast<size_t>(m.rank)].metrics_stored);
      a.platform_env = live.record.platform_env;
      out[m.node].push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace gpugeek::controlplane
