#pragma once
// JSON rendering of a plan candidate (`gpugeek plan --json` and the server's POST /v1/plans).
// Memory in bytes, time in seconds, money in integer micro-units.

#include <nlohmann/json.hpp>

#include "workload/planner.h"

namespace gpugeek::workload {

nlohmann::json PlanCandidateToJson(const PlanCandidate& c);

}  // namespace gpugeek::workload
