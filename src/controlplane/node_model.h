#pragma once
// How a registered node appears to the scheduler.
//
// A sched::NodeSpec holds GPUs of one model, so a node with several GPU models (an emulated
// "8xH100-SXM-80GB,2xL4" or a workstation with mixed cards) becomes one scheduler node per model,
// named "<node>/<model>", its CPU and memory split in proportion to the GPUs (rounded down; the
// remainder goes to the first group). A node without GPUs is one CPU-only scheduler node.
// NVLink domains are the connected components of the node's NVLink / XGMI links, so a request
// that wants one domain (topology scoring) can find it.

#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "sched/cluster.h"

namespace gpugeek::controlplane {

// The scheduler node label holding a node's region (its agent's --region); job specs' resources.regions
// select on it.
inline constexpr char kRegionLabel[] = "region";

// One scheduler node cut from a registered node.
struct SchedNode {
  std::string node;               // the registered node's name
  sched::NodeSpec spec;           // name "<node>/<model>" (or "<node>" when it has one model)
  std::vector<int> device_index;  // scheduler GPU i is the node's device device_index[i]
};

// The scheduler nodes of `registration`. GPUs the catalog does not know keep their raw name as the
// model, so they are still scheduled (by that exact name).
std::vector<SchedNode> ToSchedNodes(const api::Registration& registration);

}  // namespace gpugeek::controlplane
