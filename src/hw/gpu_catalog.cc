#include "hw/gpu_catalog.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "common/status_macros.h"

namespace gpugeek::hw {

// Defined in the generated gpu_catalog_data.cc: the text of gpu_catalog.json.
extern const char kBuiltinCatalogJson[];

namespace {

using Json = nlohmann::json;

// Plausible ranges for a disclosed datasheet figure; anything outside is a typo in the data file
// (e.g. GB/s written as TB/s). Bounds span a T4 (70 W, 16 GiB) to a B200 (1000 W, 180 GiB) with
// room for a generation or two either side.
constexpr double kMinMemoryGib = 4, kMaxMemoryGib = 1024;
constexpr double kMinBandwidthGbps = 100, kMaxBandwidthGbps = 50'000;
constexpr double kMinTflops = 1, kMaxTflops = 50'000;
constexpr int kMinTdpWatts = 30, kMaxTdpWatts = 3000;

class EntryReader {
 public:
  EntryReader(const Json& j, std::string where) : j_(j), where_(std::move(where)) {}

  absl::Status Error(std::string_view field, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("gpu catalog: {}: field '{}' {}", where_, field, what));
  }

  absl::Status CheckKeys(std::initializer_list<std::string_view> allowed) const {
    if (!j_.is_object()) return Error("(entry)", "must be a JSON object");
    for (const auto& [key, value] : j_.items()) {
      bool ok = false;
      for (auto a : allowed) ok |= (a == key);
      if (!ok) return Error(key, "is not a known field; check the spelling against gpu_catalog.json");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(std::string_view field, bool required) const {
    auto it = j_.find(std::string(field));
    if (it == j_.end()) {
      if (required) return Error(field, "is required");
      return std::string();
    }
    if (!it->is_string() || it->get<std::string>().empty()) return Error(field, "must be a non-empty string");
    return it->get<std::string>();
  }

  absl::StatusOr<std::vector<std::string>> Strings(std::string_view field) const {
    std::vector<std::string> out;
    auto it = j_.find(std::string(field));
    if (it == j_.end()) return out;
    if (!it->is_array()) return Error(field, "must be an array of strings");
    for (const auto& v : *it) {
      if (!v.is_string() || v.get<std::string>().empty()) return Error(field, "must hold non-empty strings");
      out.push_back(v.get<std::string>());
    }
    return out;
  }

  // A number within [lo, hi]; std::nullopt when absent and not required.
  absl::StatusOr<std::optional<double>> Number(std::string_view field, double lo, double hi, bool required) const {
    auto it = j_.find(std::string(field));
    if (it == j_.end()) {
      if (required) return Error(field, "is required");
      return std::optional<double>();
    }
    if (!it->is_number()) return Error(field, "must be a number");
    const double v = it->get<double>();
    if (!(v >= lo && v <= hi)) {
      return Error(field, fmt::format("= {} is outside the plausible range [{}, {}]; check the unit against "
                                      "the catalog's 'units'",
                                      v, lo, hi));
    }
    return v;
  }

  const Json& json() const { return j_; }
  const std::string& where() const { return where_; }

 private:
  const Json& j_;
  std::string where_;
};

uint64_t GbpsToBytes(double gbps) { return static_cast<uint64_t>(gbps * 1e9 + 0.5); }

absl::StatusOr<Vendor> ParseVendor(const EntryReader& r) {
  ASSIGN_OR_RETURN(std::string v, r.String("vendor", true));
  if (v == "nvidia") return Vendor::kNvidia;
  if (v == "amd") return Vendor::kAmd;
  if (v == "undisclosed") return Vendor::kUndisclosed;
  return r.Error("vendor", fmt::format("= '{}' must be one of nvidia, amd, undisclosed", v));
}

absl::Status ParseInterconnect(const EntryReader& entry, GpuModel& m) {
  auto it = entry.json().find("interconnect");
  if (it == entry.json().end()) return entry.Error("interconnect", "is required for a disclosed model");
  EntryReader r(*it, entry.where() + ".interconnect");
  RETURN_IF_ERROR(r.CheckKeys({"nvlink_generation", "nvlink_gbps", "xgmi_links", "xgmi_gbps", "pcie_generation"}));
  ASSIGN_OR_RETURN(auto pcie, r.Number("pcie_generation", 1, 7, true));
  ASSIGN_OR_RETURN(auto nvl_gen, r.Number("nvlink_generation", 1, 9, false));
  ASSIGN_OR_RETURN(auto nvl_bw, r.Number("nvlink_gbps", 10, 10'000, nvl_gen.has_value()));
  ASSIGN_OR_RETURN(auto xgmi_links, r.Number("xgmi_links", 1, 16, false));
  ASSIGN_OR_RETURN(auto xgmi_bw, r.Number("xgmi_gbps", 10, 10'000, xgmi_links.has_value()));
  if (nvl_bw && !nvl_gen) return r.Error("nvlink_generation", "is required when nvlink_gbps is given");
  if (xgmi_bw && !xgmi_links) return r.Error("xgmi_links", "is required when xgmi_gbps is given");
  m.interconnect.pcie_generation = static_cast<int>(*pcie);
  m.interconnect.nvlink_generation = static_cast<int>(nvl_gen.value_or(0));
  m.interconnect.nvlink_bytes_per_second = GbpsToBytes(nvl_bw.value_or(0));
  m.interconnect.xgmi_links = static_cast<int>(xgmi_links.value_or(0));
  m.interconnect.xgmi_bytes_per_second = GbpsToBytes(xgmi_bw.value_or(0));
  return absl::OkStatus();
}

absl::StatusOr<GpuModel> ParseModel(const Json& j, size_t index) {
  std::string where = fmt::format("models[{}]", index);
  if (j.is_object() && j.contains("id") && j["id"].is_string()) {
    where = fmt::format("{} ({})", where, j["id"].get<std::string>());
  }
  EntryReader r(j, where);
  RETURN_IF_ERROR(r.CheckKeys({"id", "display_name", "vendor", "architecture", "disclosed", "memory_gib",
                               "memory_bandwidth_gbps", "dense_tflops", "interconnect", "tdp_watts", "form_factor",
                               "package_devices", "aliases", "trace_codes", "sources", "notes"}));
  GpuModel m;
  ASSIGN_OR_RETURN(m.id, r.String("id", true));
  ASSIGN_OR_RETURN(m.display_name, r.String("display_name", true));
  ASSIGN_OR_RETURN(m.vendor, ParseVendor(r));
  if (auto it = j.find("disclosed"); it != j.end()) {
    if (!it->is_boolean()) return r.Error("disclosed", "must be true or false");
    m.disclosed = it->get<bool>();
  }
  ASSIGN_OR_RETURN(m.aliases, r.Strings("aliases"));
  ASSIGN_OR_RETURN(m.trace_codes, r.Strings("trace_codes"));
  ASSIGN_OR_RETURN(m.sources, r.Strings("sources"));
  if (m.sources.empty()) return r.Error("sources", "must name at least one datasheet address");
  ASSIGN_OR_RETURN(std::string notes, r.String("notes", false));
  (void)notes;

  if (!m.disclosed) {
    if (m.vendor != Vendor::kUndisclosed) return r.Error("vendor", "must be 'undisclosed' when disclosed is false");
    for (auto f : {"memory_gib", "memory_bandwidth_gbps", "dense_tflops", "tdp_watts", "interconnect"}) {
      if (j.contains(f)) return r.Error(f, "must be absent for an undisclosed model (its figures are unknown)");
    }
    return m;
  }
  if (m.vendor == Vendor::kUndisclosed) return r.Error("vendor", "must be nvidia or amd for a disclosed model");
  ASSIGN_OR_RETURN(m.architecture, r.String("architecture", true));
  ASSIGN_OR_RETURN(m.form_factor, r.String("form_factor", true));
  ASSIGN_OR_RETURN(auto mem, r.Number("memory_gib", kMinMemoryGib, kMaxMemoryGib, true));
  m.memory_bytes = static_cast<uint64_t>(*mem * static_cast<double>(uint64_t{1} << 30));
  ASSIGN_OR_RETURN(auto bw, r.Number("memory_bandwidth_gbps", kMinBandwidthGbps, kMaxBandwidthGbps, true));
  m.memory_bandwidth_bytes_per_second = GbpsToBytes(*bw);
  ASSIGN_OR_RETURN(auto tdp, r.Number("tdp_watts", kMinTdpWatts, kMaxTdpWatts, true));
  m.tdp_watts = static_cast<int>(*tdp);
  ASSIGN_OR_RETURN(auto pkg, r.Number("package_devices", 1, 8, false));
  m.package_devices = static_cast<int>(pkg.value_or(1));

  auto tf = j.find("dense_tflops");
  if (tf == j.end()) return r.Error("dense_tflops", "is required for a disclosed model");
  EntryReader t(*tf, where + ".dense_tflops");
  RETURN_IF_ERROR(t.CheckKeys({"fp32", "tf32", "fp16", "bf16", "fp8", "int8"}));
  for (Precision p : kAllPrecisions) {
    ASSIGN_OR_RETURN(auto v, t.Number(PrecisionName(p), kMinTflops, kMaxTflops, p == Precision::kFp32));
    if (v) m.peak_ops[static_cast<int>(p)] = *v * 1e12;
  }
  RETURN_IF_ERROR(ParseInterconnect(r, m));
  return m;
}

}  // namespace

std::string_view VendorName(Vendor v) {
  switch (v) {
    case Vendor::kNvidia:
      return "nvidia";
    case Vendor::kAmd:
      return "amd";
    case Vendor::kUndisclosed:
      return "undisclosed";
  }
  return "undisclosed";
}

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kInt8:
      return "int8";
  }
  return "fp32";
}

uint64_t Interconnect::PcieBytesPerSecond() const {
  // x16 bidirectional: PCIe 3.0 ~32 GB/s, 4.0 ~64 GB/s, 5.0 ~128 GB/s, 6.0 ~256 GB/s (PCI-SIG
  // base specifications; the per-lane rate doubles each generation from 8 GT/s at 3.0).
  if (pcie_generation < 1) return 0;
  const uint64_t gen1 = 8 * uint64_t{1'000'000'000};
  return gen1 << (pcie_generation - 1);
}

std::string NormalizeModelName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<GpuCatalog>> GpuCatalog::Parse(std::string_view json_text) {
  Json doc = Json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("gpu catalog: not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("gpu catalog: top level must be an object");
  auto models = doc.find("models");
  if (models == doc.end() || !models->is_array() || models->empty()) {
    return absl::InvalidArgumentError("gpu catalog: field 'models' must be a non-empty array");
  }
  auto catalog = std::unique_ptr<GpuCatalog>(new GpuCatalog());
  for (size_t i = 0; i < models->size(); ++i) {
    ASSIGN_OR_RETURN(GpuModel m, ParseModel((*models)[i], i));
    const size_t index = catalog->models_.size();
    auto add_key = [&](const std::string& name, std::string_view field) -> absl::Status {
      const std::string key = NormalizeModelName(name);
      auto [it, inserted] = catalog->by_key_.emplace(key, index);
      if (!inserted && it->second != index) {
        return absl::InvalidArgumentError(
            fmt::format("gpu catalog: models[{}] ({}): {} '{}' is already used by {}; "
                        "names must be unique",
                        i, m.id, field, name, catalog->models_[it->second].id));
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(add_key(m.id, "id"));
    for (const auto& a : m.aliases) RETURN_IF_ERROR(add_key(a, "alias"));
    for (const auto& c : m.trace_codes) RETURN_IF_ERROR(add_key(c, "trace code"));
    catalog->models_.push_back(std::move(m));
  }
  return catalog;
}

const GpuCatalog& GpuCatalog::Builtin() {
  static const GpuCatalog* builtin = [] {
    auto parsed = Parse(kBuiltinCatalogJson);
    // The embedded file is validated by gpu_catalog_test; a failure here is a build defect.
    if (!parsed.ok()) {
      fprintf(stderr, "gpugeek: built-in GPU catalog is invalid: %s\n", parsed.status().ToString().c_str());
      abort();
    }
    return parsed->release();
  }();
  return *builtin;
}

const GpuModel* GpuCatalog::FindById(std::string_view id) const {
  for (const auto& m : models_) {
    if (NormalizeModelName(m.id) == NormalizeModelName(id)) return &m;
  }
  return nullptr;
}

const GpuModel* GpuCatalog::Resolve(std::string_view name) const {
  std::string key = NormalizeModelName(name);
  // Strip the vendor words libraries prefix ("NVIDIA ", "AMD Instinct ", "Tesla ") as a fallback,
  // so "NVIDIA Tesla T4" and "AMD Instinct MI300X" both land even if only "T4"/"MI300X" is listed.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (auto it = by_key_.find(key); it != by_key_.end()) return &models_[it->second];
    for (std::string_view prefix : {"nvidia", "amd", "instinct", "tesla", "geforce"}) {
      if (key.starts_with(prefix)) key.erase(0, prefix.size());
    }
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<GpuCatalog>> LoadGpuCatalog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("gpu catalog: cannot read '{}'", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return GpuCatalog::Parse(buffer.str());
}

}  // namespace gpugeek::hw
