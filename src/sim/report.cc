#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/table.h"

namespace gpugeek::sim {
namespace {

const Curve& CurveOf(const FgdRunResult& r, CurveKind kind) {
  switch (kind) {
    case CurveKind::kAlloc:
      return r.curves.alloc_pct;
    case CurveKind::kFrag:
      return r.curves.frag_pct;
    case CurveKind::kFragRatio:
      return r.curves.frag_ratio_pct;
  }
  return r.curves.alloc_pct;
}

std::string Cell(double v) { return std::isnan(v) ? "" : fmt::format("{:.2f}", v); }

absl::Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return absl::InternalError(fmt::format("cannot write '{}'", path.string()));
  return absl::OkStatus();
}

}  // namespace

std::string RunCsv(const FgdRunResult& run) {
  std::string out = "arrived_pct,alloc_pct,unalloc_pct,frag_pct,frag_ratio_pct\n";
  for (int x = 0; x <= kMaxArrivedPct; ++x) {
    const double a = run.curves.alloc_pct[x];
    out += fmt::format("{},{},{},{},{}\n", x, Cell(a), Cell(std::isnan(a) ? a : 100 - a), Cell(run.curves.frag_pct[x]),
                       Cell(run.curves.frag_ratio_pct[x]));
  }
  return out;
}

std::string WideCsv(const std::vector<FgdRunResult>& runs, CurveKind kind, double tune, int total_gpus) {
  std::string out = "workload,sc_policy,tune,seed,total_gpus";
  for (int x = 0; x <= kMaxArrivedPct; ++x) out += fmt::format(",{}", x);
  out += '\n';
  for (const FgdRunResult& r : runs) {
    out += fmt::format("{},{},{},{},{}", r.workload, r.policy, tune, r.seed, total_gpus);
    for (double v : CurveOf(r, kind)) out += "," + Cell(v);
    out += '\n';
  }
  return out;
}

std::string SummaryCsv(const std::vector<FgdSummaryRow>& rows) {
  std::string out =
      "workload,sc_policy,n_seeds,unalloc_pct_at_arrival100_mean,unalloc_pct_at_arrival100_sd,"
      "unalloc_pct_at_arrival100_median,unalloc_pct_at_arrival130_mean,unalloc_pct_at_arrival130_sd,"
      "unalloc_pct_at_arrival130_median,frag_pct_of_total_at_arrival100_median,"
      "frag_ratio_pct_of_idle_at_arrival100_median\n";
  for (const FgdSummaryRow& r : rows) {
    out += fmt::format("{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f}\n", r.workload, r.policy,
                       r.n_seeds, r.unalloc100_mean, r.unalloc100_sd, r.unalloc100_median, r.unalloc130_mean,
                       r.unalloc130_sd, r.unalloc130_median, r.frag100_median, r.frag_ratio100_median);
  }
  return out;
}

std::string SummaryTable(const std::vector<FgdSummaryRow>& rows, const PublishedSummary* published) {
  std::vector<std::string> header = {"workload", "policy", "seeds", "unalloc% @100", "unalloc% @130", "frag% @100"};
  if (published) {
    header.insert(header.end(), {"paper @100", "diff @100", "paper @130", "diff @130"});
  }
  TextTable t(header);
  for (size_t c = 2; c < header.size(); ++c) t.AlignRight(c);
  for (const FgdSummaryRow& r : rows) {
    std::vector<std::string> row = {r.workload,
                                    r.policy,
                                    std::to_string(r.n_seeds),
                                    fmt::format("{:.2f} +/- {:.2f}", r.unalloc100_mean, r.unalloc100_sd),
                                    fmt::format("{:.2f} +/- {:.2f}", r.unalloc130_mean, r.unalloc130_sd),
                                    fmt::format("{:.2f}", r.frag100_median)};
    if (published) {
      auto it = published->find({r.workload, r.policy});
      if (it == published->end()) {
        row.insert(row.end(), {"-", "-", "-", "-"});
      } else {
        const PublishedRow& p = it->second;
        row.push_back(fmt::format("{:.2f} +/- {:.2f}", p.unalloc100_mean, p.unalloc100_sd));
        row.push_back(fmt::format("{:+.2f}", r.unalloc100_mean - p.unalloc100_mean));
        row.push_back(fmt::format("{:.2f} +/- {:.2f}", p.unalloc130_mean, p.unalloc130_sd));
        row.push_back(fmt::format("{:+.2f}", r.unalloc130_mean - p.unalloc130_mean));
      }
    }
    t.AddRow(std::move(row));
  }
  return t.Render();
}

std::vector<Series> MedianSeries(const std::vector<FgdRunResult>& runs, const std::string& workload, CurveKind kind,
                                 bool unallocated, int x_min, int x_max) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const FgdRunResult*>> by_policy;
  for (const FgdRunResult& r : runs) {
    if (r.workload != workload) continue;
    if (!by_policy.contains(r.policy)) order.push_back(r.policy);
    by_policy[r.policy].push_back(&r);
  }
  std::vector<Series> out;
  for (const std::string& p : order) {
    Series s{p, {}};
    for (int x = x_min; x <= x_max; ++x) {
      std::vector<double> v;
      for (const FgdRunResult* r : by_policy[p]) {
        const double y = CurveOf(*r, kind)[x];
        v.push_back(unallocated ? 100 - y : y);
      }
      s.points.emplace_back(x, Median(v));
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status WriteReport(const std::string& dir, const std::vector<FgdRunResult>& runs,
                         const std::vector<FgdSummaryRow>& summary, double tune) {
  const std::filesystem::path root(dir);
  for (const FgdRunResult& r : runs) {
    if (absl::Status s =
            WriteFile(root / "runs" / r.workload / r.policy / fmt::format("seed{}.csv", r.seed), RunCsv(r));
        !s.ok()) {
      return s;
    }
  }
  constexpr int kTotalGpus = 6212;  // the trace's GPU node list; only a label column in the wide CSVs
  for (auto [kind, name] : {std::pair{CurveKind::kAlloc, "analysis_allo_discrete.csv"},
                            std::pair{CurveKind::kFrag, "analysis_frag_discrete.csv"},
                            std::pair{CurveKind::kFragRatio, "analysis_frag_ratio_discrete.csv"}}) {
    if (absl::Status s = WriteFile(root / name, WideCsv(runs, kind, tune, kTotalGpus)); !s.ok()) return s;
  }
  if (absl::Status s = WriteFile(root / "summary.csv", SummaryCsv(summary)); !s.ok()) return s;
  std::set<std::string> workloads;
  for (const FgdRunResult& r : runs) workloads.insert(r.workload);
  for (const std::string& w : workloads) {
    const std::string un =
        LineChartSvg(fmt::format("Unallocated GPU % ({}; median over seeds)", w), "arrived GPU %", "unallocated GPU %",
                     MedianSeries(runs, w, CurveKind::kAlloc, true, 75, 130), 75, 130);
    const std::string fr =
        LineChartSvg(fmt::format("Fragmented GPU, % of total ({})", w), "arrived GPU %", "frag / total %",
                     MedianSeries(runs, w, CurveKind::kFrag, false, 0, 130), 0, 130);
    const std::string rt =
        LineChartSvg(fmt::format("Fragmentation rate, % of idle GPU ({})", w), "arrived GPU %", "frag rate %",
                     MedianSeries(runs, w, CurveKind::kFragRatio, false, 0, 130), 0, 130);
    for (auto [name, text] :
         {std::pair{"_unallocated.svg", &un}, std::pair{"_frag.svg", &fr}, std::pair{"_frag_rate.svg", &rt}}) {
      if (absl::Status s = WriteFile(root / (w + name), *text); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::sim
