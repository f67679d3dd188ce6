#include "controlplane/offers.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "controlplane/reservations.h"
#include "sched/filters.h"
#include "sched/request.h"

namespace gpugeek::controlplane {
namespace {

// Whether the node (its labels in the scheduler's pool: the operator's, and a reservation's hold) is
// reserved to tenants other than the caller's.
bool ReservedToOthers(const std::map<std::string, std::string>& labels, const OfferFilter& filter) {
  return !filter.admin && !sched::ReservedTo(labels, filter.tenant);
}

}  // namespace

std::vector<Offer> Offers(const Snapshot& snap, const OfferFilter& filter) {
  using Key = std::tuple<std::string, std::string, std::string, std::string, int64_t, int64_t>;
  std::map<Key, Offer> rows;
  if (!snap.cluster) return {};
  const sched::Cluster& cluster = *snap.cluster;
  const std::string gpu = absl::AsciiStrToLower(filter.gpu);
  for (sched::NodeIndex n = 0; n < static_cast<sched::NodeIndex>(cluster.size()); ++n) {
    const sched::NodeSpec& spec = cluster.spec(n);
    if (spec.gpu_count == 0) continue;
    auto node = snap.nodes.find(spec.name);
    if (node == snap.nodes.end() || node->second.state != "ready") continue;
    const api::Registration& r = *node->second.registration;
    if (ReservedToOthers(spec.labels, filter)) continue;
    // Held by a reservation (reservations.h): shown to its tenant as capacity already paid for.
    const bool reserved = spec.labels.contains(kReservationLabel);
    const std::string capacity = reserved ? "reserved" : r.capacity_type;
    if (!filter.gpu.empty() && !absl::StrContains(absl::AsciiStrToLower(spec.gpu_model), gpu)) continue;
    if (filter.capacity_type && capacity != *filter.capacity_type) continue;
    if (!filter.region.empty() && r.region != filter.region) continue;
    auto provider = r.labels.find(std::string(api::kProviderLabel));
    const Key key{spec.gpu_model,
                  capacity,
                  r.region,
                  provider == r.labels.end() ? "" : provider->second,
                  reserved && !filter.admin ? 0 : r.price_micros_per_gpu_hour,
                  reserved ? 0 : r.min_rental_s};
    Offer& o = rows[key];
    std::tie(o.gpu_model, o.capacity_type, o.region, o.provider, o.price_micros_per_gpu_hour, o.min_rental_s) = key;
    o.nodes += 1;
    o.gpus += spec.gpu_count;
    const int free = cluster.full_free_gpus(n);
    o.gpus_free += free;
    o.max_gpus_free_on_node = std::max(o.max_gpus_free_on_node, free);
  }
  std::vector<Offer> out;
  for (auto& [key, o] : rows) {
    if (o.max_gpus_free_on_node >= filter.min_gpus_free) out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(), [](const Offer& a, const Offer& b) {
    const bool ap = a.price_micros_per_gpu_hour > 0, bp = b.price_micros_per_gpu_hour > 0;
    if (ap != bp) return ap;  // priced first
    return a.price_micros_per_gpu_hour < b.price_micros_per_gpu_hour;
  });
  return out;
}

}  // namespace gpugeek::controlplane
