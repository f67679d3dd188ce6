// `gpugeek devices [--emulate SPEC] [--json]`: the GPUs of this host (NVML and ROCm SMI), or of an
// emulated node, with telemetry, health and the link matrix between every pair.

#include <iostream>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"
#include "hw/composite_discovery.h"
#include "hw/emulated_discovery.h"
#include "hw/inventory_json.h"
#include "hw/topology.h"

namespace gpugeek::cli {
namespace {

[[noreturn]] void Fail(const std::string& message, int code) {
  std::cerr << "gpugeek devices: " << message << "\n";
  throw CLI::RuntimeError(code);
}

// "-" for a value the library did not report, else the value and its unit.
template <typename T>
std::string OrDash(const std::optional<T>& v, const char* unit) {
  return v.has_value() ? absl::StrCat(*v, unit) : "-";
}

void PrintTable(const hw::NodeInventory& inv) {
  const hw::HostInfo& h = inv.host;
  std::cout << absl::StrFormat("Host %s: %d CPUs, %s memory, %d NUMA node%s%s\n\n", h.hostname, h.cpu_cores,
                               FormatBytes(h.memory_bytes), h.numa_nodes, h.numa_nodes == 1 ? "" : "s",
                               h.cpu_model.empty() ? "" : " (" + h.cpu_model + ")");
  if (inv.gpus.empty()) {
    std::cout << "No GPUs found on this host.\n"
                 "(To try gpugeek without GPUs: gpugeek devices --emulate 8xH100-SXM-80GB)\n";
  } else {
    TextTable t(
        {"IDX", "VENDOR", "MODEL", "MEMORY", "USED", "UUID", "BUS ID", "NUMA", "UTIL", "TEMP", "POWER", "HEALTH"});
    for (size_t c : {0, 3, 4, 7, 8, 9, 10}) t.AlignRight(c);
    for (const hw::GpuDevice& d : inv.gpus) {
      const hw::GpuTelemetry& tm = d.telemetry;
      t.AddRow({absl::StrFormat("%d", d.index), std::string(hw::VendorName(d.vendor)),
                d.model_id.empty() ? "unknown: " + d.name : d.model_id, FormatBytes(d.memory_total_bytes),
                tm.memory_used_bytes ? FormatBytes(*tm.memory_used_bytes) : "-", d.uuid, d.pci_bus_id,
                d.numa_node < 0 ? "N/A" : absl::StrFormat("%d", d.numa_node), OrDash(tm.utilization_percent, "%"),
                OrDash(tm.temperature_celsius, " C"),
                tm.power_milliwatts ? absl::StrFormat("%.0f W", *tm.power_milliwatts / 1000.0) : "-",
                d.health.Summary()});
    }
    std::cout << t.Render();
    std::set<std::string> sources;  // one line per backend, in a stable order
    for (const hw::GpuDevice& d : inv.gpus) {
      sources.insert(absl::StrFormat("%s: driver %s, runtime %s", d.source,
                                     d.driver_version.empty() ? "?" : d.driver_version,
                                     d.runtime_version.empty() ? "?" : d.runtime_version));
    }
    std::cout << "\nMemory in GiB (2^30 bytes). ";
    for (const std::string& line : sources) std::cout << line << ". ";
    std::cout << "\n";
    std::cout << "\nTopology:\n" << hw::RenderTopologyMatrix(inv);
  }
  if (!inv.problems.empty()) {
    std::cout << "\nProblems:\n";
    for (const std::string& p : inv.problems) std::cout << "  " << p << "\n";
  }
  for (const hw::GpuDevice& d : inv.gpus) {
    if (!d.health.error.empty()) std::cout << absl::StrFormat("  GPU %d: %s\n", d.index, d.health.error);
  }
}

}  // namespace

void RegisterDevicesCommand(CLI::App& app) {
  struct Options {
    std::string emulate;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("devices", "List this host's GPUs (NVML, ROCm SMI) with telemetry and topology");
  sub->add_option("--emulate", opts->emulate,
                  "Emulate a node instead, e.g. 8xH100-SXM-80GB, 8xMI300X or 4xA100-PCIe-80GB,2xL4");
  sub->add_flag("--json", opts->json, "Print the inventory as JSON (schema gpugeek.node_inventory/v1)");
  sub->callback([opts] {
    std::unique_ptr<hw::Discovery> discovery;
    if (!opts->emulate.empty()) {
      auto emulated = hw::EmulatedDiscovery::Create({.spec = opts->emulate});
      if (!emulated.ok()) Fail(std::string(emulated.status().message()), 2);
      discovery = *std::move(emulated);
    } else {
      discovery = hw::MakeHostDiscovery();
    }
    auto inv = discovery->Discover();
    if (!inv.ok()) Fail(std::string(inv.status().message()), 1);
    if (!inv->gpus.empty()) {
      auto samples = discovery->Sample();
      if (!samples.ok()) {
        inv->problems.push_back("sample: " + std::string(samples.status().message()));
      } else if (absl::Status applied = hw::ApplySamples(*samples, *inv); !applied.ok()) {
        inv->problems.push_back("sample: " + std::string(applied.message()));
      }
    }
    if (opts->json) {
      std::cout << hw::InventoryToJson(*inv).dump(2) << "\n";
      return;
    }
    PrintTable(*inv);
  });
}

}  // namespace gpugeek::cli
