// libFuzzer target: the API's JSON decoding (agent registration, heartbeats and their replies) must
// answer any bytes with a value or an InvalidArgument, never crash; what decodes re-encodes to JSON
// that decodes to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  using namespace gpugeek::api;
  if (auto hb = HeartbeatFromJson(j); hb.ok()) {
    auto again = HeartbeatFromJson(ToJson(*hb));
    if (!again.ok() || again->workloads.size() != hb->workloads.size()) abort();
  }
  if (auto reply = HeartbeatReplyFromJson(j); reply.ok()) {
    auto again = HeartbeatReplyFromJson(ToJson(*reply));
    if (!again.ok() || again->assignments.size() != reply->assignments.size()) abort();
  }
  (void)RegistrationFromJson(j);
  (void)AssignmentFromJson(j);
  return 0;
}
