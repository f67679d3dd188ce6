#pragma once
// FGD metrics by arrived % (shared/anchors/fgd.md §2.3; authors' `merge_*_discrete.py`).
//
// After every pod: arrived = cumulative requested GPU milli of all pods offered so far (placed or
// not); allocated = GPU milli held by placed pods; frag = sum of F_n (sched/frag.h) over nodes;
// idle = total - allocated. Each event falls in the integer bucket round(arrived / total %) (round
// half to even, as Python's round); a curve's value at x is the mean over its bucket's events of
// the metric rounded to 2 decimals, or, for an empty bucket, of the events in [x-1, x+1]; NaN when
// both are empty.

#include <array>
#include <cstdint>
#include <vector>

#include "sched/cluster.h"
#include "sched/frag.h"
#include "sched/framework.h"

namespace gpugeek::sim {

inline constexpr int kMaxArrivedPct = 130;
using Curve = std::array<double, kMaxArrivedPct + 1>;  // index: arrived %, 0..130

struct FgdCurves {
  Curve alloc_pct;       // GPU allocation ratio, % of total GPU milli
  Curve frag_pct;        // fragmented GPU milli, % of total ("Frag / Total")
  Curve frag_ratio_pct;  // fragmented GPU milli, % of idle GPU milli ("Frag Rate")
  int64_t pods_offered = 0;
  int64_t pods_failed = 0;
};

class FgdRecorder {
 public:
  FgdRecorder(const sched::Cluster& cluster, std::vector<sched::TypicalPod> typical);
  // After one pod of `pod_gpu_milli` total GPU milli was offered, with its decision.
  void Record(const sched::Cluster& cluster, int64_t pod_gpu_milli, const sched::Decision& decision);
  FgdCurves Finish() const;

 private:
  struct Sample {
    int64_t arrived_milli, allocated_milli;
    double frag_milli;
  };
  sched::FragTracker tracker_;
  int64_t total_milli_;
  int64_t arrived_milli_ = 0;
  int64_t failed_ = 0;
  std::vector<Sample> samples_;
};

}  // namespace gpugeek::sim
