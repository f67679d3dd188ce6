#include "hw/device.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "fmt/format.h"

namespace gpugeek::hw {
namespace {

constexpr struct {
  LinkKind kind;
  std::string_view label;
} kLabels[] = {
    {LinkKind::kSelf, "X"},    {LinkKind::kNvLink, "NV"}, {LinkKind::kXgmi, "XGMI"},
    {LinkKind::kPix, "PIX"},   {LinkKind::kPxb, "PXB"},   {LinkKind::kPhb, "PHB"},
    {LinkKind::kNode, "NODE"}, {LinkKind::kSys, "SYS"},   {LinkKind::kUnknown, "?"},
};

}  // namespace

std::string_view LinkKindLabel(LinkKind kind) {
  for (const auto& l : kLabels) {
    if (l.kind == kind) return l.label;
  }
  return "?";
}

std::optional<LinkKind> LinkKindFromLabel(std::string_view label) {
  std::string upper = absl::AsciiStrToUpper(absl::string_view(label.data(), label.size()));
  for (const auto& l : kLabels) {
    if (l.label == upper) return l.kind;
  }
  return std::nullopt;
}

bool IsPciePath(LinkKind kind) { return kind >= LinkKind::kPix && kind <= LinkKind::kSys; }

bool GpuHealth::Healthy() const {
  return !lost && error.empty() && ecc_uncorrected.value_or(0) == 0 && !retirement_pending.value_or(false) &&
         xid_errors.empty();
}

std::string GpuHealth::Summary() const {
  if (lost) return "lost";
  if (!error.empty()) return "error";
  if (ecc_uncorrected.value_or(0) > 0) return absl::StrCat("ecc:", *ecc_uncorrected);
  if (retirement_pending.value_or(false)) return "pending-retire";
  if (!xid_errors.empty()) return absl::StrCat("xid:", xid_errors.back());
  return "ok";
}

absl::Status ApplySamples(const std::vector<GpuSample>& samples, NodeInventory& inventory) {
  if (samples.size() != inventory.gpus.size()) {
    return absl::InvalidArgumentError(fmt::format("{} samples for {} devices: the inventory changed, discover again",
                                                  samples.size(), inventory.gpus.size()));
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    inventory.gpus[i].telemetry = samples[i].telemetry;
    inventory.gpus[i].health = samples[i].health;
  }
  return absl::OkStatus();
}

absl::Status ValidateInventory(const NodeInventory& inventory) {
  const size_t n = inventory.gpus.size();
  if (inventory.links.size() != n) {
    return absl::InvalidArgumentError(fmt::format("link matrix has {} rows for {} GPUs", inventory.links.size(), n));
  }
  std::set<std::string> uuids;
  for (size_t i = 0; i < n; ++i) {
    const GpuDevice& d = inventory.gpus[i];
    if (d.index != static_cast<int>(i)) {
      return absl::InvalidArgumentError(fmt::format("GPU at position {} has index {}", i, d.index));
    }
    if (d.uuid.empty()) return absl::InvalidArgumentError(fmt::format("GPU {} has no UUID", i));
    if (!uuids.insert(d.uuid).second) {
      return absl::InvalidArgumentError(fmt::format("GPU {} repeats UUID {}", i, d.uuid));
    }
    if (inventory.links[i].size() != n) {
      return absl::InvalidArgumentError(
          fmt::format("link matrix row {} has {} entries for {} GPUs", i, inventory.links[i].size(), n));
    }
    for (size_t j = 0; j < n; ++j) {
      const PeerLink& a = inventory.links[i][j];
      if ((i == j) != (a.kind == LinkKind::kSelf)) {
        return absl::InvalidArgumentError(
            fmt::format("link {}-{} is {} (only the diagonal is X)", i, j, std::string(LinkKindLabel(a.kind))));
      }
      if (!(a == inventory.links[j][i])) {
        return absl::InvalidArgumentError(fmt::format("link {}-{} differs from link {}-{}", i, j, j, i));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::hw
