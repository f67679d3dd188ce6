#pragma once
// Validation of names and addresses that arrive from outside (node registrations, job specs, tenant
// ids, announced metrics addresses) before they are stored, logged, used in a path or a Prometheus
// target. Every refusal is InvalidArgument that names the field, shows the value bounded and escaped
// (at most its first 64 bytes; control bytes as \xNN, see common/quote.h) and says what is allowed.

#include <string_view>

#include "absl/status/status.h"

namespace gpugeek::api {

enum class NameKind {
  kNode,    // 1-128 of [A-Za-z0-9._-], starting with a letter or digit (like a hostname): "gpu-node-01"
  kJob,     // 1-128 of [A-Za-z0-9._-], not "." or "..": "llama2-70b-lora", "run_3.v2"
  kTenant,  // 1-63 of [a-z0-9-], starting with a letter and ending with a letter or digit (a DNS label)
};

// OK when `value` is a valid name of `kind`; otherwise InvalidArgument naming `field` (e.g. "node"),
// the first problem and the rule, e.g.
//   "node: 'evil/slash' has '/' at offset 4; a node name is 1-128 letters, digits, '.', '_' or '-',
//    starting with a letter or digit (e.g. gpu-node-01)".
absl::Status ValidateName(std::string_view field, std::string_view value, NameKind kind);

// OK when `value` is "host:port" that a scraper can dial: host an IPv4 literal ("10.0.0.7"), an IPv6
// literal in brackets ("[fd00::7]") or a DNS name (labels of 1-63 letters, digits or '-', not starting
// or ending with '-', 253 characters at most); port a decimal 1-65535. Otherwise InvalidArgument naming
// `field` and the problem, e.g. "metrics_address: '10.0.0.7' has no port; write host:port, e.g.
// 10.0.0.7:9400". An empty value is refused too: where the field is optional, check for empty first.
absl::Status ValidateHostPort(std::string_view field, std::string_view value);

}  // namespace gpugeek::api
