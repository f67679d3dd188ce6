#include "controlplane/quote.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/numeric/int128.h"
#include "controlplane/node_model.h"

namespace gpugeek::controlplane {
namespace {

bool RegionAllowed(const sched::Request& r, const Offer& o) {
  auto it = r.node_selector.find(std::string(kRegionLabel));
  if (it == r.node_selector.end()) return true;
  return std::find(it->second.begin(), it->second.end(), o.region) != it->second.end();
}

}  // namespace

std::vector<QuoteLine> QuoteFor(const std::vector<sched::Request>& requests, const workload::ResourceRequest* plan,
                                std::optional<Duration> max_duration, const Snapshot& snap, const std::string& tenant) {
  const std::vector<Offer> offers = Offers(snap, {.tenant = tenant});
  std::vector<QuoteLine> out;
  std::set<std::tuple<std::string, std::string, std::string, std::string, int64_t>> seen;
  for (const sched::Request& r : requests) {
    std::vector<QuoteLine> lines;
    for (const sched::ResourceShape& a : r.alternatives) {
      if (a.num_gpus == 0) continue;
      for (const Offer& o : offers) {
        if (!a.allowed_models.empty() &&
            std::find(a.allowed_models.begin(), a.allowed_models.end(), o.gpu_model) == a.allowed_models.end()) {
          continue;
        }
        if (r.capacity_type && o.capacity_type != sched::CapacityTypeName(*r.capacity_type)) continue;
        if (!RegionAllowed(r, o)) continue;
        if (r.max_price_micros > 0 && o.price_micros_per_gpu_hour > r.max_price_micros) continue;
        if (!seen.insert({o.gpu_model, o.capacity_type, o.region, o.provider, o.price_micros_per_gpu_hour}).second) {
          continue;
        }
        QuoteLine l{.offer = o, .members = r.gang_size, .gpus_per_member = a.num_gpus, .gpu_milli = a.gpu_milli};
        const int need_per_node = a.gpu_milli < 1000 ? 1 : a.num_gpus;
        l.fits_now = o.max_gpus_free_on_node >= need_per_node && o.nodes >= r.gang_size &&
                     o.gpus_free >= need_per_node * r.gang_size;
        const int64_t milli = int64_t{r.gang_size} * a.num_gpus * a.gpu_milli;
        l.price_per_hour_micros = milli * o.price_micros_per_gpu_hour / 1000;
        if (plan != nullptr) {
          for (const workload::ResourceRequest::Alternative& p : plan->alternatives) {
            if (p.gpu_model == o.gpu_model && p.est_seconds > 0) {
              l.est_seconds = p.est_seconds;
              l.estimate = "planner";
              break;
            }
          }
        }
        if (!l.est_seconds && max_duration) {
          l.est_seconds = std::chrono::duration_cast<std::chrono::seconds>(*max_duration).count();
          l.estimate = "max_duration";
        }
        if (l.est_seconds) {
          // milli x seconds x price / (1000 x 3600), rounded down like a charge.
          l.est_cost_micros = static_cast<int64_t>(absl::int128(milli) * *l.est_seconds * o.price_micros_per_gpu_hour /
                                                   (absl::int128(1000) * 3600));
        }
        lines.push_back(std::move(l));
      }
    }
    std::stable_sort(lines.begin(), lines.end(), [](const QuoteLine& x, const QuoteLine& y) {
      return x.price_per_hour_micros < y.price_per_hour_micros;
    });
    for (QuoteLine& l : lines) out.push_back(std::move(l));
  }
  return out;
}

}  // namespace gpugeek::controlplane
