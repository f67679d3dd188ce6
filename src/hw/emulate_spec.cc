#include "hw/emulate_spec.h"

#include <cctype>

#include "fmt/format.h"

namespace gpugeek::hw {
namespace {

constexpr std::string_view kExample = "e.g. 8xH100-SXM-80GB or 4xA100-PCIe-80GB,2xL4";

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Echoes user text in an error without flooding the terminal.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 60;
  std::string out(s.substr(0, kMax));
  for (char& c : out) {
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  }
  if (s.size() > kMax) out += "...";
  return "'" + out + "'";
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

}  // namespace

int EmulateSpec::TotalGpus() const {
  int total = 0;
  for (const auto& g : groups) total += g.count;
  return total;
}

std::string EmulateSpec::Canonical() const {
  std::string out;
  for (const auto& g : groups) {
    if (!out.empty()) out += ",";
    out += fmt::format("{}x{}", g.count, g.model->id);
  }
  return out;
}

absl::StatusOr<EmulateSpec> ParseEmulateSpec(std::string_view text, const GpuCatalog& catalog) {
  if (TrimSpaces(text).empty()) return Invalid(fmt::format("empty emulate spec; expected {}", kExample));
  EmulateSpec spec;
  int entry = 0;
  int total = 0;
  while (true) {
    ++entry;
    size_t comma = text.find(',');
    std::string_view item = TrimSpaces(text.substr(0, comma));
    if (item.empty())
      return Invalid(fmt::format("entry {} of the emulate spec is empty; expected {}", entry, kExample));

    // A leading run of digits followed by 'x' is a count; anything else is a model name with an
    // implied count of one ("MI300X" has an 'x' but no leading digits).
    size_t digits = 0;
    while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits]))) ++digits;
    int count = 1;
    std::string_view model_name = item;
    if (digits > 0) {
      std::string_view rest = TrimSpaces(item.substr(digits));
      if (rest.empty() || (rest.front() != 'x' && rest.front() != 'X')) {
        return Invalid(fmt::format("entry {}: expected COUNTxMODEL in {}, {}", entry, Quote(item), kExample));
      }
      // Counts beyond two digits are rejected before conversion so no input can overflow.
      count = digits > 2 ? kMaxEmulatedGpus + 1 : std::stoi(std::string(item.substr(0, digits)));
      if (count < 1 || count > kMaxEmulatedGpus) {
        return Invalid(fmt::format("entry {}: count must be 1..{}, got {}", entry, kMaxEmulatedGpus,
                                   Quote(item.substr(0, digits))));
      }
      model_name = TrimSpaces(rest.substr(1));
      if (model_name.empty()) {
        return Invalid(fmt::format("entry {}: missing GPU model after {}; {}", entry, Quote(item), kExample));
      }
    }
    const GpuModel* model = catalog.Resolve(model_name);
    if (model == nullptr) {
      return Invalid(
          fmt::format("unknown GPU model {}; see `gpugeek catalog` for the names gpugeek knows", Quote(model_name)));
    }
    if (!model->disclosed) {
      return Invalid(
          fmt::format("GPU model {} ({}) has no published figures and cannot be emulated; pick a "
                      "disclosed model from `gpugeek catalog`",
                      Quote(model_name), model->id));
    }
    total += count;
    if (total > kMaxEmulatedGpus) {
      return Invalid(fmt::format("the emulate spec asks for more than {} GPUs; at most {} per node", kMaxEmulatedGpus,
                                 kMaxEmulatedGpus));
    }
    spec.groups.push_back({count, model});
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return spec;
}

}  // namespace gpugeek::hw
