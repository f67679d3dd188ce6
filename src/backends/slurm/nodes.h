#pragma once
// Slurm nodes as slurmrestd (OpenAPI v0.0.38, Slurm 22.05) reports them, and what they mean to the pool.
//
// `GET /slurm/v0.0.38/nodes` answers {"nodes": [{"name", "address", "state" (base state, lower case:
// idle, mixed, allocated, down, ...), "state_flags" (upper case: DRAIN, NOT_RESPONDING, ...), "reason",
// "partitions", "gres", "gres_used", "cpus", "alloc_cpus", "real_memory" (MiB), "alloc_memory" (MiB)}]}.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "backends/slurm/gres.h"

namespace gpugeek::backends::slurm {

// What a Slurm node state means for placing gpugeek work there.
enum class NodeCondition {
  kReady,     // schedulable: idle, mixed or allocated, no blocking flag
  kDraining,  // runs what it has, takes nothing new: DRAIN, MAINTENANCE, RESERVED, REBOOT_* flags
  kDown,      // lost: base state down / error / unknown / future, or NOT_RESPONDING, FAIL, POWER* flags;
              // Slurm kills or requeues its jobs, so for the pool it is a node failure
};
const char* NodeConditionName(NodeCondition c);

struct SlurmNode {
  std::string name;
  std::string address;
  std::string state;                     // base state as reported ("idle")
  std::vector<std::string> state_flags;  // as reported ("DRAIN")
  std::string reason;
  std::vector<std::string> partitions;
  std::vector<GpuGres> gpus;       // configured GPU GRES
  std::vector<GpuGres> gpus_used;  // allocated now
  int64_t cpus = 0;
  int64_t alloc_cpus = 0;
  int64_t memory_bytes = 0;        // real_memory
  int64_t alloc_memory_bytes = 0;  // alloc_memory

  NodeCondition Condition() const;
};

// The nodes of a slurmrestd reply. InvalidArgument naming the node and field when the reply is not the
// v0.0.38 shape (no "nodes" array, a node without a name, a field of the wrong type, an unreadable gres);
// the reply's own "errors" become FailedPrecondition with Slurm's message.
absl::StatusOr<std::vector<SlurmNode>> ParseNodes(const nlohmann::json& reply);

}  // namespace gpugeek::backends::slurm
