#include "hw/inventory_json.h"

#include "fmt/format.h"

namespace gpugeek::hw {
namespace {

using nlohmann::json;

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& v) {
  if (v.has_value()) j[key] = *v;
}

template <typename T>
void GetOptional(const json& j, const char* key, std::optional<T>& v) {
  if (auto it = j.find(key); it != j.end() && !it->is_null()) v = it->get<T>();
}

json TelemetryToJson(const GpuTelemetry& t) {
  json j = json::object();
  PutOptional(j, "utilization_percent", t.utilization_percent);
  PutOptional(j, "memory_used_bytes", t.memory_used_bytes);
  PutOptional(j, "temperature_celsius", t.temperature_celsius);
  PutOptional(j, "power_milliwatts", t.power_milliwatts);
  return j;
}

GpuTelemetry TelemetryFromJson(const json& j) {
  GpuTelemetry t;
  GetOptional(j, "utilization_percent", t.utilization_percent);
  GetOptional(j, "memory_used_bytes", t.memory_used_bytes);
  GetOptional(j, "temperature_celsius", t.temperature_celsius);
  GetOptional(j, "power_milliwatts", t.power_milliwatts);
  return t;
}

json HealthToJson(const GpuHealth& h) {
  json j = {{"lost", h.lost}, {"xid_errors", h.xid_errors}, {"error", h.error}};
  PutOptional(j, "ecc_uncorrected", h.ecc_uncorrected);
  PutOptional(j, "retired_pages", h.retired_pages);
  PutOptional(j, "retirement_pending", h.retirement_pending);
  return j;
}

GpuHealth HealthFromJson(const json& j) {
  GpuHealth h;
  h.lost = j.at("lost").get<bool>();
  h.xid_errors = j.at("xid_errors").get<std::vector<uint64_t>>();
  h.error = j.at("error").get<std::string>();
  GetOptional(j, "ecc_uncorrected", h.ecc_uncorrected);
  GetOptional(j, "retired_pages", h.retired_pages);
  GetOptional(j, "retirement_pending", h.retirement_pending);
  return h;
}

std::optional<Vendor> VendorFromName(const std::string& name) {
  for (Vendor v : {Vendor::kNvidia, Vendor::kAmd, Vendor::kUndisclosed}) {
    if (VendorName(v) == name) return v;
  }
  return std::nullopt;
}

LinkKind KindFromJson(const json& j) {
  std::string label = j.get<std::string>();
  auto kind = LinkKindFromLabel(label);
  if (!kind.has_value()) throw std::invalid_argument(fmt::format("unknown link kind '{}'", label));
  return *kind;
}

}  // namespace

nlohmann::json InventoryToJson(const NodeInventory& inv) {
  json gpus = json::array();
  for (const GpuDevice& d : inv.gpus) {
    gpus.push_back({{"index", d.index},
                    {"vendor", std::string(VendorName(d.vendor))},
                    {"name", d.name},
                    {"model_id", d.model_id},
                    {"uuid", d.uuid},
                    {"pci_bus_id", d.pci_bus_id},
                    {"memory_total_bytes", d.memory_total_bytes},
                    {"numa_node", d.numa_node},
                    {"driver_version", d.driver_version},
                    {"runtime_version", d.runtime_version},
                    {"source", d.source},
                    {"source_index", d.source_index},
                    {"telemetry", TelemetryToJson(d.telemetry)},
                    {"health", HealthToJson(d.health)}});
  }
  json links = json::array();
  for (const auto& row : inv.links) {
    json r = json::array();
    for (const PeerLink& l : row) {
      r.push_back({{"kind", std::string(LinkKindLabel(l.kind))},
                   {"links", l.links},
                   {"bytes_per_second", l.bytes_per_second},
                   {"pcie", std::string(LinkKindLabel(l.pcie))}});
    }
    links.push_back(std::move(r));
  }
  return {{"schema", kInventorySchema},
          {"host",
           {{"hostname", inv.host.hostname},
            {"cpu_cores", inv.host.cpu_cores},
            {"memory_bytes", inv.host.memory_bytes},
            {"numa_nodes", inv.host.numa_nodes},
            {"cpu_model", inv.host.cpu_model}}},
          {"gpus", std::move(gpus)},
          {"links", std::move(links)},
          {"problems", inv.problems}};
}

absl::StatusOr<NodeInventory> InventoryFromJson(const nlohmann::json& j) {
  NodeInventory inv;
  // nlohmann reports missing keys and wrong types by throwing; this is its boundary.
  try {
    if (!j.is_object()) return absl::InvalidArgumentError("inventory JSON must be an object");
    if (j.at("schema").get<std::string>() != kInventorySchema) {
      return absl::InvalidArgumentError(fmt::format("inventory schema must be '{}'", kInventorySchema));
    }
    const json& host = j.at("host");
    inv.host.hostname = host.at("hostname").get<std::string>();
    inv.host.cpu_cores = host.at("cpu_cores").get<int>();
    inv.host.memory_bytes = host.at("memory_bytes").get<uint64_t>();
    inv.host.numa_nodes = host.at("numa_nodes").get<int>();
    inv.host.cpu_model = host.at("cpu_model").get<std::string>();
    for (const json& g : j.at("gpus")) {
      GpuDevice d;
      d.index = g.at("index").get<int>();
      auto vendor = VendorFromName(g.at("vendor").get<std::string>());
      if (!vendor.has_value()) {
        return absl::InvalidArgumentError(fmt::format("GPU {}: unknown vendor", inv.gpus.size()));
      }
      d.vendor = *vendor;
      d.name = g.at("name").get<std::string>();
      d.model_id = g.at("model_id").get<std::string>();
      d.uuid = g.at("uuid").get<std::string>();
      d.pci_bus_id = g.at("pci_bus_id").get<std::string>();
      d.memory_total_bytes = g.at("memory_total_bytes").get<uint64_t>();
      d.numa_node = g.at("numa_node").get<int>();
      d.driver_version = g.at("driver_version").get<std::string>();
      d.runtime_version = g.at("runtime_version").get<std::string>();
      d.source = g.at("source").get<std::string>();
      d.source_index = g.at("source_index").get<int>();
      d.telemetry = TelemetryFromJson(g.at("telemetry"));
      d.health = HealthFromJson(g.at("health"));
      inv.gpus.push_back(std::move(d));
    }
    for (const json& row : j.at("links")) {
      std::vector<PeerLink> r;
      for (const json& l : row) {
        PeerLink link;
        link.kind = KindFromJson(l.at("kind"));
        link.links = l.at("links").get<int>();
        link.bytes_per_second = l.at("bytes_per_second").get<uint64_t>();
        link.pcie = KindFromJson(l.at("pcie"));
        r.push_back(link);
      }
      inv.links.push_back(std::move(r));
    }
    inv.problems = j.at("problems").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(fmt::format("bad inventory JSON: {}", e.what()));
  }
  if (absl::Status valid = ValidateInventory(inv); !valid.ok()) return valid;
  return inv;
}

absl::StatusOr<NodeInventory> ParseInventoryJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("inventory is not valid JSON");
  return InventoryFromJson(j);
}

nlohmann::json SampleToJson(const GpuSample& sample) {
  return {{"telemetry", TelemetryToJson(sample.telemetry)}, {"health", HealthToJson(sample.health)}};
}

absl::StatusOr<GpuSample> SampleFromJson(const nlohmann::json& j) {
  try {
    GpuSample s;
    s.telemetry = TelemetryFromJson(j.at("telemetry"));
    s.health = HealthFromJson(j.at("health"));
    return s;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(fmt::format("bad sample JSON: {}", e.what()));
  }
}

}  // namespace gpugeek::hw
