#pragma once
// JSON shapes of the REST API (documented in openapi.cc). Times are RFC 3339 UTC strings, memory
// in bytes, GPU share in milli-GPU.

#include <nlohmann/json.hpp>

#include "controlplane/control_plane.h"

namespace gpugeek::controlplane {

std::string FormatTime(TimePoint t);  // "2026-11-29T21:04:21.123Z"

nlohmann::json JobToJson(const JobView& job);
// A dry run's answer: {"dry_run": true, "spec_yaml", "plan" (as a job's, or null), "lines": [{gpu_model,
// capacity_type, region, provider, price_micros_per_gpu_hour, members, gpus_per_member, gpu_milli, fits_now,
// price_per_hour_micros, est_seconds?, estimate, est_cost_micros?}], "available_micros", "enforced"}.
nlohmann::json QuoteToJson(const JobQuote& quote);
nlohmann::json EventToJson(const store::EventRecord& e);
nlohmann::json NodeToJson(const NodeView& node);
nlohmann::json PoolToJson(const PoolView& pool);

}  // namespace gpugeek::controlplane
