#include "agent/engine_runtimes.h"

#include <algorithm>

#include <fmt/format.h>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/podman.h"
#include "api/engines.h"

namespace gpugeek::agent {
namespace {

// `text` split at `sep`, each piece without surrounding whitespace (absl's string_view is not std's here).
std::vector<std::string> Pieces(std::string_view text, char sep) {
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(text.data(), text.size()), sep)) {
    out.emplace_back(absl::StripAsciiWhitespace(piece));
  }
  return out;
}

}  // namespace

std::vector<std::string> RuntimesInLinkerCache(std::string_view listing) {
  std::vector<std::string> out;
  for (const std::string& line : Pieces(listing, '\n')) {
    const std::string_view soname = std::string_view(line).substr(0, line.find(' '));
    for (const api::EngineRuntime& r : api::EngineRuntimes()) {
      if (soname == r.library || (soname.starts_with(r.library) && soname[r.library.size()] == '.')) {
        out.emplace_back(r.name);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<std::vector<std::string>> EngineRuntimesFromFlag(std::string_view flag, std::string* note) {
  if (flag == "auto") {
    absl::StatusOr<std::string> listing = RunCapture({"ldconfig", "-p"});
    if (!listing.ok()) {
      *note = fmt::format("engine runtimes: `ldconfig -p` failed ({}); none reported (declare them with --engines)",
                          std::string(listing.status().message()));
      return std::vector<std::string>{};
    }
    return RuntimesInLinkerCache(*listing);
  }
  std::vector<std::string> out;
  if (flag == "none" || flag.empty()) return out;
  for (std::string& name : Pieces(flag, ',')) out.push_back(std::move(name));
  std::sort(out.begin(), out.end());
  absl::Status valid = api::ValidateEngineRuntimes("--engines", out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(fmt::format(
        "{} (auto, none, or a comma-separated list such as onnxruntime,tensorrt)", std::string(valid.message())));
  }
  return out;
}

}  // namespace gpugeek::agent
