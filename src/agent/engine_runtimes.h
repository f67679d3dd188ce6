#pragma once
// The compiled-engine runtimes of this node (api/engines.h), which the agent reports at registration
// (Registration::engines) so that jobs naming an `engine:` format land where it runs (sched::EngineFit).
//
// Found by the runtime's shared library in the dynamic linker's cache, as `ldconfig -p` lists it; the
// library is never loaded. A runtime outside that cache (a Python wheel's private copy) is declared with
// `gpugeek agent --engines NAME,...`.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::agent {

// The runtimes of api::EngineRuntimes() whose library `listing` (the text `ldconfig -p` prints: one
// "\tSONAME (FLAGS) => PATH" line per library) names, sorted. A soname matches a library
// "libonnxruntime.so" when it is that or that plus a version ("libonnxruntime.so.1.16"), not
// "libonnxruntime_providers_shared.so".
std::vector<std::string> RuntimesInLinkerCache(std::string_view listing);

// The --engines flag: "auto" -> RuntimesInLinkerCache of `ldconfig -p` (empty, with the reason in *note,
// when it cannot run); "none" or "" -> none; "a,b" -> those, sorted (names gpugeek does not know are kept:
// they match no format). InvalidArgument naming --engines for a malformed list.
absl::StatusOr<std::vector<std::string>> EngineRuntimesFromFlag(std::string_view flag, std::string* note);

}  // namespace gpugeek::agent
