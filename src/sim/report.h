#pragma once
// Reports of an FGD experiment: CSV (one per run, plus the authors' wide "discrete" layout), a
// summary table and CSV, and SVG line charts (unallocated GPU % against arrived %, the paper's
// Fig. 9a; fragmentation amount and rate, Fig. 7).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/line_chart.h"
#include "sim/experiment.h"
#include "sim/published.h"

namespace gpugeek::sim {

// One run: rows arrived_pct,alloc_pct,unalloc_pct,frag_pct,frag_ratio_pct for 0..130 (empty cells
// where no event fell).
std::string RunCsv(const FgdRunResult& run);
// The authors' layout: workload,sc_policy,tune,seed,total_gpus,0,...,130 with the chosen curve.
enum class CurveKind { kAlloc, kFrag, kFragRatio };
std::string WideCsv(const std::vector<FgdRunResult>& runs, CurveKind kind, double tune, int total_gpus);
std::string SummaryCsv(const std::vector<FgdSummaryRow>& rows);
// Terminal table; with `published` (may be null) adds the authors' numbers and our difference.
std::string SummaryTable(const std::vector<FgdSummaryRow>& rows, const PublishedSummary* published);

using Series = ChartSeries;  // common/line_chart.h
using gpugeek::LineChartSvg;
// Median over seeds of a curve, per policy, for one workload; y = transform(value).
std::vector<Series> MedianSeries(const std::vector<FgdRunResult>& runs, const std::string& workload, CurveKind kind,
                                 bool unallocated, int x_min, int x_max);

// Writes into `dir` (created): runs/<workload>/<policy>/seed<seed>.csv, alloc/frag/frag_ratio wide
// CSVs, summary.csv, and per workload <workload>_unallocated.svg, <workload>_frag.svg,
// <workload>_frag_rate.svg. Errors: Internal when a file cannot be written.
absl::Status WriteReport(const std::string& dir, const std::vector<FgdRunResult>& runs,
                         const std::vector<FgdSummaryRow>& summary, double tune);

}  // namespace gpugeek::sim
