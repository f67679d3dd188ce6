#include "controlplane/allocation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/json_reader.h"
#include "common/status_macros.h"

namespace gpugeek::controlplane {

nlohmann::json ToJson(const Allocation& a) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : a.members) {
    members.push_back({{"rank", m.rank},
                       {"node", m.node},
                       {"sched_node", m.sched_node},
                       {"gpus", m.gpus},
                       {"gpu_uuids", m.gpu_uuids},
                       {"gpu_milli", m.gpu_milli},
                       {"cpu_milli", m.cpu_milli},
                       {"memory_bytes", m.memory_bytes}});
  }
  return {{"members", members},           {"gpu_model", a.gpu_model}, {"master_addr", a.master_addr},
          {"master_port", a.master_port}, {"released", a.released},   {"reforming", a.reforming}};
}

absl::StatusOr<Allocation> ParseAllocation(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  api::JsonReader r(j, "allocation");
  RETURN_IF_ERROR(r.CheckObject({"members", "gpu_model", "master_addr", "master_port", "released", "reforming"}));
  Allocation a;
  ASSIGN_OR_RETURN(a.gpu_model, r.String("gpu_model", std::string()));
  ASSIGN_OR_RETURN(a.master_addr, r.String("master_addr", std::string()));
  ASSIGN_OR_RETURN(int64_t port, r.Int("master_port", 0, 0, 65535));
  a.master_port = static_cast<int>(port);
  ASSIGN_OR_RETURN(a.released, r.Bool("released", false));
  ASSIGN_OR_RETURN(a.reforming, r.Bool("reforming", false));  // absent in allocations stored before it
  ASSIGN_OR_RETURN(auto members, r.Objects("members"));
  for (const api::JsonReader& m : members) {
    RETURN_IF_ERROR(
        m.CheckObject({"rank", "node", "sched_node", "gpus", "gpu_uuids", "gpu_milli", "cpu_milli", "memory_bytes"}));
    AllocationMember member;
    ASSIGN_OR_RETURN(int64_t rank, m.Int("rank", std::nullopt, 0, 1023));
    member.rank = static_cast<int>(rank);
    ASSIGN_OR_RETURN(member.node, m.String("node"));
    ASSIGN_OR_RETURN(member.sched_node, m.String("sched_node"));
    ASSIGN_OR_RETURN(auto gpus, m.IntList("gpus"));
    for (int64_t g : gpus) member.gpus.push_back(static_cast<int>(g));
    if (m.Has("gpu_uuids")) {  // absent in allocations stored before GPUs were named by UUID
      ASSIGN_OR_RETURN(const nlohmann::json* uuids, m.Raw("gpu_uuids"));
      if (!uuids->is_array()) return m.Error("gpu_uuids", "must be a list of strings");
      for (const nlohmann::json& u : *uuids) {
        if (!u.is_string()) return m.Error("gpu_uuids", "must be a list of strings");
        member.gpu_uuids.push_back(u.get<std::string>());
      }
    }
    ASSIGN_OR_RETURN(member.gpu_milli, m.Int("gpu_milli", 0, 0, 1000));
    ASSIGN_OR_RETURN(member.cpu_milli, m.Int("cpu_milli", 0, 0, INT64_MAX));
    ASSIGN_OR_RETURN(int64_t mem, m.Int("memory_bytes", 0, 0, INT64_MAX));
    member.memory_bytes = static_cast<uint64_t>(mem);
    a.members.push_back(std::move(member));
  }
  return a;
}

std::string Describe(const Allocation& a) {
  std::string out;
  for (const auto& m : a.members) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}[{}]", m.node, fmt::join(m.gpus, ","));
    if (m.gpu_milli > 0 && m.gpu_milli < 1000) out += fmt::format("@{}m", m.gpu_milli);
  }
  if (!a.gpu_model.empty()) out += fmt::format(" ({})", a.gpu_model);
  return out;
}

std::vector<std::string> MemberNodes(const Allocation& a) {
  std::vector<std::string> nodes(a.members.size());
  for (const AllocationMember& m : a.members) {
    if (m.rank >= 0 && static_cast<size_t>(m.rank) < nodes.size()) nodes[static_cast<size_t>(m.rank)] = m.node;
  }
  return nodes;
}

}  // namespace gpugeek::controlplane
