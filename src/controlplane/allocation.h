#pragma once
// Allocation: where a job's gang runs, as the control plane stores it (JobRecord::allocation_json)
// and turns into agent assignments.
//
// An allocation is live while `released` is false: its resources are held in the scheduler's
// snapshot. The control plane releases it when every member has confirmed its exit (or its node
// was declared down), and keeps the released allocation for display.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace gpugeek::controlplane {

struct AllocationMember {
  int rank = 0;                        // node rank in the gang, 0..members-1
  std::string node;                    // registered node name
  std::string sched_node;              // scheduler node name (node_model.h)
  std::vector<int> gpus;               // device indices on the node when placed (display; the UUIDs are authoritative)
  std::vector<std::string> gpu_uuids;  // the same GPUs by UUID: what the agent is told and fencing uses
  int64_t gpu_milli = 0;               // per GPU
  int64_t cpu_milli = 0;
  uint64_t memory_bytes = 0;
};

struct Allocation {
  std::vector<AllocationMember> members;  // rank order
  std::string gpu_model;                  // catalog id of the GPUs
  std::string master_addr;                // rank 0's node address
  int master_port = 0;
  bool released = false;
  // An elastic gang stopping its survivors before it re-forms (LiveJob::reform): stored, so that a server
  // restart in between still takes their exits for the stop it asked for, not for the job's error.
  bool reforming = false;
};

nlohmann::json ToJson(const Allocation& a);
// InvalidArgument naming the field when the text is not an allocation (a defect: only ToJson writes it).
absl::StatusOr<Allocation> ParseAllocation(const std::string& json_text);

// "2 x node-a[0,1,2,3] (H100-SXM-80GB)"-style one-line summary for tables and events.
std::string Describe(const Allocation& a);

// The node of each member, indexed by rank.
std::vector<std::string> MemberNodes(const Allocation& a);

}  // namespace gpugeek::controlplane
