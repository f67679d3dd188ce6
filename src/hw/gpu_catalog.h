#pragma once
// The GPU catalog: what gpugeek knows about each GPU model from its vendor's datasheet.
//
// The data lives in `src/hw/gpu_catalog.json` (compiled into the binary, and loadable from a file
// with `LoadGpuCatalog`). One entry describes one *schedulable device* as the driver enumerates it:
// for AMD MI250 / MI250X, which expose two GCDs per package, an entry is one GCD and its figures are
// the package datasheet figures divided by two (the entry says so in `package_devices`).
//
// Units: memory in bytes (the datasheet capacity, read as binary GiB; drivers report slightly less
// because of reserved memory, and measured totals win when present), bandwidth in bytes/s (decimal,
// as datasheets quote), compute in FLOP/s or OP/s, dense (no structured sparsity), power in watts.
//
// Thread-safety: a GpuCatalog is immutable after construction and safe to share between threads.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace gpugeek::hw {

enum class Vendor { kNvidia, kAmd, kUndisclosed };
std::string_view VendorName(Vendor v);  // "nvidia", "amd", "undisclosed"

// Numeric formats a datasheet quotes peak throughput for. kInt8 is in OP/s, the others FLOP/s.
enum class Precision { kFp32, kTf32, kFp16, kBf16, kFp8, kInt8 };
inline constexpr Precision kAllPrecisions[] = {Precision::kFp32, Precision::kTf32, Precision::kFp16,
                                               Precision::kBf16, Precision::kFp8,  Precision::kInt8};
std::string_view PrecisionName(Precision p);  // "fp32", "tf32", "fp16", "bf16", "fp8", "int8"

// How a GPU talks to its peers and to the host.
struct Interconnect {
  int nvlink_generation = 0;             // 0: no NVLink
  uint64_t nvlink_bytes_per_second = 0;  // total bidirectional NVLink bandwidth per GPU
  uint64_t xgmi_bytes_per_second = 0;    // AMD Infinity Fabric (XGMI) peer bandwidth per GPU
  int xgmi_links = 0;                    // XGMI links per GPU
  int pcie_generation = 0;               // host link, x16
  uint64_t PcieBytesPerSecond() const;   // bidirectional x16 bandwidth of `pcie_generation`
};

struct GpuModel {
  std::string id;            // catalog id, e.g. "H100-SXM-80GB"; unique
  std::string display_name;  // e.g. "NVIDIA H100 SXM5 80GB"
  Vendor vendor = Vendor::kUndisclosed;
  std::string architecture;  // e.g. "Hopper", "CDNA3"; empty when undisclosed
  bool disclosed = true;     // false for opaque trace codes (Alibaba G1/G2/G3): no figures known
  uint64_t memory_bytes = 0;
  uint64_t memory_bandwidth_bytes_per_second = 0;
  // Dense peak per precision; std::nullopt where the device has no such path.
  std::optional<double> peak_ops[std::size(kAllPrecisions)];
  Interconnect interconnect;
  int tdp_watts = 0;
  std::string form_factor;               // "SXM5", "PCIe", "OAM", ...
  int package_devices = 1;               // devices per physical package (2 for MI250 / MI250X)
  std::vector<std::string> aliases;      // names NVML / ROCm SMI report, marketing names
  std::vector<std::string> trace_codes;  // codes used by public cluster traces ("V100M16", "G2")
  std::vector<std::string> sources;      // datasheet addresses the figures come from

  std::optional<double> PeakOps(Precision p) const { return peak_ops[static_cast<int>(p)]; }
};

class GpuCatalog {
 public:
  // Parses catalog JSON (the format of gpu_catalog.json). Errors (InvalidArgument) name the entry
  // and field: unknown keys, wrong types, duplicate ids or aliases, missing sources, figures
  // outside plausible ranges.
  static absl::StatusOr<std::unique_ptr<GpuCatalog>> Parse(std::string_view json_text);
  // The catalog compiled into this binary. Never fails: the embedded data is checked by tests.
  static const GpuCatalog& Builtin();

  const std::vector<GpuModel>& models() const { return models_; }
  // Exact catalog id, case-insensitive. nullptr when absent.
  const GpuModel* FindById(std::string_view id) const;
  // Resolves any name a user, a vendor library or a trace uses for a model: catalog ids, aliases
  // (e.g. "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X") and trace codes ("V100M32", "G2").
  // Matching ignores case, spaces, '-' and '_'. nullptr for an unknown name; callers keep the
  // device and report the raw name (an unknown GPU is never dropped).
  const GpuModel* Resolve(std::string_view name) const;

 private:
  std::vector<GpuModel> models_;
  absl::flat_hash_map<std::string, size_t> by_key_;  // normalised id/alias/code -> index
};

// Loads a catalog from a file path. NotFound if unreadable, else as GpuCatalog::Parse.
absl::StatusOr<std::unique_ptr<GpuCatalog>> LoadGpuCatalog(const std::string& path);

// The normalisation Resolve uses: lower case, without spaces, '-' and '_'.
std::string NormalizeModelName(std::string_view name);

}  // namespace gpugeek::hw
