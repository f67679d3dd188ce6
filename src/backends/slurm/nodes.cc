#include "backends/slurm/nodes.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/status_macros.h"

namespace gpugeek::backends::slurm {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

bool HasFlag(const SlurmNode& n, std::initializer_list<const char*> flags) {
  for (const std::string& f : n.state_flags) {
    for (const char* want : flags) {
      if (f == want) return true;
    }
  }
  return false;
}

absl::Status FieldError(const std::string& node, const char* field, const char* want) {
  return absl::InvalidArgumentError(fmt::format("slurmrestd node '{}': field '{}' is not {}", node, field, want));
}

absl::StatusOr<std::string> String(const nlohmann::json& n, const std::string& node, const char* field) {
  const auto it = n.find(field);
  if (it == n.end() || it->is_null()) return std::string();
  if (!it->is_string()) return FieldError(node, field, "a string");
  return it->get<std::string>();
}

absl::StatusOr<int64_t> Integer(const nlohmann::json& n, const std::string& node, const char* field) {
  const auto it = n.find(field);
  if (it == n.end() || it->is_null()) return 0;
  if (!it->is_number_integer()) return FieldError(node, field, "an integer");
  const int64_t v = it->get<int64_t>();
  if (v < 0) return FieldError(node, field, "a non-negative integer");
  return v;
}

absl::StatusOr<std::vector<std::string>> Strings(const nlohmann::json& n, const std::string& node, const char* field) {
  std::vector<std::string> out;
  const auto it = n.find(field);
  if (it == n.end() || it->is_null()) return out;
  if (!it->is_array()) return FieldError(node, field, "a list of strings");
  for (const auto& v : *it) {
    if (!v.is_string()) return FieldError(node, field, "a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

const char* NodeConditionName(NodeCondition c) {
  switch (c) {
    case NodeCondition::kReady:
      return "ready";
    case NodeCondition::kDraining:
      return "draining";
    case NodeCondition::kDown:
      return "down";
  }
  return "?";
}

NodeCondition SlurmNode::Condition() const {
  static const char* const kLost[] = {"down", "error", "unknown", "future"};
  if (std::any_of(std::begin(kLost), std::end(kLost), [&](const char* s) { return state == s; }) ||
      HasFlag(*this, {"NOT_RESPONDING", "FAIL", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"})) {
    return NodeCondition::kDown;
  }
  if (HasFlag(*this, {"DRAIN", "MAINTENANCE", "RESERVED", "REBOOT_REQUESTED", "REBOOT_ISSUED"})) {
    return NodeCondition::kDraining;
  }
  return NodeCondition::kReady;
}

absl::StatusOr<std::vector<SlurmNode>> ParseNodes(const nlohmann::json& reply) {
  if (!reply.is_object()) return absl::InvalidArgumentError("slurmrestd nodes reply is not a JSON object");
  if (const auto errors = reply.find("errors"); errors != reply.end() && errors->is_array() && !errors->empty()) {
    const nlohmann::json& e = (*errors)[0];
    return absl::FailedPreconditionError(
        fmt::format("slurmrestd: {}", e.is_object() ? e.dump() : std::string("error")));
  }
  const auto nodes = reply.find("nodes");
  if (nodes == reply.end() || !nodes->is_array()) {
    return absl::InvalidArgumentError("slurmrestd nodes reply has no \"nodes\" list (is the API v0.0.38?)");
  }
  std::vector<SlurmNode> out;
  out.reserve(nodes->size());
  for (size_t i = 0; i < nodes->size(); ++i) {
    const nlohmann::json& n = (*nodes)[i];
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string() || n["name"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(fmt::format("slurmrestd node #{} has no name", i));
    }
    SlurmNode node;
    node.name = n["name"].get<std::string>();
    ASSIGN_OR_RETURN(node.address, String(n, node.name, "address"));
    ASSIGN_OR_RETURN(node.state, String(n, node.name, "state"));
    ASSIGN_OR_RETURN(node.state_flags, Strings(n, node.name, "state_flags"));
    ASSIGN_OR_RETURN(node.reason, String(n, node.name, "reason"));
    ASSIGN_OR_RETURN(node.partitions, Strings(n, node.name, "partitions"));
    ASSIGN_OR_RETURN(const std::string gres, String(n, node.name, "gres"));
    ASSIGN_OR_RETURN(const std::string gres_used, String(n, node.name, "gres_used"));
    auto gpus = ParseGpuGres(gres);
    if (!gpus.ok())
      return absl::InvalidArgumentError(
          fmt::format("slurmrestd node '{}': {}", node.name, std::string(gpus.status().message())));
    node.gpus = *std::move(gpus);
    auto used = ParseGpuGres(gres_used);
    if (!used.ok())
      return absl::InvalidArgumentError(
          fmt::format("slurmrestd node '{}': {}", node.name, std::string(used.status().message())));
    node.gpus_used = *std::move(used);
    ASSIGN_OR_RETURN(node.cpus, Integer(n, node.name, "cpus"));
    ASSIGN_OR_RETURN(node.alloc_cpus, Integer(n, node.name, "alloc_cpus"));
    ASSIGN_OR_RETURN(const int64_t memory_mib, Integer(n, node.name, "real_memory"));
    ASSIGN_OR_RETURN(const int64_t alloc_mib, Integer(n, node.name, "alloc_memory"));
    if (memory_mib > (int64_t{1} << 40) || alloc_mib > (int64_t{1} << 40)) {
      return FieldError(node.name, "real_memory", "a memory size in MiB below 2^40");
    }
    node.memory_bytes = memory_mib * kMiB;
    node.alloc_memory_bytes = alloc_mib * kMiB;
    out.push_back(std::move(node));
  }
  return out;
}

}  // namespace gpugeek::backends::slurm
