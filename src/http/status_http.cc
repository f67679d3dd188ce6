#include "http/status_http.h"

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace gpugeek::http {
namespace {

struct Mapping {
  absl::StatusCode code;
  int http;
  const char* name;
};

// Codes in the order of absl::StatusCode; `name` is the canonical upper-case spelling.
constexpr Mapping kMappings[] = {
    {absl::StatusCode::kOk, 200, "OK"},
    {absl::StatusCode::kCancelled, 499, "CANCELLED"},
    {absl::StatusCode::kUnknown, 500, "UNKNOWN"},
    {absl::StatusCode::kInvalidArgument, 400, "INVALID_ARGUMENT"},
    {absl::StatusCode::kDeadlineExceeded, 504, "DEADLINE_EXCEEDED"},
    {absl::StatusCode::kNotFound, 404, "NOT_FOUND"},
    {absl::StatusCode::kAlreadyExists, 409, "ALREADY_EXISTS"},
    {absl::StatusCode::kPermissionDenied, 403, "PERMISSION_DENIED"},
    {absl::StatusCode::kResourceExhausted, 429, "RESOURCE_EXHAUSTED"},
    {absl::StatusCode::kFailedPrecondition, 409, "FAILED_PRECONDITION"},
    {absl::StatusCode::kAborted, 409, "ABORTED"},
    {absl::StatusCode::kOutOfRange, 400, "OUT_OF_RANGE"},
    {absl::StatusCode::kUnimplemented, 501, "UNIMPLEMENTED"},
    {absl::StatusCode::kInternal, 500, "INTERNAL"},
    {absl::StatusCode::kUnavailable, 503, "UNAVAILABLE"},
    {absl::StatusCode::kDataLoss, 500, "DATA_LOSS"},
    {absl::StatusCode::kUnauthenticated, 401, "UNAUTHENTICATED"},
};

const Mapping& Find(absl::StatusCode code) {
  for (const Mapping& m : kMappings) {
    if (m.code == code) return m;
  }
  return kMappings[2];  // UNKNOWN
}

absl::StatusCode FromHttpOnly(int http) {
  switch (http) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 402:
      return absl::StatusCode::kFailedPrecondition;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kAborted;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return http >= 200 && http < 300 ? absl::StatusCode::kOk : absl::StatusCode::kUnknown;
  }
}

constexpr char kPaymentRequiredUrl[] = "type.gpugeek.dev/payment-required";
constexpr char kPaymentRequiredName[] = "PAYMENT_REQUIRED";

}  // namespace

absl::Status PaymentRequiredError(std::string_view message) {
  absl::Status status = absl::FailedPreconditionError(std::string(message));
  status.SetPayload(kPaymentRequiredUrl, absl::Cord("402"));
  return status;
}

bool IsPaymentRequired(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition && status.GetPayload(kPaymentRequiredUrl).has_value();
}

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

int HttpStatusFor(const absl::Status& status) { return IsPaymentRequired(status) ? 402 : Find(status.code()).http; }

nlohmann::json ErrorBody(const absl::Status& status, const nlohmann::json& details) {
  return {{"code", IsPaymentRequired(status) ? kPaymentRequiredName : Find(status.code()).name},
          {"message", std::string(status.message())},
          {"details", details}};
}

absl::Status StatusFromHttp(int http_status, const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("code") && j["code"].is_string() && j.contains("message") &&
      j["message"].is_string()) {
    if (j["code"].get<std::string>() == kPaymentRequiredName)
      return PaymentRequiredError(j["message"].get<std::string>());
    for (const Mapping& m : kMappings) {
      if (j["code"].get<std::string>() == m.name) return absl::Status(m.code, j["message"].get<std::string>());
    }
  }
  const absl::StatusCode code = FromHttpOnly(http_status);
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  return absl::Status(code, "HTTP " + std::to_string(http_status) + ": " + body.substr(0, 200));
}

}  // namespace gpugeek::http
