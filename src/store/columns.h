#pragma once
// How both stores (sqlite_store.cc, postgres_store.cc) write the record fields that have no column type of
// their own, and the names they seal bytes under, so the two write byte-identical column values and a
// database can be moved from one to the other. Internal to store/.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::store::columns {

// The largest `limit` a listing accepts (store.h: 1..10000).
inline constexpr int kMaxListLimit = 10'000;

// JobRecord::retries as "error=1,node-failure=2" (cause=count, by cause name; "" = none).
std::string FormatRetries(const std::map<std::string, int>& retries);
// The inverse. DataLoss naming `store` ("sqlite", "postgres") and the job when `text` is malformed.
absl::StatusOr<std::map<std::string, int>> ParseRetries(std::string_view store, const std::string& job,
                                                        const std::string& text);

// JobRecord::platform_env as a JSON object of strings ("" = none).
std::string FormatPlatformEnv(const std::map<std::string, std::string>& env);
// The inverse. DataLoss naming `store` and the job when `text` is not such an object.
absl::StatusOr<std::map<std::string, std::string>> ParsePlatformEnv(std::string_view store, const std::string& job,
                                                                    const std::string& text);

// TenantQuotaRecord::max_gpus_by_model as "MODEL=N,MODEL=N" (model ids hold neither '=' nor ',').
std::string EncodeModelCaps(const std::map<std::string, int64_t>& caps);
std::map<std::string, int64_t> DecodeModelCaps(const std::string& text);

// Sealing (store.h, Sealer): the tenant a job's or experiment's bytes are sealed for (its own, or
// "default" for one without), and the aad of each kind of sealed value.
inline std::string SealTenant(const std::string& tenant) { return tenant.empty() ? "default" : tenant; }
inline std::string SpecAad(const std::string& job_id) { return "job-spec:" + job_id; }
inline std::string SecretAad(const std::string& tenant, const std::string& name) {
  return "secret:" + tenant + "/" + name;
}
inline std::string ExperimentAad(const std::string& id) { return "experiment-spec:" + id; }
inline std::string ServiceAad(const std::string& id) { return "service-spec:" + id; }

}  // namespace gpugeek::store::columns
