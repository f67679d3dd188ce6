#pragma once
// The OpenAPI 3.0 document of the REST API (served at GET /v1/openapi.json).

#include <nlohmann/json.hpp>

namespace gpugeek::controlplane {

const nlohmann::json& OpenApiDocument();

}  // namespace gpugeek::controlplane
