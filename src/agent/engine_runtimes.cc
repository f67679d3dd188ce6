#include "agent/engine_runtimes.h"

#include <algorithm>

#include <fmt/format.h>

#include "agent/podman.h"
#include "api/engines.h"

namespace gpugeek::agent {
namespace {

// `text` split at `sep`, each piece without surrounding spaces and tabs.
std::vector<std::string_view> Pieces(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t end = std::min(text.find(sep), text.size());
    std::string_view piece = text.substr(0, end);
    const size_t first = piece.find_first_not_of(" \t");
    piece = first == std::string_view::npos ? std::string_view() : piece.substr(first);
    piece = piece.substr(0, piece.find_last_not_of(" \t") + 1);
    out.push_back(piece);
    if (end == text.size()) return out;
    text.remove_prefix(end + 1);
  }
}

}  // namespace

std::vector<std::string> RuntimesInLinkerCache(std::string_view listing) {
  std::vector<std::string> out;
  for (std::string_view line : Pieces(listing, '\n')) {
    const std::string_view soname = line.substr(0, line.find(' '));
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
  for (std::string_view name : Pieces(flag, ',')) out.emplace_back(name);
  std::sort(out.begin(), out.end());
  absl::Status valid = api::ValidateEngineRuntimes("--engines", out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(fmt::format(
        "{} (auto, none, or a comma-separated list such as onnxruntime,tensorrt)", std::string(valid.message())));
  }
  return out;
}

}  // namespace gpugeek::agent
