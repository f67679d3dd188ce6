#include "agent/image_requirements.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace gpugeek::agent {
namespace {

using Version = std::vector<uint32_t>;

// The leading dotted numbers of `text` ("6.0.2-115" -> 6.0.2, "12.4" -> 12.4); nullopt when it does not
// start with one ("emulated", "rocm-smi 7.3.0").
std::optional<Version> LeadingVersion(const std::string& text) {
  Version v;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p < end) {
    uint32_t n = 0;
    const auto [next, ec] = std::from_chars(p, end, n);
    if (ec != std::errc()) break;
    v.push_back(n);
    p = next;
    if (p < end && *p == '.' && p + 1 < end && *(p + 1) >= '0' && *(p + 1) <= '9') {
      ++p;
      continue;
    }
    break;
  }
  if (v.empty()) return std::nullopt;
  return v;
}

// A label's value: dotted numbers and nothing else.
std::optional<Version> ExactVersion(const std::string& text) {
  std::optional<Version> v = LeadingVersion(text);
  if (!v) return std::nullopt;
  // "12.04" reads as 12.4: compare by numbers, so accept any digits; only trailing junk is refused.
  size_t digits_and_dots = 0;
  while (digits_and_dots < text.size() &&
         ((text[digits_and_dots] >= '0' && text[digits_and_dots] <= '9') || text[digits_and_dots] == '.')) {
    ++digits_and_dots;
  }
  if (digits_and_dots != text.size() || text.back() == '.') return std::nullopt;
  return v;
}

bool AtLeast(const Version& have, const Version& need) {
  for (size_t i = 0; i < std::max(have.size(), need.size()); ++i) {
    const uint32_t h = i < have.size() ? have[i] : 0;
    const uint32_t n = i < need.size() ? need[i] : 0;
    if (h != n) return h > n;
  }
  return true;
}

std::string Label(const std::map<std::string, std::string>& labels, const char* key) {
  auto it = labels.find(key);
  return it == labels.end() ? "" : it->second;
}

}  // namespace

std::optional<std::string> WhyImageDoesNotFit(const std::map<std::string, std::string>& labels,
                                              const hw::NodeInventory& inventory) {
  std::string accelerator = Label(labels, kAcceleratorLabel);
  const std::string cuda = Label(labels, kCudaLabel);
  const std::string rocm = Label(labels, kRocmLabel);
  const std::string driver = Label(labels, kDriverLabel);
  if (!accelerator.empty() && accelerator != "cpu" && accelerator != "cuda" && accelerator != "rocm") {
    return fmt::format("label {}='{}' is not cpu, cuda or rocm", kAcceleratorLabel, accelerator);
  }
  if (!cuda.empty() && !rocm.empty())
    return fmt::format("labels {} and {} both set: one image, one stack", kCudaLabel, kRocmLabel);
  if (!cuda.empty()) accelerator = "cuda";
  if (!rocm.empty()) accelerator = "rocm";
  if (accelerator.empty() || accelerator == "cpu") {
    if (!driver.empty() && inventory.gpus.empty())
      return fmt::format("needs a GPU driver >= {}; the node has no GPU", driver);
  }
  const hw::Vendor vendor = accelerator == "cuda" ? hw::Vendor::kNvidia : hw::Vendor::kAmd;
  const char* stack = accelerator == "cuda" ? "CUDA" : "ROCm";
  std::vector<const hw::GpuDevice*> gpus;
  for (const hw::GpuDevice& g : inventory.gpus) {
    if (accelerator == "cuda" || accelerator == "rocm") {
      if (g.vendor == vendor) gpus.push_back(&g);
    } else {
      gpus.push_back(&g);
    }
  }
  if ((accelerator == "cuda" || accelerator == "rocm") && gpus.empty()) {
    return fmt::format("needs an {} GPU ({}); the node has none", accelerator == "cuda" ? "NVIDIA" : "AMD", stack);
  }
  const std::string& runtime_need = accelerator == "cuda" ? cuda : rocm;
  if (!runtime_need.empty()) {
    std::optional<Version> need = ExactVersion(runtime_need);
    if (!need) {
      return fmt::format("label {}='{}' is not a version (write e.g. 12.1)",
                         accelerator == "cuda" ? kCudaLabel : kRocmLabel, runtime_need);
    }
    for (const hw::GpuDevice* g : gpus) {
      std::optional<Version> have = LeadingVersion(g->runtime_version);
      if (!have) {
        return fmt::format("needs {} >= {}; GPU {} states no {} version ('{}')", stack, runtime_need, g->index, stack,
                           g->runtime_version);
      }
      if (!AtLeast(*have, *need)) {
        return fmt::format("needs {} >= {}; the driver of GPU {} supports {}", stack, runtime_need, g->index,
                           g->runtime_version);
      }
    }
  }
  if (!driver.empty()) {
    std::optional<Version> need = ExactVersion(driver);
    if (!need) return fmt::format("label {}='{}' is not a version (write e.g. 535.104)", kDriverLabel, driver);
    for (const hw::GpuDevice* g : gpus) {
      std::optional<Version> have = LeadingVersion(g->driver_version);
      if (!have) {
        return fmt::format("needs a GPU driver >= {}; GPU {} states no driver version ('{}')", driver, g->index,
                           g->driver_version);
      }
      if (!AtLeast(*have, *need)) {
        return fmt::format("needs a GPU driver >= {}; GPU {} runs driver {}", driver, g->index, g->driver_version);
      }
    }
  }
  return std::nullopt;
}

}  // namespace gpugeek::agent
