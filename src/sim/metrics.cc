#include "sim/metrics.h"

#include <cmath>
#include <limits>

namespace gpugeek::sim {
namespace {

double Round2(double x) { return std::nearbyint(x * 100) / 100; }

}  // namespace

FgdRecorder::FgdRecorder(const sched::Cluster& cluster, std::vector<sched::TypicalPod> typical)
    : tracker_(cluster, std::move(typical)), total_milli_(cluster.total_gpu_milli()) {}

void FgdRecorder::Record(const sched::Cluster& cluster, int64_t pod_gpu_milli, const sched::Decision& decision) {
  arrived_milli_ += pod_gpu_milli;
  failed_ += !decision.scheduled;
  for (const sched::Placement& p : decision.placements) tracker_.Refresh(cluster, p.node);
  samples_.push_back({arrived_milli_, cluster.allocated_gpu_milli(), tracker_.total()});
}

FgdCurves FgdRecorder::Finish() const {
  // As the analysis scripts: ratio = milli / total_gpus / 10, total_gpus = total milli / 1000.
  const double total_gpus = static_cast<double>(total_milli_) / 1000;
  struct Acc {
    double alloc = 0, frag = 0, ratio = 0;
    int n = 0;
  };
  std::array<Acc, kMaxArrivedPct + 2> bucket{};
  for (const Sample& s : samples_) {
    const double arrived = std::nearbyint(static_cast<double>(s.arrived_milli) / total_gpus / 10);
    if (arrived < 0 || arrived > kMaxArrivedPct + 1) continue;
    Acc& a = bucket[static_cast<size_t>(arrived)];
    a.alloc += Round2(static_cast<double>(s.allocated_milli) / total_gpus / 10);
    a.frag += Round2(s.frag_milli / total_gpus / 10);
    const auto idle = static_cast<double>(total_milli_ - s.allocated_milli);
    a.ratio += Round2(idle > 0 ? s.frag_milli / idle * 100 : 0);
    ++a.n;
  }
  FgdCurves out;
  out.pods_offered = static_cast<int64_t>(samples_.size());
  out.pods_failed = failed_;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int x = 0; x <= kMaxArrivedPct; ++x) {
    Acc a = bucket[x];
    if (a.n == 0) {
      for (int y = std::max(0, x - 1); y <= x + 1; ++y) {
        a.alloc += bucket[y].alloc;
        a.frag += bucket[y].frag;
        a.ratio += bucket[y].ratio;
        a.n += bucket[y].n;
      }
    }
    out.alloc_pct[x] = a.n ? Round2(a.alloc / a.n) : nan;
    out.frag_pct[x] = a.n ? Round2(a.frag / a.n) : nan;
    out.frag_ratio_pct[x] = a.n ? Round2(a.ratio / a.n) : nan;
  }
  return out;
}

}  // namespace gpugeek::sim
