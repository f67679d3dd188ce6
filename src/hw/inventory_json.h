#pragma once
// JSON codec for NodeInventory and GpuSample: the form `gpugeek devices --json` prints and the
// agent sends to the control plane. Schema "gpugeek.node_inventory/v1":
//
//   {"schema": "gpugeek.node_inventory/v1",
//    "host": {"hostname", "cpu_cores", "memory_bytes", "numa_nodes", "cpu_model"},
//    "gpus": [{"index", "vendor": "nvidia"|"amd"|"undisclosed", "name", "model_id" ("" if unknown),
//              "uuid", "pci_bus_id", "memory_total_bytes", "numa_node" (-1 unknown),
//              "driver_version", "runtime_version", "source", "source_index",
//              "telemetry": {"utilization_percent", "memory_used_bytes", "temperature_celsius",
//                            "power_milliwatts"}   (each key only when known),
//              "health": {"lost", "ecc_uncorrected"?, "retired_pages"?, "retirement_pending"?,
//                         "xid_errors": [..], "error"}}],
//    "links": [[{"kind": "X"|"NV"|"XGMI"|"PIX"|..., "links", "bytes_per_second", "pcie"}, ...], ...],
//    "problems": ["..."]}
//
// Units as in device.h: bytes, bytes/s, degrees Celsius, milliwatts.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "hw/device.h"

namespace gpugeek::hw {

inline constexpr char kInventorySchema[] = "gpugeek.node_inventory/v1";

nlohmann::json InventoryToJson(const NodeInventory& inventory);
// InvalidArgument naming the first bad field: not an object, wrong schema, a missing or mistyped
// key, an unknown vendor or link kind, or an inventory that fails ValidateInventory.
absl::StatusOr<NodeInventory> InventoryFromJson(const nlohmann::json& json);
// Parses text first; InvalidArgument for malformed JSON.
absl::StatusOr<NodeInventory> ParseInventoryJson(std::string_view text);

nlohmann::json SampleToJson(const GpuSample& sample);  // {"telemetry": {...}, "health": {...}}
absl::StatusOr<GpuSample> SampleFromJson(const nlohmann::json& json);

}  // namespace gpugeek::hw
