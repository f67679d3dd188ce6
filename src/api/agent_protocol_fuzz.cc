// libFuzzer target: the API's JSON decoding (agent registration, heartbeats and their replies) must
// answer any bytes with a value or an InvalidArgument, never crash; what decodes re-encodes to JSON
// that decodes to the same message (log bytes exactly, through JSON text as HTTP carries them).
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
    const nlohmann::json text = nlohmann::json::parse(ToJson(*hb).dump(), nullptr, /*allow_exceptions=*/false);
    auto again = HeartbeatFromJson(text);
    if (!again.ok() || again->workloads.size() != hb->workloads.size() || again->instance_id != hb->instance_id ||
        again->logs.size() != hb->logs.size()) {
      abort();
    }
    for (size_t i = 0; i < hb->logs.size(); ++i) {
      if (again->logs[i].data != hb->logs[i].data || again->logs[i].offset != hb->logs[i].offset) abort();
    }
  }
  if (auto reply = HeartbeatReplyFromJson(j); reply.ok()) {
    auto again = HeartbeatReplyFromJson(ToJson(*reply));
    if (!again.ok() || again->assignments.size() != reply->assignments.size()) abort();
  }
  if (auto reply = RegistrationReplyFromJson(j); reply.ok()) {
    auto again = RegistrationReplyFromJson(ToJson(*reply));
    if (!again.ok() || again->lease_ms != reply->lease_ms || again->fence_grace_ms != reply->fence_grace_ms) abort();
  }
  (void)RegistrationFromJson(j);
  (void)AssignmentFromJson(j);
  return 0;
}
