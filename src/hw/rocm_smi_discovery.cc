#include "hw/rocm_smi_discovery.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <vector>

#include "common/absl_fmt.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "hw/dynamic_library.h"
#include "hw/topology.h"

// The subset of rocm_smi.h gpugeek uses (https://github.com/ROCm/rocm_smi_lib,
// include/rocm_smi/rocm_smi.h). Enums are passed as their underlying 32-bit integers.
extern "C" {
typedef uint32_t rsmi_status_t;

typedef struct {
  uint32_t major;
  uint32_t minor;
  uint32_t patch;
  const char* build;
} rsmi_version_t;

typedef struct {
  uint64_t correctable_err;
  uint64_t uncorrectable_err;
} rsmi_error_count_t;

typedef struct {
  uint64_t page_address;
  uint64_t page_size;
  uint32_t status;  // rsmi_memory_page_status_t
} rsmi_retired_page_record_t;
}

namespace gpugeek::hw {
namespace {

constexpr rsmi_status_t RSMI_STATUS_SUCCESS = 0x0;
constexpr rsmi_status_t RSMI_STATUS_NOT_SUPPORTED = 0x2;
constexpr rsmi_status_t RSMI_STATUS_FILE_ERROR = 0x3;
constexpr rsmi_status_t RSMI_STATUS_PERMISSION = 0x4;
constexpr rsmi_status_t RSMI_STATUS_INPUT_OUT_OF_BOUNDS = 0x7;
constexpr rsmi_status_t RSMI_STATUS_NOT_YET_IMPLEMENTED = 0x9;
constexpr rsmi_status_t RSMI_STATUS_NOT_FOUND = 0xA;
constexpr rsmi_status_t RSMI_STATUS_INSUFFICIENT_SIZE = 0xB;
constexpr uint32_t kMemTypeVram = 0;       // RSMI_MEM_TYPE_VRAM
constexpr uint32_t kSwCompDriver = 0;      // RSMI_SW_COMP_DRIVER
constexpr uint32_t kTempTypeEdge = 0;      // RSMI_TEMP_TYPE_EDGE
constexpr uint32_t kTempTypeJunction = 1;  // RSMI_TEMP_TYPE_JUNCTION
constexpr uint32_t kTempCurrent = 0;       // RSMI_TEMP_CURRENT
constexpr uint32_t kIoLinkPcie = 1;        // RSMI_IOLINK_TYPE_PCIEXPRESS
constexpr uint32_t kIoLinkXgmi = 2;        // RSMI_IOLINK_TYPE_XGMI
constexpr uint32_t kPageReserved = 0;      // RSMI_MEM_PAGE_STATUS_RESERVED
constexpr uint32_t kPagePending = 1;       // RSMI_MEM_PAGE_STATUS_PENDING
// rsmi_gpu_block_t bits whose uncorrectable errors count: UMC (memory), SDMA, GFX, MMHUB,
// PCIE_BIF, HDP, XGMI_WAFL.
constexpr uint32_t kEccBlocks[] = {0x1, 0x2, 0x4, 0x8, 0x20, 0x40, 0x80};
constexpr size_t kNameBufferSize = 256;

struct RsmiApi {
  // Required.
  rsmi_status_t (*Init)(uint64_t);
  rsmi_status_t (*ShutDown)();
  rsmi_status_t (*StatusString)(rsmi_status_t, const char**);
  rsmi_status_t (*NumMonitorDevices)(uint32_t*);
  rsmi_status_t (*DevNameGet)(uint32_t, char*, size_t);
  rsmi_status_t (*DevPciIdGet)(uint32_t, uint64_t*);
  rsmi_status_t (*DevMemoryTotalGet)(uint32_t, uint32_t, uint64_t*);
  // Optional.
  rsmi_status_t (*DevUniqueIdGet)(uint32_t, uint64_t*);
  rsmi_status_t (*DevMemoryUsageGet)(uint32_t, uint32_t, uint64_t*);
  rsmi_status_t (*VersionGet)(rsmi_version_t*);
  rsmi_status_t (*VersionStrGet)(uint32_t, char*, uint32_t);
  rsmi_status_t (*TopoGetNumaNodeNumber)(uint32_t, uint32_t*);
  rsmi_status_t (*TopoGetLinkType)(uint32_t, uint32_t, uint64_t*, uint32_t*);
  rsmi_status_t (*DevBusyPercentGet)(uint32_t, uint32_t*);
  rsmi_status_t (*DevTempMetricGet)(uint32_t, uint32_t, uint32_t, int64_t*);
  rsmi_status_t (*DevPowerAveGet)(uint32_t, uint32_t, uint64_t*);
  rsmi_status_t (*DevCurrentSocketPowerGet)(uint32_t, uint64_t*);
  rsmi_status_t (*DevEccCountGet)(uint32_t, uint32_t, rsmi_error_count_t*);
  rsmi_status_t (*DevMemoryReservedPagesGet)(uint32_t, uint32_t*, rsmi_retired_page_record_t*);
};

template <typename Fn>
bool Bind(const DynamicLibrary& lib, const char* symbol, Fn*& out) {
  out = lib.Find<Fn>(symbol);
  return out != nullptr;
}

absl::Status BindApi(const DynamicLibrary& lib, RsmiApi& api) {
  struct Required {
    const char* symbol;
    bool found;
  };
  const Required required[] = {
      {"rsmi_init", Bind(lib, "rsmi_init", api.Init)},
      {"rsmi_shut_down", Bind(lib, "rsmi_shut_down", api.ShutDown)},
      {"rsmi_status_string", Bind(lib, "rsmi_status_string", api.StatusString)},
      {"rsmi_num_monitor_devices", Bind(lib, "rsmi_num_monitor_devices", api.NumMonitorDevices)},
      {"rsmi_dev_name_get", Bind(lib, "rsmi_dev_name_get", api.DevNameGet)},
      {"rsmi_dev_pci_id_get", Bind(lib, "rsmi_dev_pci_id_get", api.DevPciIdGet)},
      {"rsmi_dev_memory_total_get", Bind(lib, "rsmi_dev_memory_total_get", api.DevMemoryTotalGet)},
  };
  for (const Required& r : required) {
    if (!r.found) return absl::InternalError(fmt::format("{} lacks {} (ROCm too old?)", lib.path(), r.symbol));
  }
  Bind(lib, "rsmi_dev_unique_id_get", api.DevUniqueIdGet);
  Bind(lib, "rsmi_dev_memory_usage_get", api.DevMemoryUsageGet);
  Bind(lib, "rsmi_version_get", api.VersionGet);
  Bind(lib, "rsmi_version_str_get", api.VersionStrGet);
  Bind(lib, "rsmi_topo_get_numa_node_number", api.TopoGetNumaNodeNumber);
  Bind(lib, "rsmi_topo_get_link_type", api.TopoGetLinkType);
  Bind(lib, "rsmi_dev_busy_percent_get", api.DevBusyPercentGet);
  Bind(lib, "rsmi_dev_temp_metric_get", api.DevTempMetricGet);
  Bind(lib, "rsmi_dev_power_ave_get", api.DevPowerAveGet);
  Bind(lib, "rsmi_dev_current_socket_power_get", api.DevCurrentSocketPowerGet);
  Bind(lib, "rsmi_dev_ecc_count_get", api.DevEccCountGet);
  Bind(lib, "rsmi_dev_memory_reserved_pages_get", api.DevMemoryReservedPagesGet);
  return absl::OkStatus();
}

// The PCI id ROCm SMI packs into 64 bits: domain << 32 | bus << 8 | device << 3 | function.
std::string BdfToBusId(uint64_t bdf) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", (bdf >> 32) & 0xffffffff, (bdf >> 8) & 0xff, (bdf >> 3) & 0x1f,
                     bdf & 0x7);
}

bool Unsupported(rsmi_status_t r) {
  return r == RSMI_STATUS_NOT_SUPPORTED || r == RSMI_STATUS_NOT_YET_IMPLEMENTED || r == RSMI_STATUS_PERMISSION;
}

// The device's sysfs node is gone or no longer indexed: treat it as lost.
bool Vanished(rsmi_status_t r) {
  return r == RSMI_STATUS_FILE_ERROR || r == RSMI_STATUS_NOT_FOUND || r == RSMI_STATUS_INPUT_OUT_OF_BOUNDS;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

struct RocmSmiDiscovery::State {
  RocmSmiDiscoveryOptions options;
  std::unique_ptr<DynamicLibrary> library;
  RsmiApi api{};
  bool initialized = false;
  std::vector<uint32_t> indexes;  // ROCm SMI index of each device of the last inventory
  bool discovered = false;

  std::string Error(rsmi_status_t r) const {
    const char* s = nullptr;
    if (api.StatusString == nullptr || api.StatusString(r, &s) != RSMI_STATUS_SUCCESS) s = nullptr;
    return fmt::format("{} (ROCm SMI status {})", s != nullptr ? s : "unknown error", r);
  }
};

RocmSmiDiscovery::RocmSmiDiscovery(RocmSmiDiscoveryOptions options) : state_(std::make_unique<State>()) {
  if (options.rocm_root.empty()) {
    const char* env = std::getenv("ROCM_PATH");
    options.rocm_root = env != nullptr && *env != '\0' ? env : "/opt/rocm";
  }
  if (options.library_path.empty()) {
    const char* env = std::getenv(kRocmSmiLibraryEnv);
    if (env != nullptr && *env != '\0') options.library_path = env;
  }
  if (options.catalog == nullptr) options.catalog = &GpuCatalog::Builtin();
  state_->options = std::move(options);
}

RocmSmiDiscovery::~RocmSmiDiscovery() {
  if (state_->initialized) state_->api.ShutDown();
}

absl::StatusOr<NodeInventory> RocmSmiDiscovery::Discover() {
  State& s = *state_;
  const RsmiApi& api = s.api;
  if (s.library == nullptr) {
    std::vector<std::string> candidates;
    if (!s.options.library_path.empty()) {
      candidates = {s.options.library_path};
    } else {
      // ROCm installs outside the loader's default path, so try its lib folder too.
      candidates = {kRocmSmiDefaultLibrary, "librocm_smi64.so", s.options.rocm_root + "/lib/" + kRocmSmiDefaultLibrary};
    }
    absl::Status first;
    for (const std::string& path : candidates) {
      auto lib = DynamicLibrary::Open(path);
      if (lib.ok()) {
        if (absl::Status bound = BindApi(**lib, s.api); !bound.ok()) return bound;
        s.library = *std::move(lib);
        break;
      }
      if (first.ok()) first = lib.status();
    }
    if (s.library == nullptr) {
      std::string tried = candidates.size() > 1 ? fmt::format("; also tried {}",
                                                              fmt::join(candidates.begin() + 1, candidates.end(), ", "))
                                                : "";
      return absl::NotFoundError(fmt::format("{}{} (no ROCm on this host?)", first.message(), tried));
    }
  }
  if (!s.initialized) {
    rsmi_status_t r = api.Init(0);
    if (r != RSMI_STATUS_SUCCESS) return absl::FailedPreconditionError("rsmi_init failed: " + s.Error(r));
    s.initialized = true;
  }
  s.discovered = false;
  s.indexes.clear();

  NodeInventory inv;
  inv.host = ReadHostInfo(s.options.host_paths);
  auto problem = [&](std::string text) { inv.problems.push_back("rocm_smi: " + std::move(text)); };

  std::string driver_version;
  if (api.VersionStrGet != nullptr) {
    char buf[kNameBufferSize] = {};
    if (api.VersionStrGet(kSwCompDriver, buf, sizeof(buf)) == RSMI_STATUS_SUCCESS) driver_version = buf;
  }
  std::string runtime_version = ReadFirstLine(s.options.rocm_root + "/.info/version");
  if (runtime_version.empty() && api.VersionGet != nullptr) {
    rsmi_version_t v{};
    if (api.VersionGet(&v) == RSMI_STATUS_SUCCESS) {
      runtime_version = fmt::format("rocm-smi {}.{}.{}", v.major, v.minor, v.patch);
    }
  }

  uint32_t count = 0;
  if (rsmi_status_t r = api.NumMonitorDevices(&count); r != RSMI_STATUS_SUCCESS) {
    return absl::FailedPreconditionError("rsmi_num_monitor_devices failed: " + s.Error(r));
  }
  for (uint32_t i = 0; i < count; ++i) {
    GpuDevice d;
    d.index = static_cast<int>(inv.gpus.size());
    d.vendor = Vendor::kAmd;
    d.source = "rocm_smi";
    d.source_index = static_cast<int>(i);
    d.driver_version = driver_version;
    d.runtime_version = runtime_version;
    char name[kNameBufferSize] = {};
    if (rsmi_status_t r = api.DevNameGet(i, name, sizeof(name)); r == RSMI_STATUS_SUCCESS) {
      d.name = name;
    } else {
      problem(fmt::format("GPU {}: name: {}", i, s.Error(r)));
    }
    uint64_t bdf = 0;
    if (rsmi_status_t r = api.DevPciIdGet(i, &bdf); r == RSMI_STATUS_SUCCESS) {
      d.pci_bus_id = BdfToBusId(bdf);
    } else {
      problem(fmt::format("GPU {}: PCI id: {}", i, s.Error(r)));
    }
    uint64_t unique_id = 0;
    if (api.DevUniqueIdGet != nullptr && api.DevUniqueIdGet(i, &unique_id) == RSMI_STATUS_SUCCESS && unique_id != 0) {
      d.uuid = fmt::format("GPU-{:016x}", unique_id);
    } else {
      // Consumer cards have no unique id; the PCI address is unique within the host.
      d.uuid = d.pci_bus_id.empty() ? fmt::format("GPU-rocm-index-{}", i) : "GPU-pci-" + d.pci_bus_id;
    }
    uint64_t total = 0;
    if (rsmi_status_t r = api.DevMemoryTotalGet(i, kMemTypeVram, &total); r == RSMI_STATUS_SUCCESS) {
      d.memory_total_bytes = total;
    } else {
      problem(fmt::format("GPU {}: VRAM total: {}", i, s.Error(r)));
    }
    if (const GpuModel* m = s.options.catalog->Resolve(d.name); m != nullptr && m->vendor == Vendor::kAmd) {
      d.model_id = m->id;
    }
    uint32_t numa = 0;
    if (api.TopoGetNumaNodeNumber != nullptr && api.TopoGetNumaNodeNumber(i, &numa) == RSMI_STATUS_SUCCESS &&
        numa != UINT32_MAX) {
      d.numa_node = static_cast<int>(numa);
    } else if (!d.pci_bus_id.empty()) {
      d.numa_node = ReadPciNumaNode(d.pci_bus_id, s.options.host_paths);
    }
    inv.gpus.push_back(std::move(d));
    s.indexes.push_back(i);
  }

  const size_t n = inv.gpus.size();
  inv.links.assign(n, std::vector<PeerLink>(n));
  for (size_t i = 0; i < n; ++i) {
    inv.links[i][i].kind = LinkKind::kSelf;
    for (size_t j = i + 1; j < n; ++j) {
      const GpuDevice& a = inv.gpus[i];
      const GpuDevice& b = inv.gpus[j];
      PeerLink link;
      // ROCm SMI names only the link type and hop count, not the PCIe switch hierarchy, so the
      // PCIe path is inferred from the NUMA nodes (NODE or SYS).
      link.pcie = PciePathFromNuma(a.numa_node, b.numa_node);
      link.kind = link.pcie;
      uint64_t hops = 0;
      uint32_t type = 0;
      const GpuModel* ma = s.options.catalog->FindById(a.model_id);
      const GpuModel* mb = s.options.catalog->FindById(b.model_id);
      if (api.TopoGetLinkType != nullptr &&
          api.TopoGetLinkType(s.indexes[i], s.indexes[j], &hops, &type) == RSMI_STATUS_SUCCESS) {
        if (type == kIoLinkXgmi) {
          link.kind = LinkKind::kXgmi;
          // One hop is a direct link; more hops route through other GPUs (no direct link count).
          link.links = hops <= 1 ? 1 : 0;
          if (ma != nullptr && mb != nullptr) {
            link.bytes_per_second = std::min(XgmiBytesPerLink(*ma), XgmiBytesPerLink(*mb));
          }
        } else if (type != kIoLinkPcie) {
          link.kind = LinkKind::kUnknown;
        }
      }
      if (IsPciePath(link.kind) && ma != nullptr && mb != nullptr) {
        link.bytes_per_second = std::min(PcieBytesPerSecond(*ma), PcieBytesPerSecond(*mb));
      }
      inv.links[i][j] = link;
      inv.links[j][i] = link;
    }
  }
  s.discovered = true;
  return inv;
}

absl::StatusOr<std::vector<GpuSample>> RocmSmiDiscovery::Sample() {
  State& s = *state_;
  const RsmiApi& api = s.api;
  if (!s.discovered) return absl::FailedPreconditionError("rocm_smi: Sample before a successful Discover");
  std::vector<GpuSample> samples(s.indexes.size());
  for (size_t k = 0; k < s.indexes.size(); ++k) {
    const uint32_t i = s.indexes[k];
    GpuSample& out = samples[k];
    auto ok = [&](rsmi_status_t r, const char* what) {
      if (r == RSMI_STATUS_SUCCESS) return true;
      if (Vanished(r)) {
        out.health.lost = true;
        out.health.error = fmt::format("{}: {}", what, s.Error(r));
      } else if (!Unsupported(r) && out.health.error.empty()) {
        out.health.error = fmt::format("{}: {}", what, s.Error(r));
      }
      return false;
    };
    if (api.DevBusyPercentGet != nullptr) {
      uint32_t busy = 0;
      if (ok(api.DevBusyPercentGet(i, &busy), "busy percent")) out.telemetry.utilization_percent = busy;
    }
    if (!out.health.lost && api.DevMemoryUsageGet != nullptr) {
      uint64_t used = 0;
      if (ok(api.DevMemoryUsageGet(i, kMemTypeVram, &used), "VRAM used")) out.telemetry.memory_used_bytes = used;
    }
    if (!out.health.lost && api.DevTempMetricGet != nullptr) {
      // MI200/MI300 have no edge sensor; their junction (hotspot) sensor is what rocm-smi shows.
      for (uint32_t sensor : {kTempTypeEdge, kTempTypeJunction}) {
        int64_t millidegrees = 0;
        rsmi_status_t r = api.DevTempMetricGet(i, sensor, kTempCurrent, &millidegrees);
        if (r == RSMI_STATUS_SUCCESS) {
          out.telemetry.temperature_celsius = static_cast<int32_t>(millidegrees / 1000);
          break;
        }
        if (!Unsupported(r)) {
          ok(r, "temperature");
          break;
        }
      }
    }
    if (!out.health.lost) {
      uint64_t microwatts = 0;
      rsmi_status_t r =
          api.DevPowerAveGet != nullptr ? api.DevPowerAveGet(i, 0, &microwatts) : RSMI_STATUS_NOT_SUPPORTED;
      // MI300 reports only the current socket power.
      if (Unsupported(r) && api.DevCurrentSocketPowerGet != nullptr) r = api.DevCurrentSocketPowerGet(i, &microwatts);
      if (ok(r, "power")) out.telemetry.power_milliwatts = static_cast<uint32_t>(microwatts / 1000);
    }
    if (!out.health.lost && api.DevEccCountGet != nullptr) {
      std::optional<uint64_t> uncorrected;
      for (uint32_t block : kEccBlocks) {
        rsmi_error_count_t ec{};
        // Blocks without RAS support answer NOT_SUPPORTED; only blocks that answer count.
        if (api.DevEccCountGet(i, block, &ec) == RSMI_STATUS_SUCCESS) {
          uncorrected = uncorrected.value_or(0) + ec.uncorrectable_err;
        }
      }
      out.health.ecc_uncorrected = uncorrected;
    }
    if (!out.health.lost && api.DevMemoryReservedPagesGet != nullptr) {
      uint32_t num = 0;
      rsmi_status_t r = api.DevMemoryReservedPagesGet(i, &num, nullptr);
      if (ok(r, "reserved pages")) {
        std::vector<rsmi_retired_page_record_t> records(num);
        if (num > 0) {
          r = api.DevMemoryReservedPagesGet(i, &num, records.data());
          if (r == RSMI_STATUS_INSUFFICIENT_SIZE) r = RSMI_STATUS_SUCCESS;  // pages retired in between
        }
        if (ok(r, "reserved pages")) {
          uint32_t reserved = 0;
          bool pending = false;
          for (uint32_t p = 0; p < std::min<uint32_t>(num, records.size()); ++p) {
            if (records[p].status == kPageReserved) ++reserved;
            if (records[p].status == kPagePending) pending = true;
          }
          out.health.retired_pages = reserved;
          out.health.retirement_pending = pending;
        }
      }
    }
  }
  return samples;
}

}  // namespace gpugeek::hw
