#include "cli/podman_flags.h"

#include <unistd.h>

#include <sstream>

namespace gpugeek::cli {

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

absl::StatusOr<std::vector<std::string>> PodmanCommand(const std::string& flag) {
  if (flag == "off") return std::vector<std::string>{};
  if (flag == "auto") {
    const bool installed = ::access("/usr/bin/podman", X_OK) == 0 || ::access("/usr/local/bin/podman", X_OK) == 0;
    if (::geteuid() == 0 && installed) return std::vector<std::string>{"podman"};
    return std::vector<std::string>{};
  }
  std::vector<std::string> words = SplitWords(flag);
  if (words.empty()) {
    return absl::InvalidArgumentError("--podman: give the podman command (e.g. \"podman --root DIR\"), auto or off");
  }
  return words;
}

}  // namespace gpugeek::cli
