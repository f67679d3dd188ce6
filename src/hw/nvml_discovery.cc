#include "hw/nvml_discovery.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include "common/absl_fmt.h"
#include "fmt/format.h"
#include "hw/dynamic_library.h"
#include "hw/topology.h"

// The subset of nvml.h gpugeek uses, declared as the header does (NVML API reference,
// https://docs.nvidia.com/deploy/nvml-api/). Enums are passed as int, as C passes them.
extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;
}

namespace gpugeek::hw {
namespace {

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
constexpr unsigned int kNameBufferSize = 96;           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int kUuidBufferSize = 96;           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int kDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned int kNvLinkMaxLinks = 18;           // NVML_NVLINK_MAX_LINKS
constexpr int kFeatureEnabled = 1;                     // NVML_FEATURE_ENABLED
constexpr int kNvLinkDeviceTypeGpu = 0;                // NVML_NVLINK_DEVICE_TYPE_GPU
constexpr int kNvLinkDeviceTypeSwitch = 2;             // NVML_NVLINK_DEVICE_TYPE_SWITCH
constexpr int kTemperatureGpu = 0;                     // NVML_TEMPERATURE_GPU
constexpr int kMemoryErrorUncorrected = 1;             // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                        // NVML_VOLATILE_ECC
constexpr int kRetireMultipleSingleBit = 0;            // NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
constexpr int kRetireDoubleBit = 1;                    // NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERRORS
constexpr unsigned int kAffinityScopeNode = 0;         // NVML_AFFINITY_SCOPE_NODE
constexpr unsigned long long kEventTypeXidCriticalError = 0x0000000000000008ULL;
constexpr int kMaxEventsPerSample = 256;  // bounds the drain loop if events arrive faster than we read

// NVML topology levels (nvmlGpuTopologyLevel_t) and the nvidia-smi labels they print as.
LinkKind TopologyLevelToKind(int level) {
  switch (level) {
    case 0:   // NVML_TOPOLOGY_INTERNAL: two GPUs on one board
    case 10:  // NVML_TOPOLOGY_SINGLE
      return LinkKind::kPix;
    case 20:  // NVML_TOPOLOGY_MULTIPLE
      return LinkKind::kPxb;
    case 30:  // NVML_TOPOLOGY_HOSTBRIDGE
      return LinkKind::kPhb;
    case 40:  // NVML_TOPOLOGY_NODE
      return LinkKind::kNode;
    case 50:  // NVML_TOPOLOGY_SYSTEM
      return LinkKind::kSys;
    default:
      return LinkKind::kUnknown;
  }
}

struct NvmlApi {
  // Required.
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*DeviceGetCount)(unsigned int*);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  // Optional: absent in old drivers or unsupported on some devices.
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned int);
  nvmlReturn_t (*SystemGetCudaDriverVersion)(int*);
  nvmlReturn_t (*DeviceGetMemoryAffinity)(nvmlDevice_t, unsigned int, unsigned long*, unsigned int);
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
  nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*DeviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int*);
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*DeviceGetRetiredPages)(nvmlDevice_t, int, unsigned int*, unsigned long long*);
  nvmlReturn_t (*DeviceGetRetiredPagesPendingStatus)(nvmlDevice_t, int*);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
  nvmlReturn_t (*DeviceGetSupportedEventTypes)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
};

template <typename Fn>
bool Bind(const DynamicLibrary& lib, const char* symbol, Fn*& out) {
  out = lib.Find<Fn>(symbol);
  return out != nullptr;
}

// Resolves every symbol; Internal naming the first required one missing.
absl::Status BindApi(const DynamicLibrary& lib, NvmlApi& api) {
  struct Required {
    const char* symbol;
    bool found;
  };
  const Required required[] = {
      {"nvmlInit_v2", Bind(lib, "nvmlInit_v2", api.Init)},
      {"nvmlShutdown", Bind(lib, "nvmlShutdown", api.Shutdown)},
      {"nvmlErrorString", Bind(lib, "nvmlErrorString", api.ErrorString)},
      {"nvmlDeviceGetCount_v2", Bind(lib, "nvmlDeviceGetCount_v2", api.DeviceGetCount)},
      {"nvmlDeviceGetHandleByIndex_v2", Bind(lib, "nvmlDeviceGetHandleByIndex_v2", api.DeviceGetHandleByIndex)},
      {"nvmlDeviceGetName", Bind(lib, "nvmlDeviceGetName", api.DeviceGetName)},
      {"nvmlDeviceGetUUID", Bind(lib, "nvmlDeviceGetUUID", api.DeviceGetUUID)},
      {"nvmlDeviceGetPciInfo_v3", Bind(lib, "nvmlDeviceGetPciInfo_v3", api.DeviceGetPciInfo)},
      {"nvmlDeviceGetMemoryInfo", Bind(lib, "nvmlDeviceGetMemoryInfo", api.DeviceGetMemoryInfo)},
  };
  for (const Required& r : required) {
    if (!r.found) return absl::InternalError(fmt::format("{} lacks {} (driver too old?)", lib.path(), r.symbol));
  }
  Bind(lib, "nvmlSystemGetDriverVersion", api.SystemGetDriverVersion);
  Bind(lib, "nvmlSystemGetCudaDriverVersion_v2", api.SystemGetCudaDriverVersion);
  Bind(lib, "nvmlDeviceGetMemoryAffinity", api.DeviceGetMemoryAffinity);
  Bind(lib, "nvmlDeviceGetNvLinkState", api.DeviceGetNvLinkState);
  Bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.DeviceGetNvLinkRemotePciInfo);
  Bind(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", api.DeviceGetNvLinkRemoteDeviceType);
  Bind(lib, "nvmlDeviceGetTopologyCommonAncestor", api.DeviceGetTopologyCommonAncestor);
  Bind(lib, "nvmlDeviceGetUtilizationRates", api.DeviceGetUtilizationRates);
  Bind(lib, "nvmlDeviceGetTemperature", api.DeviceGetTemperature);
  Bind(lib, "nvmlDeviceGetPowerUsage", api.DeviceGetPowerUsage);
  Bind(lib, "nvmlDeviceGetTotalEccErrors", api.DeviceGetTotalEccErrors);
  Bind(lib, "nvmlDeviceGetRetiredPages", api.DeviceGetRetiredPages);
  Bind(lib, "nvmlDeviceGetRetiredPagesPendingStatus", api.DeviceGetRetiredPagesPendingStatus);
  Bind(lib, "nvmlEventSetCreate", api.EventSetCreate);
  Bind(lib, "nvmlEventSetFree", api.EventSetFree);
  Bind(lib, "nvmlDeviceGetSupportedEventTypes", api.DeviceGetSupportedEventTypes);
  Bind(lib, "nvmlDeviceRegisterEvents", api.DeviceRegisterEvents);
  Bind(lib, "nvmlEventSetWait_v2", api.EventSetWait);
  return absl::OkStatus();
}

std::string CudaVersionString(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// NVLink links of one GPU, by where they lead.
struct NvLinkScan {
  std::map<std::string, int> to_gpu;  // normalised peer bus id -> links
  int to_switch = 0;                  // links into NVSwitch (every peer on the fabric is reachable)
};

}  // namespace

struct NvmlDiscovery::State {
  NvmlDiscoveryOptions options;
  std::unique_ptr<DynamicLibrary> library;
  NvmlApi api{};
  bool initialized = false;
  nvmlEventSet_t events = nullptr;
  std::vector<nvmlDevice_t> handles;  // parallel to the last inventory's gpus
  bool discovered = false;

  std::string Error(nvmlReturn_t r) const {
    const char* s = api.ErrorString != nullptr ? api.ErrorString(r) : nullptr;
    return fmt::format("{} (NVML error {})", s != nullptr ? s : "unknown error", r);
  }
};

NvmlDiscovery::NvmlDiscovery(NvmlDiscoveryOptions options) : state_(std::make_unique<State>()) {
  if (options.library_path.empty()) {
    const char* env = std::getenv(kNvmlLibraryEnv);
    options.library_path = env != nullptr && *env != '\0' ? env : kNvmlDefaultLibrary;
  }
  if (options.catalog == nullptr) options.catalog = &GpuCatalog::Builtin();
  state_->options = std::move(options);
}

NvmlDiscovery::~NvmlDiscovery() {
  if (state_->events != nullptr && state_->api.EventSetFree != nullptr) state_->api.EventSetFree(state_->events);
  if (state_->initialized) state_->api.Shutdown();
}

const std::string& NvmlDiscovery::library_path() const { return state_->options.library_path; }

absl::StatusOr<NodeInventory> NvmlDiscovery::Discover() {
  State& s = *state_;
  const NvmlApi& api = s.api;
  if (s.library == nullptr) {
    auto lib = DynamicLibrary::Open(s.options.library_path);
    if (!lib.ok()) {
      return absl::NotFoundError(fmt::format("{} (no NVIDIA driver on this host?)", lib.status().message()));
    }
    if (absl::Status bound = BindApi(**lib, s.api); !bound.ok()) return bound;
    s.library = *std::move(lib);
  }
  if (!s.initialized) {
    nvmlReturn_t r = api.Init();
    if (r != NVML_SUCCESS) return absl::FailedPreconditionError("nvmlInit_v2 failed: " + s.Error(r));
    s.initialized = true;
  }
  s.discovered = false;
  s.handles.clear();

  NodeInventory inv;
  inv.host = ReadHostInfo(s.options.host_paths);
  auto problem = [&](std::string text) { inv.problems.push_back("nvml: " + std::move(text)); };

  std::string driver_version;
  if (api.SystemGetDriverVersion != nullptr) {
    char buf[kDriverVersionBufferSize] = {};
    if (nvmlReturn_t r = api.SystemGetDriverVersion(buf, sizeof(buf)); r == NVML_SUCCESS) {
      driver_version = buf;
    } else {
      problem("driver version: " + s.Error(r));
    }
  }
  std::string cuda_version;
  if (api.SystemGetCudaDriverVersion != nullptr) {
    int v = 0;
    if (api.SystemGetCudaDriverVersion(&v) == NVML_SUCCESS && v > 0) cuda_version = CudaVersionString(v);
  }

  unsigned int count = 0;
  if (nvmlReturn_t r = api.DeviceGetCount(&count); r != NVML_SUCCESS) {
    return absl::FailedPreconditionError("nvmlDeviceGetCount_v2 failed: " + s.Error(r));
  }

  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t h = nullptr;
    if (nvmlReturn_t r = api.DeviceGetHandleByIndex(i, &h); r != NVML_SUCCESS) {
      // Without a handle there is nothing to report but the failure itself.
      problem(fmt::format("GPU {}: nvmlDeviceGetHandleByIndex_v2: {}", i, s.Error(r)));
      continue;
    }
    GpuDevice d;
    d.index = static_cast<int>(inv.gpus.size());
    d.vendor = Vendor::kNvidia;
    d.source = "nvml";
    d.source_index = static_cast<int>(i);
    d.driver_version = driver_version;
    d.runtime_version = cuda_version;
    char name[kNameBufferSize] = {};
    if (nvmlReturn_t r = api.DeviceGetName(h, name, sizeof(name)); r == NVML_SUCCESS) {
      d.name = name;
    } else {
      problem(fmt::format("GPU {}: name: {}", i, s.Error(r)));
    }
    char uuid[kUuidBufferSize] = {};
    if (nvmlReturn_t r = api.DeviceGetUUID(h, uuid, sizeof(uuid)); r == NVML_SUCCESS && uuid[0] != '\0') {
      d.uuid = uuid;
    } else {
      d.uuid = fmt::format("GPU-nvml-index-{}", i);  // keeps the device; the problem says why
      problem(fmt::format("GPU {}: UUID: {}", i, s.Error(r)));
    }
    nvmlPciInfo_t pci{};
    if (nvmlReturn_t r = api.DeviceGetPciInfo(h, &pci); r == NVML_SUCCESS) {
      d.pci_bus_id = NormalizePciBusId(pci.busId);
    } else {
      problem(fmt::format("GPU {}: PCI info: {}", i, s.Error(r)));
    }
    nvmlMemory_t mem{};
    if (nvmlReturn_t r = api.DeviceGetMemoryInfo(h, &mem); r == NVML_SUCCESS) {
      d.memory_total_bytes = mem.total;
    } else {
      problem(fmt::format("GPU {}: memory: {}", i, s.Error(r)));
    }
    if (const GpuModel* m = s.options.catalog->Resolve(d.name); m != nullptr && m->vendor == Vendor::kNvidia) {
      d.model_id = m->id;
    }
    if (api.DeviceGetMemoryAffinity != nullptr) {
      unsigned long nodes = 0;
      if (api.DeviceGetMemoryAffinity(h, 1, &nodes, kAffinityScopeNode) == NVML_SUCCESS && nodes != 0) {
        d.numa_node = __builtin_ctzl(nodes);
      }
    }
    if (d.numa_node < 0 && !d.pci_bus_id.empty()) d.numa_node = ReadPciNumaNode(d.pci_bus_id, s.options.host_paths);
    inv.gpus.push_back(std::move(d));
    s.handles.push_back(h);
  }

  // NVLink: which links are up and where each leads (a peer GPU, or an NVSwitch).
  const size_t n = inv.gpus.size();
  std::map<std::string, size_t> by_bus;
  for (size_t i = 0; i < n; ++i) by_bus[inv.gpus[i].pci_bus_id] = i;
  std::vector<NvLinkScan> scans(n);
  if (api.DeviceGetNvLinkState != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      for (unsigned int link = 0; link < kNvLinkMaxLinks; ++link) {
        int active = 0;
        if (api.DeviceGetNvLinkState(s.handles[i], link, &active) != NVML_SUCCESS || active != kFeatureEnabled) {
          continue;
        }
        int type = -1;
        if (api.DeviceGetNvLinkRemoteDeviceType != nullptr &&
            api.DeviceGetNvLinkRemoteDeviceType(s.handles[i], link, &type) != NVML_SUCCESS) {
          type = -1;
        }
        if (type == kNvLinkDeviceTypeSwitch) {
          ++scans[i].to_switch;
          continue;
        }
        if (type != -1 && type != kNvLinkDeviceTypeGpu) continue;  // e.g. an IBM NPU (a CPU link)
        nvmlPciInfo_t remote{};
        if (api.DeviceGetNvLinkRemotePciInfo == nullptr ||
            api.DeviceGetNvLinkRemotePciInfo(s.handles[i], link, &remote) != NVML_SUCCESS) {
          continue;
        }
        std::string bus = NormalizePciBusId(remote.busId);
        if (by_bus.contains(bus)) {
          ++scans[i].to_gpu[bus];
        } else if (type == -1) {
          ++scans[i].to_switch;  // no device type to ask: a link to no GPU of ours ends in a switch
        }
      }
    }
  }

  inv.links.assign(n, std::vector<PeerLink>(n));
  for (size_t i = 0; i < n; ++i) {
    inv.links[i][i].kind = LinkKind::kSelf;
    for (size_t j = i + 1; j < n; ++j) {
      const GpuDevice& a = inv.gpus[i];
      const GpuDevice& b = inv.gpus[j];
      PeerLink link;
      int level = -1;
      if (api.DeviceGetTopologyCommonAncestor != nullptr &&
          api.DeviceGetTopologyCommonAncestor(s.handles[i], s.handles[j], &level) == NVML_SUCCESS) {
        link.pcie = TopologyLevelToKind(level);
      } else {
        link.pcie = PciePathFromNuma(a.numa_node, b.numa_node);
      }
      auto direct = [&](size_t from, const std::string& to_bus) {
        auto it = scans[from].to_gpu.find(to_bus);
        return it == scans[from].to_gpu.end() ? 0 : it->second;
      };
      int nvlinks = std::max(direct(i, b.pci_bus_id), direct(j, a.pci_bus_id));
      if (nvlinks == 0 && scans[i].to_switch > 0 && scans[j].to_switch > 0) {
        nvlinks = std::min(scans[i].to_switch, scans[j].to_switch);
      }
      const GpuModel* ma = s.options.catalog->FindById(a.model_id);
      const GpuModel* mb = s.options.catalog->FindById(b.model_id);
      if (nvlinks > 0) {
        link.kind = LinkKind::kNvLink;
        link.links = nvlinks;
        if (ma != nullptr && mb != nullptr) {
          link.bytes_per_second = nvlinks * std::min(NvLinkBytesPerLink(*ma), NvLinkBytesPerLink(*mb));
        }
      } else {
        link.kind = link.pcie;
        if (ma != nullptr && mb != nullptr)
          link.bytes_per_second = std::min(PcieBytesPerSecond(*ma), PcieBytesPerSecond(*mb));
      }
      inv.links[i][j] = link;
      inv.links[j][i] = link;
    }
  }

  // XID events: one set for all devices, drained without waiting by every Sample. Registration
  // needs root on some drivers; without it health simply carries no XIDs.
  if (s.events == nullptr && api.EventSetCreate != nullptr && api.DeviceRegisterEvents != nullptr &&
      api.EventSetWait != nullptr) {
    if (api.EventSetCreate(&s.events) != NVML_SUCCESS) s.events = nullptr;
  }
  if (s.events != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      unsigned long long supported = kEventTypeXidCriticalError;
      if (api.DeviceGetSupportedEventTypes != nullptr &&
          api.DeviceGetSupportedEventTypes(s.handles[i], &supported) != NVML_SUCCESS) {
        supported = 0;
      }
      if ((supported & kEventTypeXidCriticalError) == 0) continue;
      nvmlReturn_t r = api.DeviceRegisterEvents(s.handles[i], kEventTypeXidCriticalError, s.events);
      if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED && r != NVML_ERROR_NO_PERMISSION) {
        problem(fmt::format("GPU {}: XID events: {}", i, s.Error(r)));
      }
    }
  }
  s.discovered = true;
  return inv;
}

absl::StatusOr<std::vector<GpuSample>> NvmlDiscovery::Sample() {
  State& s = *state_;
  const NvmlApi& api = s.api;
  if (!s.discovered) return absl::FailedPreconditionError("nvml: Sample before a successful Discover");
  std::vector<GpuSample> samples(s.handles.size());
  for (size_t i = 0; i < s.handles.size(); ++i) {
    nvmlDevice_t h = s.handles[i];
    GpuSample& out = samples[i];
    // Returns true when the value may be used. A lost GPU stops all further queries; an
    // unsupported query leaves its field empty; any other failure is recorded once.
    auto ok = [&](nvmlReturn_t r, const char* what) {
      if (r == NVML_SUCCESS) return true;
      if (r == NVML_ERROR_GPU_IS_LOST) {
        out.health.lost = true;
        out.health.error = fmt::format("{}: {}", what, s.Error(r));
      } else if (r != NVML_ERROR_NOT_SUPPORTED && r != NVML_ERROR_NO_PERMISSION && out.health.error.empty()) {
        out.health.error = fmt::format("{}: {}", what, s.Error(r));
      }
      return false;
    };
    if (api.DeviceGetUtilizationRates != nullptr) {
      nvmlUtilization_t u{};
      if (ok(api.DeviceGetUtilizationRates(h, &u), "utilization")) out.telemetry.utilization_percent = u.gpu;
    }
    if (!out.health.lost) {
      nvmlMemory_t mem{};
      if (ok(api.DeviceGetMemoryInfo(h, &mem), "memory")) out.telemetry.memory_used_bytes = mem.used;
    }
    if (!out.health.lost && api.DeviceGetTemperature != nullptr) {
      unsigned int t = 0;
      if (ok(api.DeviceGetTemperature(h, kTemperatureGpu, &t), "temperature")) {
        out.telemetry.temperature_celsius = static_cast<int32_t>(t);
      }
    }
    if (!out.health.lost && api.DeviceGetPowerUsage != nullptr) {
      unsigned int mw = 0;
      if (ok(api.DeviceGetPowerUsage(h, &mw), "power")) out.telemetry.power_milliwatts = mw;
    }
    if (!out.health.lost && api.DeviceGetTotalEccErrors != nullptr) {
      unsigned long long errors = 0;
      if (ok(api.DeviceGetTotalEccErrors(h, kMemoryErrorUncorrected, kVolatileEcc, &errors), "ECC errors")) {
        out.health.ecc_uncorrected = errors;
      }
    }
    if (!out.health.lost && api.DeviceGetRetiredPages != nullptr) {
      // Page retirement is a pre-Ampere mechanism (Ampere and later remap rows instead and answer
      // NOT_SUPPORTED here). A zero count asks only for the number of pages.
      uint32_t total = 0;
      bool any = false;
      for (int cause : {kRetireMultipleSingleBit, kRetireDoubleBit}) {
        unsigned int pages = 0;
        nvmlReturn_t r = api.DeviceGetRetiredPages(h, cause, &pages, nullptr);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE) r = NVML_SUCCESS;
        if (ok(r, "retired pages")) {
          total += pages;
          any = true;
        }
      }
      if (any) out.health.retired_pages = total;
    }
    if (!out.health.lost && api.DeviceGetRetiredPagesPendingStatus != nullptr) {
      int pending = 0;
      if (ok(api.DeviceGetRetiredPagesPendingStatus(h, &pending), "pending retirement")) {
        out.health.retirement_pending = pending == kFeatureEnabled;
      }
    }
  }
  if (s.events != nullptr) {
    for (int k = 0; k < kMaxEventsPerSample; ++k) {
      nvmlEventData_t data{};
      nvmlReturn_t r = api.EventSetWait(s.events, &data, 0);
      if (r == NVML_ERROR_TIMEOUT) break;  // nothing (more) pending
      if (r != NVML_SUCCESS) {
        // An event for a lost GPU surfaces here too; the per-device queries above report it.
        if (r != NVML_ERROR_GPU_IS_LOST) break;
        continue;
      }
      if ((data.eventType & kEventTypeXidCriticalError) == 0) continue;
      for (size_t i = 0; i < s.handles.size(); ++i) {
        if (s.handles[i] == data.device) samples[i].health.xid_errors.push_back(data.eventData);
      }
    }
  }
  return samples;
}

}  // namespace gpugeek::hw
