#include "cli/port_spec.h"

#include <charconv>

#include <fmt/format.h>

namespace gpugeek::cli {
namespace {

bool ParsePort(const std::string& s, int* out) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 1 || v > 65535) return false;
  *out = v;
  return true;
}

}  // namespace

absl::StatusOr<PortSpec> ParsePortSpec(const std::string& text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(fmt::format(
        "port '{}': write REMOTE, LOCAL:REMOTE or :REMOTE with ports 1..65535 (e.g. 8000, 9000:8000, :8000)", text));
  };
  PortSpec spec;
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    if (!ParsePort(text, &spec.remote)) return bad();
    spec.local = spec.remote;
    return spec;
  }
  if (text.find(':', colon + 1) != std::string::npos) return bad();
  const std::string local = text.substr(0, colon);
  if (!local.empty() && !ParsePort(local, &spec.local)) return bad();
  if (!ParsePort(text.substr(colon + 1), &spec.remote)) return bad();
  return spec;
}

}  // namespace gpugeek::cli
