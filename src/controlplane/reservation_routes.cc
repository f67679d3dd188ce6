#include "controlplane/reservation_routes.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "absl/numeric/int128.h"
#include "absl/time/time.h"
#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/paging.h"
#include "ledger/money.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

constexpr double kMilliGpuSecondsPerGpuHour = 3'600'000.0;

J ReservationJson(ControlPlane& cp, const store::ReservationRecord& r) {
  const TimePoint now = cp.clock().Now();
  const std::string state = now >= r.end ? "ended" : now < r.start ? "scheduled" : "active";
  const int64_t elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::clamp(now, r.start, r.end) - r.start).count();
  const int64_t used = r.used_gpu_milli_seconds + cp.billing().reservations().OpenUsed(r.id);
  const int64_t held = r.held_gpu_milli_seconds;
  // What the hours charged cost at the price (the ledger's entries agree up to their carried fractions).
  const int64_t charged = static_cast<int64_t>(absl::int128(held) * r.price_micros / 3'600'000);
  return J{{"id", r.id},
           {"tenant", r.tenant},
           {"gpu_model", r.gpu_model},
           {"gpus", r.gpus},
           {"price_micros", r.price_micros},
           {"price", ledger::Money::Micros(r.price_micros).ToString()},
           {"start", FormatTime(r.start)},
           {"end", FormatTime(r.end)},
           {"state", state},
           {"created_by", r.created_by},
           {"created_at", FormatTime(r.created_at)},
           {"nodes", r.nodes},
           {"charged_hours", r.charged_hours},
           {"reserved_gpu_hours", static_cast<double>(int64_t{r.gpus} * elapsed_ms) / kMilliGpuSecondsPerGpuHour},
           {"held_gpu_hours", static_cast<double>(held) / kMilliGpuSecondsPerGpuHour},
           {"used_gpu_hours", static_cast<double>(used) / kMilliGpuSecondsPerGpuHour},
           {"unused_gpu_hours", static_cast<double>(std::max<int64_t>(0, held - used)) / kMilliGpuSecondsPerGpuHour},
           {"used_percent", held > 0 ? static_cast<double>(used) * 100.0 / static_cast<double>(held) : 0.0},
           {"charged_micros", charged},
           {"charged", ledger::Money::Micros(charged).ToString()}};
}

absl::StatusOr<Reply> List(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  std::string tenant = r.query_value("tenant");
  if (!who.admin() && tenant.empty()) tenant = who.tenant;
  if (!tenant.empty() && (!who.CanSee(tenant) || !accounts.HasTenant(tenant))) {
    return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  }
  const std::vector<store::ReservationRecord> all = cp.billing().reservations().List(tenant);
  ASSIGN_OR_RETURN(J out, Page(
                              r, "reservations", all, [](const store::ReservationRecord& v) { return v.id; },
                              [&](const store::ReservationRecord& v) { return ReservationJson(cp, v); }));
  return Reply::Json(out);
}

absl::StatusOr<store::ReservationRecord> Visible(ControlPlane& cp, const Principal& who, const std::string& id) {
  std::optional<store::ReservationRecord> r = cp.billing().reservations().Find(id);
  if (!r || !who.CanSee(r->tenant)) return absl::NotFoundError(fmt::format("no reservation '{}'", id));
  return *r;
}

// GPUs of `model` the pool has on ready on-demand nodes, less what reservations with a term overlapping
// [start, end) hold.
int64_t Reservable(ControlPlane& cp, const std::string& model, TimePoint start, TimePoint end) {
  std::shared_ptr<const Snapshot> snap = cp.snapshot();
  int64_t gpus = 0;
  if (snap->cluster) {
    const sched::Cluster& cluster = *snap->cluster;
    for (sched::NodeIndex n = 0; n < static_cast<sched::NodeIndex>(cluster.size()); ++n) {
      const sched::NodeSpec& spec = cluster.spec(n);
      auto node = snap->nodes.find(spec.name);
      if (spec.gpu_model != model || node == snap->nodes.end() || node->second.state != "ready" ||
          node->second.registration->capacity_type == "spot") {
        continue;
      }
      gpus += spec.gpu_count;
    }
  }
  for (const store::ReservationRecord& r : cp.billing().reservations().List("")) {
    if (r.gpu_model == model && r.start < end && start < r.end) gpus -= r.gpus;
  }
  return gpus;
}

absl::StatusOr<Reply> Create(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"tenant", "gpu_model", "gpus", "price", "hours", "start"}));
  store::ReservationRecord v;
  ASSIGN_OR_RETURN(v.tenant, reader.String("tenant"));
  if (!accounts.HasTenant(v.tenant)) return absl::NotFoundError(fmt::format("tenant: no tenant '{}'", v.tenant));
  ASSIGN_OR_RETURN(v.gpu_model, reader.String("gpu_model"));
  ASSIGN_OR_RETURN(int64_t gpus, reader.Int("gpus", std::nullopt, 1, 100'000));
  v.gpus = static_cast<int32_t>(gpus);
  if (!body.contains("price") || !body["price"].is_string()) {
    return reader.Error("price", "per GPU-hour, a decimal string with up to six decimals, e.g. \"1.20\"");
  }
  absl::StatusOr<ledger::Money> price = ledger::ParseMoney(body["price"].get<std::string>());
  if (!price.ok()) return reader.Error("price", std::string(price.status().message()));
  v.price_micros = price->micros;
  ASSIGN_OR_RETURN(int64_t hours, reader.Int("hours", std::nullopt, 1, 24 * (3 * 365 + 1)));
  const TimePoint now = cp.clock().Now();
  v.start = now;
  ASSIGN_OR_RETURN(std::string start, reader.String("start", ""));
  if (!start.empty()) {
    absl::Time t;
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, start, &t, &err)) {
      return reader.Error("start", "an RFC 3339 time, e.g. \"2027-01-01T00:00:00Z\": " + err);
    }
    // Bounded before any arithmetic on it (a time past 2262 does not fit the clock's nanoseconds).
    const absl::Time now_abs = absl::FromUnixNanos(now.time_since_epoch().count());
    if (t < now_abs - absl::Minutes(1)) return reader.Error("start", "must not lie in the past");
    if (t > now_abs + absl::Hours(24 * (3 * 365 + 1))) {
      return reader.Error("start", "must lie within 3 years and a day from now");
    }
    v.start = TimePoint(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(absl::ToUnixNanos(t))));
  }
  v.end = v.start + std::chrono::hours(hours);
  v.created_by = who.user;
  const int64_t free = Reservable(cp, v.gpu_model, v.start, v.end);
  if (free < v.gpus) {
    return absl::FailedPreconditionError(
        fmt::format("gpus: {} GPUs of {} asked; the pool has {} on on-demand nodes that no reservation holds in "
                    "that term",
                    v.gpus, v.gpu_model, std::max<int64_t>(0, free)));
  }
  ASSIGN_OR_RETURN(store::ReservationRecord stored, cp.billing().reservations().Create(std::move(v)));
  return Reply::Json(ReservationJson(cp, stored), 201);
}

}  // namespace

void RegisterReservationRoutes(http::Server& server, ControlPlane& cp, Accounts& accounts) {
  GuardedRoute(server, accounts, "GET", "/v1/reservations",
               [&cp, &accounts](const Principal& who, const Request& r) { return List(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/reservations/{id}",
               [&cp](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
                 ASSIGN_OR_RETURN(store::ReservationRecord v, Visible(cp, who, r.param("id")));
                 return Reply::Json(ReservationJson(cp, v));
               });
  GuardedRoute(server, accounts, "POST", "/v1/reservations",
               [&cp, &accounts](const Principal& who, const Request& r) { return Create(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "POST", "/v1/reservations/{id}/cancel",
               [&cp](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
                 ASSIGN_OR_RETURN(store::ReservationRecord v, Visible(cp, who, r.param("id")));
                 ASSIGN_OR_RETURN(v, cp.billing().reservations().Cancel(v.id));
                 return Reply::Json(ReservationJson(cp, v));
               });
}

}  // namespace gpugeek::controlplane
