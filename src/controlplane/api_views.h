#pragma once
// JSON shapes of the REST API (documented in openapi.cc). Times are RFC 3339 UTC strings, memory
// in bytes, GPU share in milli-GPU.

#include <nlohmann/json.hpp>

#include "controlplane/control_plane.h"

namespace gpugeek::controlplane {

std::string FormatTime(TimePoint t);  // "2026-11-29T21:04:21.123Z"

nlohmann::json JobToJson(const JobView& job);
nlohmann::json EventToJson(const store::EventRecord& e);
nlohmann::json NodeToJson(const NodeView& node);
nlohmann::json PoolToJson(const PoolView& pool);

}  // namespace gpugeek::controlplane
