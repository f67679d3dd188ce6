// `gpugeek catalog [--json] [--file PATH]`: the GPU models gpugeek knows, with datasheet figures.

#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::cli {
namespace {

std::string Tflops(const hw::GpuModel& m, hw::Precision p) {
  auto v = m.PeakOps(p);
  return v ? absl::StrFormat("%.1f", *v / 1e12) : "-";
}

std::string Link(const hw::GpuModel& m) {
  const auto& ic = m.interconnect;
  std::string s;
  if (ic.nvlink_generation > 0) {
    s = absl::StrFormat("NVLink%d %d GB/s", ic.nvlink_generation, ic.nvlink_bytes_per_second / kGB);
  } else if (ic.xgmi_links > 0) {
    s = absl::StrFormat("XGMI x%d %d GB/s", ic.xgmi_links, ic.xgmi_bytes_per_second / kGB);
  }
  if (ic.pcie_generation > 0) s += (s.empty() ? "" : ", ") + absl::StrFormat("PCIe%d", ic.pcie_generation);
  return s;
}

nlohmann::json ModelJson(const hw::GpuModel& m) {
  nlohmann::json j = {{"id", m.id},
                      {"display_name", m.display_name},
                      {"vendor", hw::VendorName(m.vendor)},
                      {"disclosed", m.disclosed},
                      {"aliases", m.aliases},
                      {"trace_codes", m.trace_codes},
                      {"sources", m.sources}};
  if (!m.disclosed) return j;
  j["architecture"] = m.architecture;
  j["memory_bytes"] = m.memory_bytes;
  j["memory_bandwidth_bytes_per_second"] = m.memory_bandwidth_bytes_per_second;
  nlohmann::json peaks = nlohmann::json::object();
  for (hw::Precision p : hw::kAllPrecisions) {
    if (auto v = m.PeakOps(p)) peaks[std::string(hw::PrecisionName(p))] = *v;
  }
  j["dense_peak_ops_per_second"] = peaks;
  j["interconnect"] = {{"nvlink_generation", m.interconnect.nvlink_generation},
                       {"nvlink_bytes_per_second", m.interconnect.nvlink_bytes_per_second},
                       {"xgmi_links", m.interconnect.xgmi_links},
                       {"xgmi_bytes_per_second", m.interconnect.xgmi_bytes_per_second},
                       {"pcie_generation", m.interconnect.pcie_generation}};
  j["tdp_watts"] = m.tdp_watts;
  j["form_factor"] = m.form_factor;
  j["package_devices"] = m.package_devices;
  return j;
}

}  // namespace

void RegisterCatalogCommand(CLI::App& app) {
  struct Options {
    bool json = false;
    std::string file;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("catalog", "List the GPU models gpugeek knows, with datasheet figures");
  sub->add_flag("--json", opts->json, "Print JSON instead of a table");
  sub->add_option("--file", opts->file, "Read the catalog from this JSON file instead of the built-in one");
  sub->callback([opts] {
    std::unique_ptr<hw::GpuCatalog> loaded;
    const hw::GpuCatalog* catalog = &hw::GpuCatalog::Builtin();
    if (!opts->file.empty()) {
      auto c = hw::LoadGpuCatalog(opts->file);
      if (!c.ok()) {
        std::cerr << "gpugeek catalog: " << c.status().message() << "\n";
        throw CLI::RuntimeError(2);
      }
      loaded = std::move(*c);
      catalog = loaded.get();
    }
    if (opts->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& m : catalog->models()) out.push_back(ModelJson(m));
      std::cout << out.dump(2) << "\n";
      return;
    }
    TextTable t({"ID", "VENDOR", "ARCH", "MEMORY", "MEM BW", "FP32", "TF32", "BF16", "FP8", "INT8", "LINK", "TDP"});
    for (size_t c = 3; c <= 9; ++c) t.AlignRight(c);
    t.AlignRight(11);
    for (const auto& m : catalog->models()) {
      if (!m.disclosed) {
        t.AddRow({m.id, "undisclosed", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
        continue;
      }
      t.AddRow({m.id, std::string(hw::VendorName(m.vendor)), m.architecture, FormatBytes(m.memory_bytes),
                FormatBytesPerSecond(static_cast<double>(m.memory_bandwidth_bytes_per_second)),
                Tflops(m, hw::Precision::kFp32), Tflops(m, hw::Precision::kTf32), Tflops(m, hw::Precision::kBf16),
                Tflops(m, hw::Precision::kFp8), Tflops(m, hw::Precision::kInt8), Link(m),
                absl::StrFormat("%d W", m.tdp_watts)});
    }
    std::cout << t.Render();
    std::cout << "\nMemory in GiB (2^30 bytes), bandwidth in decimal units; compute in dense TFLOP/s "
                 "(INT8: TOPS), no sparsity.\nSources: gpugeek catalog --json lists the datasheet for every entry.\n";
  });
}

}  // namespace gpugeek::cli
