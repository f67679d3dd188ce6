#include "data/anomalies.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>

#include "common/utf8.h"

namespace gpugeek::data {
namespace {

double Median(std::vector<double>& v) {
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double hi = v[n / 2];
  if (n % 2 == 1) return hi;
  return (hi + *std::max_element(v.begin(), v.begin() + n / 2)) / 2;
}

// The numeric value of a field: a JSON number, or a string that parses whole as a finite number.
bool NumericValue(const nlohmann::json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return std::isfinite(out);
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

// Flags the values whose modified z-score is above the threshold; `values` pairs (record, value).
void FlagOutliers(const std::vector<std::pair<size_t, double>>& values, const std::string& kind,
                  const std::function<std::string(double)>& show, const AnomalyOptions& o, std::vector<Anomaly>& out) {
  std::vector<double> xs;
  xs.reserve(values.size());
  for (const auto& v : values) xs.push_back(v.second);
  const MedianMad m = RobustSpread(std::move(xs));
  if (m.mad <= 0) return;
  for (const auto& [record, x] : values) {
    const double z = 0.6745 * (x - m.median) / m.mad;
    if (std::abs(z) > o.z_threshold) {
      out.push_back({record, kind,
                     fmt::format("{} against a median of {}: robust z {:.1f} (limit {})", show(x), show(m.median), z,
                                 o.z_threshold)});
    }
  }
}

}  // namespace

MedianMad RobustSpread(std::vector<double> values) {
  if (values.empty()) return {};
  const double median = Median(values);
  for (double& v : values) v = std::abs(v - median);
  return {median, Median(values)};
}

std::vector<Anomaly> FindAnomalies(std::span<const Record> records, const AnomalyOptions& o) {
  std::vector<Anomaly> out;
  std::vector<std::pair<size_t, double>> lengths;
  std::map<std::string, std::vector<std::pair<size_t, double>>> numeric;
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    lengths.emplace_back(i, std::log1p(static_cast<double>(r.text.size())));
    if (r.fields.is_object()) {
      for (const auto& [key, value] : r.fields.items()) {
        double x = 0;
        if (NumericValue(value, x)) numeric[key].emplace_back(i, x);
      }
    }
    if (!IsUtf8(r.text)) {
      out.push_back({i, "charset", "the text is not UTF-8"});
    } else {
      size_t controls = 0;
      for (unsigned char c : r.text) controls += (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
      const double fraction = r.text.empty() ? 0 : static_cast<double>(controls) / static_cast<double>(r.text.size());
      if (fraction > o.control_fraction) {
        out.push_back(
            {i, "charset",
             fmt::format("{:.1f}% control characters (limit {:.1f}%)", 100 * fraction, 100 * o.control_fraction)});
      }
    }
    std::unordered_set<std::string_view> seen;
    size_t lines = 0, repeats = 0;
    std::string_view rest = r.text;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      ++lines;
      repeats += seen.insert(line).second ? 0 : 1;
    }
    if (lines >= o.min_lines_for_repeats &&
        static_cast<double>(repeats) > o.repeated_line_fraction * static_cast<double>(lines)) {
      out.push_back({i, "repeated_lines",
                     fmt::format("{} of {} lines repeat an earlier one (limit {:.0f}%)", repeats, lines,
                                 100 * o.repeated_line_fraction)});
    }
  }
  FlagOutliers(
      lengths, "length", [](double x) { return fmt::format("{:.0f} bytes", std::expm1(x)); }, o, out);
  for (const auto& [field, values] : numeric) {
    FlagOutliers(
        values, "numeric:" + field, [](double x) { return fmt::format("{:g}", x); }, o, out);
  }
  std::stable_sort(out.begin(), out.end(), [](const Anomaly& a, const Anomaly& b) {
    return std::tie(a.record, a.kind) < std::tie(b.record, b.kind);
  });
  return out;
}

}  // namespace gpugeek::data
