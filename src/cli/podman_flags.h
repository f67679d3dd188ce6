#pragma once
// The --podman and --podman-run-flags options of `gpugeek agent` and `gpugeek up` (AgentOptions::podman,
// podman_run_flags; src/agent/README.md "Containers").

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::cli {

// `text` split on spaces and tabs (no quoting: a podman path or flag holding a space cannot be given).
std::vector<std::string> SplitWords(const std::string& text);

// The podman invocation for --podman `flag`: "off" = none (no containers); "auto" = {"podman"} when the
// process is root and /usr/bin/podman or /usr/local/bin/podman is executable, else none; otherwise its words.
// InvalidArgument when `flag` has no word.
absl::StatusOr<std::vector<std::string>> PodmanCommand(const std::string& flag);

}  // namespace gpugeek::cli
