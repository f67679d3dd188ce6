#pragma once
// The one mapping between absl::Status and HTTP (ARCHITECTURE.md: "Status -> HTTP mapping in
// exactly one function"). Error bodies are JSON: {"code": "INVALID_ARGUMENT", "message": "...",
// "details": {...}}.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace gpugeek::http {

// Serialises JSON for the wire. Strings holding invalid UTF-8 (e.g. workload log bytes) are
// written with U+FFFD replacement characters instead of failing.
std::string DumpJson(const nlohmann::json& j);

// HTTP status for a Status: OK 200; InvalidArgument, OutOfRange 400; Unauthenticated 401;
// PaymentRequiredError 402; PermissionDenied 403; NotFound 404; AlreadyExists, Aborted, FailedPrecondition 409 (the
// resource's current state forbids the request); ResourceExhausted 429; Cancelled 499;
// Unimplemented 501; Unavailable 503; DeadlineExceeded 504; anything else 500.
int HttpStatusFor(const absl::Status& status);

// Payment required (402): the request cannot be paid for (a tenant's credit or budget is spent). A
// FailedPrecondition that carries a payload marking it, so HttpStatusFor answers 402 with the code name
// "PAYMENT_REQUIRED", and StatusFromHttp turns that body back into the same marked status.
absl::Status PaymentRequiredError(std::string_view message);
bool IsPaymentRequired(const absl::Status& status);

// {"code": <canonical code name>, "message": <message>, "details": <details or {}>}.
nlohmann::json ErrorBody(const absl::Status& status, const nlohmann::json& details = nlohmann::json::object());

// The inverse, for clients: a Status from an HTTP status and an error body as ErrorBody writes it.
// Falls back to the HTTP status when the body is not such JSON.
absl::Status StatusFromHttp(int http_status, const std::string& body);

}  // namespace gpugeek::http
