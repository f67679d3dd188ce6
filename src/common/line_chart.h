#pragma once
// A self-contained SVG line chart (no script, no external fonts): the charts of the simulator's reports, the
// dedup S-curve and the hyper-parameter search's best-so-far curves.
//
//   std::string svg = LineChartSvg("Best so far", "trials", "regret",
//                                  {{"tpe", {{1, 10.2}, {2, 4.1}}}}, 1, 100, {.log_y = true});

#include <string>
#include <utility>
#include <vector>

namespace gpugeek {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); NaN y skipped, and y <= 0 on a log axis
};

struct ChartOptions {
  bool log_y = false;  // a base-10 log axis: regrets that span decades
};

// Series in the order given (colours cycle through ten); x from x_min to x_max; y from the data, widened
// to whole units (whole decades on a log axis).
std::string LineChartSvg(const std::string& title, const std::string& x_label, const std::string& y_label,
                         const std::vector<ChartSeries>& series, double x_min, double x_max,
                         const ChartOptions& options = {});

}  // namespace gpugeek
