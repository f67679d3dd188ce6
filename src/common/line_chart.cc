#include "common/line_chart.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "fmt/format.h"

namespace gpugeek {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string LineChartSvg(const std::string& title, const std::string& x_label, const std::string& y_label,
                         const std::vector<ChartSeries>& series, double x_min, double x_max,
                         const ChartOptions& options) {
  constexpr double kW = 720, kH = 440, kLeft = 70, kRight = 150, kTop = 40, kBottom = 50;
  double y_min = INFINITY, y_max = -INFINITY;
  // On a log axis the chart works in log10(y) throughout, and labels show 10^v.
  auto tr = [&](double y) { return options.log_y ? (y > 0 ? std::log10(y) : NAN) : y; };
  for (const ChartSeries& s : series) {
    for (const auto& [x, raw] : s.points) {
      const double y = tr(raw);
      if (std::isnan(y) || x < x_min || x > x_max) continue;
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  }
  if (!std::isfinite(y_min)) y_min = 0, y_max = 1;
  y_min = std::floor(y_min);
  y_max = std::ceil(y_max);
  if (y_max <= y_min) y_max = y_min + 1;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * pw; };
  auto py = [&](double y) { return kTop + (1 - (y - y_min) / (y_max - y_min)) * ph; };
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
      kW, kH, kLeft + pw / 2, Escape(title));
  for (int i = 0; i <= 5; ++i) {
    const double y = y_min + (y_max - y_min) * i / 5, x = x_min + (x_max - x_min) * i / 5;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, py(y), kLeft + pw, kLeft - 6, py(y) + 4,
        options.log_y ? fmt::format("{:g}", std::pow(10.0, y)) : fmt::format("{:.1f}", y));
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:.0f}</text>\n",
        px(x), kTop, kTop + ph, kTop + ph + 16, x);
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", kLeft,
                     kTop, pw, ph);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2, kH - 12,
                     Escape(x_label));
  svg += fmt::format("<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                     kTop + ph / 2, Escape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    std::string path;
    for (const auto& [x, raw] : series[i].points) {
      const double y = tr(raw);
      if (std::isnan(y) || x < x_min || x > x_max) continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", px(x), py(y));
    }
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path, color);
    const double ly = kTop + 14 + 18 * static_cast<double>(i);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"3\"/>"
        "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
        kLeft + pw + 12, ly, kLeft + pw + 32, color, kLeft + pw + 38, ly + 4, Escape(series[i].name));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace gpugeek
