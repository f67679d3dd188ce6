#include "controlplane/quota_routes.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/paging.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

J QuotaRowJson(const TenantQuotaView& v) {
  const sched::TenantUsage& u = v.usage;
  J over = J::array();
  for (const auto& [id, reason] : v.over_quota_jobs) over.push_back({{"id", id}, {"reason", reason}});
  return {{"tenant", u.tenant},
          {"weight", u.config.weight},
          {"max_gpus_by_model", u.config.quota.max_gpus_by_model},
          {"max_gpu_milli", u.config.quota.max_gpu_milli},
          {"max_jobs", u.config.quota.max_jobs},
          {"held_gpu_milli", u.held.gpu_milli()},
          {"held_gpu_milli_by_model", u.held.gpu_milli_by_model},
          {"jobs", u.jobs},
          {"usage_gpu_milli_seconds", u.usage},
          {"normalized_usage", u.normalized_usage},
          {"normalized_share", u.normalized_share},
          {"fair_share_factor", u.fair_share_factor},
          {"over_quota_jobs", over}};
}

absl::StatusOr<Reply> GetQuota(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  const std::string tenant = r.query_value("tenant");
  J out = {{"half_life_s", std::chrono::duration<double>(cp.fair_share_half_life()).count()}};
  // Which tenants the caller may see, by name.
  std::set<std::string> names;
  if (!who.admin()) {
    // Another tenant's quota reads as none at all.
    if (tenant.empty() || tenant == who.tenant) names.insert(who.tenant);
  } else if (!tenant.empty()) {
    names.insert(tenant);
  } else {
    ASSIGN_OR_RETURN(auto tenants, accounts.Tenants(who));
    for (const store::TenantRecord& t : tenants) names.insert(t.id);
    for (const TenantQuotaView& v : cp.TenantQuotas()) names.insert(v.usage.tenant);
  }
  const std::vector<std::string> sorted(names.begin(), names.end());
  ASSIGN_OR_RETURN(out,
                   Page(
                       r, "tenants", sorted, [](const std::string& name) { return name; },
                       [&cp](const std::string& name) { return QuotaRowJson(cp.TenantQuota(name)); }, std::move(out)));
  return Reply::Json(out);
}

absl::StatusOr<Reply> PutQuota(ControlPlane& cp, const Accounts& accounts, const Request& r) {
  const std::string tenant = r.param("name");
  if (!accounts.HasTenant(tenant)) return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"weight", "max_gpu_milli", "max_jobs", "max_gpus_by_model"}));
  sched::TenantConfig config;
  if (reader.Has("weight") && !body["weight"].is_null()) {
    if (!body["weight"].is_number() || !std::isfinite(body["weight"].get<double>()) ||
        body["weight"].get<double>() <= 0) {
      return reader.Error("weight", "must be a number > 0");
    }
    config.weight = body["weight"].get<double>();
  }
  // Caps beyond these are unlimited in practice: 10^12 milli-GPU is a billion GPUs.
  ASSIGN_OR_RETURN(config.quota.max_gpu_milli, reader.Int("max_gpu_milli", 0, 0, int64_t{1'000'000'000'000}));
  ASSIGN_OR_RETURN(int64_t max_jobs, reader.Int("max_jobs", 0, 0, INT32_MAX));
  config.quota.max_jobs = static_cast<int32_t>(max_jobs);
  if (reader.Has("max_gpus_by_model") && !body["max_gpus_by_model"].is_null()) {
    const J& models = body["max_gpus_by_model"];
    if (!models.is_object()) return reader.Error("max_gpus_by_model", "must be an object {GPU model: GPUs}");
    api::JsonReader m(models, reader.Path("max_gpus_by_model"));
    for (const auto& [model, n] : models.items()) {
      ASSIGN_OR_RETURN(int64_t gpus, m.Int(model, 0, 0, 1'000'000'000));
      if (gpus > 0) config.quota.max_gpus_by_model[model] = gpus;
    }
  }
  ASSIGN_OR_RETURN(TenantQuotaView v, cp.SetTenantQuota(tenant, config));
  return Reply::Json(QuotaRowJson(v));
}

}  // namespace

void RegisterQuotaRoutes(http::Server& server, ControlPlane& cp, Accounts& accounts) {
  GuardedRoute(server, accounts, "GET", "/v1/quota",
               [&cp, &accounts](const Principal& who, const Request& r) { return GetQuota(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "PUT", "/v1/tenants/{name}/quota",
               [&cp, &accounts](const Principal&, const Request& r) { return PutQuota(cp, accounts, r); });
}

}  // namespace gpugeek::controlplane
