#include "controlplane/api_views.h"

#include "absl/time/time.h"
#include "hw/inventory_json.h"

namespace gpugeek::controlplane {

std::string FormatTime(TimePoint t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(t.time_since_epoch().count()),
                          absl::UTCTimeZone());
}

nlohmann::json QuoteToJson(const JobQuote& quote) {
  nlohmann::json lines = nlohmann::json::array();
  for (const QuoteLine& l : quote.lines) {
    nlohmann::json j = {{"gpu_model", l.offer.gpu_model},
                        {"capacity_type", l.offer.capacity_type},
                        {"region", l.offer.region},
                        {"provider", l.offer.provider},
                        {"price_micros_per_gpu_hour", l.offer.price_micros_per_gpu_hour},
                        {"members", l.members},
                        {"gpus_per_member", l.gpus_per_member},
                        {"gpu_milli", l.gpu_milli},
                        {"fits_now", l.fits_now},
                        {"price_per_hour_micros", l.price_per_hour_micros},
                        {"estimate", l.estimate}};
    if (l.est_seconds) j["est_seconds"] = *l.est_seconds;
    if (l.est_cost_micros) j["est_cost_micros"] = *l.est_cost_micros;
    lines.push_back(std::move(j));
  }
  return {{"dry_run", true},
          {"spec_yaml", quote.spec_yaml},
          {"plan", quote.plan_json.empty() ? nlohmann::json() : nlohmann::json::parse(quote.plan_json, nullptr, false)},
          {"lines", lines},
          {"available_micros", quote.available_micros},
          {"enforced", quote.enforced}};
}

nlohmann::json JobToJson(const JobView& job) {
  const store::JobRecord& r = job.record;
  nlohmann::json j = {{"id", r.id},
                      {"name", r.name},
                      {"tenant", r.tenant},
                      {"state", api::JobStateName(r.state)},
                      {"priority", r.priority},
                      {"reason", r.reason},
                      {"epoch", r.epoch},
                      {"restarts", r.restarts},
                      {"retries", r.retries},
                      {"created_at", FormatTime(r.created_at)},
                      {"updated_at", FormatTime(r.updated_at)},
                      {"spec_yaml", r.spec_yaml}};
  j["exit_code"] = r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json();
  j["plan"] = r.plan_json.empty() ? nlohmann::json() : nlohmann::json::parse(r.plan_json, nullptr, false);
  j["allocation"] = job.allocation ? ToJson(*job.allocation) : nlohmann::json();
  if (!job.pending_reason.empty()) j["pending_reason"] = job.pending_reason;
  j["usage"] = UsageToJson(job.usage);
  j["checkpoint"] = r.checkpoint_step ? nlohmann::json{{"step", *r.checkpoint_step},
                                                       {"reported_at", FormatTime(r.checkpoint_at)},
                                                       {"region", r.checkpoint_region}}
                                      : nlohmann::json();
  return j;
}

nlohmann::json EventToJson(const store::EventRecord& e) {
  return {{"seq", e.seq},
          {"job_id", e.job_id},
          {"time", FormatTime(e.time)},
          {"from", api::JobStateName(e.from)},
          {"to", api::JobStateName(e.to)},
          {"reason", e.reason}};
}

nlohmann::json NodeToJson(const NodeView& node) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : node.samples) samples.push_back(hw::SampleToJson(s));
  return {{"name", node.registration.node},
          {"address", node.registration.address},
          {"state", node.state},
          {"capacity_type", node.registration.capacity_type},
          {"price_micros_per_gpu_hour", node.registration.price_micros_per_gpu_hour},
          {"region", node.registration.region},
          {"labels", node.registration.labels},
          {"images", node.registration.images},
          {"unfit_images", node.registration.unfit_images},
          {"engines", node.registration.engines},
          {"unhealthy_gpus", node.unhealthy_gpus},
          {"last_heartbeat", FormatTime(node.last_heartbeat)},
          {"gpu_milli_allocated", node.gpu_milli_allocated},
          {"jobs", node.jobs},
          {"inventory", hw::InventoryToJson(node.registration.inventory)},
          {"samples", samples}};
}

nlohmann::json PoolToJson(const PoolView& pool) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : pool.rows) {
    rows.push_back({{"gpu_model", r.gpu_model},
                    {"capacity_type", r.capacity_type},
                    {"nodes", r.nodes},
                    {"gpus", r.gpus},
                    {"gpu_milli_total", r.gpu_milli_total},
                    {"gpu_milli_allocated", r.gpu_milli_allocated},
                    {"gpus_fully_free", r.gpus_fully_free},
                    {"gpus_allocated", r.gpus_allocated},
                    {"frag_gpu_milli", r.frag_gpu_milli},
                    {"unallocatable_gpus", r.unallocatable_gpus}});
  }
  return {{"rows", rows},
          {"gpu_milli_total", pool.gpu_milli_total},
          {"gpu_milli_allocated", pool.gpu_milli_allocated},
          {"frag_gpu_milli", pool.frag_gpu_milli},
          {"frag_rate", pool.frag_rate},
          {"policy", pool.policy},
          {"pending_jobs", pool.pending_jobs}};
}

}  // namespace gpugeek::controlplane
