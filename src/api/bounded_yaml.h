#pragma once
// Loading YAML from outside (job specs, experiment specs) within bounds, before any schema reads it.
// Each limit is an InvalidArgument naming it: at most 1 MiB of text, 10,000 '[' and '{' characters, one
// document with content, 100,000 values nested at most 64 deep (all checked before yaml-cpp builds a
// tree), the same once aliases are expanded (each counting as a copy of what it names), 8 MiB of keys so
// expanded, and no key twice in a mapping (yaml-cpp would keep both and lookups see only the first).

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"

namespace gpugeek::api {

// `what` names the document in messages ("job spec"); `unit` what one file holds ("job": "submit one job
// per file").
absl::StatusOr<YAML::Node> LoadBoundedYaml(std::string_view text, std::string_view what, std::string_view unit);

}  // namespace gpugeek::api
