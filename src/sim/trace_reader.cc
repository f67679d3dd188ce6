#include "sim/trace_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "common/status_macros.h"

namespace gpugeek::sim {
namespace {

// One CSV file split into lines and comma-separated fields (the trace uses no quoting).
class CsvCursor {
 public:
  CsvCursor(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  // Advances to the next non-empty line; false at the end.
  bool Next() {
    while (pos_ < text_.size() || (pos_ == text_.size() && !started_)) {
      started_ = true;
      size_t end = text_.find('\n', pos_);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) continue;
      fields_.clear();
      size_t start = 0;
      while (true) {
        const size_t comma = line.find(',', start);
        fields_.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      return true;
    }
    return false;
  }
  const std::vector<std::string_view>& fields() const { return fields_; }
  absl::Status Error(size_t column, std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: {}", file_, line_no_, column + 1, what));
  }

 private:
  std::string_view text_;
  std::string_view file_;
  size_t pos_ = 0;
  bool started_ = false;
  size_t line_no_ = 0;
  std::vector<std::string_view> fields_;
};

// Column index of each wanted header name.
absl::StatusOr<std::vector<size_t>> FindColumns(CsvCursor& csv, const std::vector<std::string_view>& wanted,
                                                size_t required) {
  if (!csv.Next()) return csv.Error(0, "empty file: no header line");
  std::vector<size_t> index(wanted.size(), SIZE_MAX);
  for (size_t c = 0; c < csv.fields().size(); ++c) {
    for (size_t w = 0; w < wanted.size(); ++w) {
      if (csv.fields()[c] == wanted[w]) index[w] = c;
    }
  }
  for (size_t w = 0; w < required; ++w) {
    if (index[w] == SIZE_MAX) return csv.Error(0, fmt::format("header has no column '{}'", wanted[w]));
  }
  return index;
}

absl::StatusOr<std::string_view> Field(const CsvCursor& csv, size_t column) {
  if (column >= csv.fields().size()) {
    return csv.Error(csv.fields().size(),
                     fmt::format("row has {} fields, column {} is missing", csv.fields().size(), column + 1));
  }
  return csv.fields()[column];
}

template <typename T>
absl::StatusOr<T> IntField(const CsvCursor& csv, size_t column, std::string_view name, T lo, T hi) {
  ASSIGN_OR_RETURN(std::string_view s, Field(csv, column));
  T v{};
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return csv.Error(column, fmt::format("{} '{}' is not an integer in range", name, s));
  }
  if (v < lo || v > hi) return csv.Error(column, fmt::format("{} {} outside {}..{}", name, v, lo, hi));
  return v;
}

constexpr int32_t kMaxGpus = 16;
constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr uint64_t kMaxMemoryMib = uint64_t{1} << 40;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot open '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Days from 1970-01-01 to the civil date y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS" as seconds since 1970-01-01 00:00:00.
absl::StatusOr<int64_t> TimestampField(const CsvCursor& csv, size_t column) {
  ASSIGN_OR_RETURN(std::string_view s, Field(csv, column));
  auto bad = [&] { return csv.Error(column, fmt::format("timestamp '{}' is not YYYY-MM-DD HH:MM:SS", s)); };
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') return bad();
  int64_t part[6];
  const size_t at[6] = {0, 5, 8, 11, 14, 17}, len[6] = {4, 2, 2, 2, 2, 2};
  for (int i = 0; i < 6; ++i) {
    const auto [ptr, ec] = std::from_chars(s.data() + at[i], s.data() + at[i] + len[i], part[i]);
    if (ec != std::errc() || ptr != s.data() + at[i] + len[i] || part[i] < 0) return bad();
  }
  if (part[1] < 1 || part[1] > 12 || part[2] < 1 || part[2] > 31 || part[3] > 23 || part[4] > 59 || part[5] > 60) {
    return bad();
  }
  return DaysFromCivil(part[0], part[1], part[2]) * 86400 + part[3] * 3600 + part[4] * 60 + part[5];
}

}  // namespace

absl::StatusOr<std::vector<TraceNode>> ParseNodeCsv(std::string_view text, std::string_view file_name) {
  CsvCursor csv(text, file_name);
  ASSIGN_OR_RETURN(const std::vector<size_t> col,
                   FindColumns(csv, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, 5));
  std::vector<TraceNode> out;
  while (csv.Next()) {
    TraceNode n;
    ASSIGN_OR_RETURN(std::string_view name, Field(csv, col[0]));
    if (name.empty()) return csv.Error(col[0], "empty node name");
    n.name = std::string(name);
    ASSIGN_OR_RETURN(n.cpu_milli, IntField<int64_t>(csv, col[1], "cpu_milli", 0, kMaxCpuMilli));
    ASSIGN_OR_RETURN(n.memory_mib, IntField<uint64_t>(csv, col[2], "memory_mib", 0, kMaxMemoryMib));
    ASSIGN_OR_RETURN(n.gpus, IntField<int32_t>(csv, col[3], "gpu", 0, kMaxGpus));
    ASSIGN_OR_RETURN(std::string_view model, Field(csv, col[4]));
    n.model = std::string(model);
    if ((n.gpus > 0) != !n.model.empty()) return csv.Error(col[4], "a node with GPUs needs a model, and only it");
    out.push_back(std::move(n));
  }
  return out;
}

absl::StatusOr<std::vector<TracePod>> ParsePodCsv(std::string_view text, std::string_view file_name) {
  CsvCursor csv(text, file_name);
  ASSIGN_OR_RETURN(const std::vector<size_t> col,
                   FindColumns(csv, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"}, 5));
  std::vector<TracePod> out;
  while (csv.Next()) {
    TracePod p;
    ASSIGN_OR_RETURN(std::string_view name, Field(csv, col[0]));
    if (name.empty()) return csv.Error(col[0], "empty pod name");
    p.name = std::string(name);
    ASSIGN_OR_RETURN(p.cpu_milli, IntField<int64_t>(csv, col[1], "cpu_milli", 0, kMaxCpuMilli));
    ASSIGN_OR_RETURN(p.memory_mib, IntField<uint64_t>(csv, col[2], "memory_mib", 0, kMaxMemoryMib));
    ASSIGN_OR_RETURN(p.num_gpu, IntField<int32_t>(csv, col[3], "num_gpu", 0, kMaxGpus));
    ASSIGN_OR_RETURN(p.gpu_milli, IntField<int32_t>(csv, col[4], "gpu_milli", 0, 1000));
    if ((p.num_gpu == 0) != (p.gpu_milli == 0))
      return csv.Error(col[4], "gpu_milli must be 0 exactly when num_gpu is 0");
    if (p.num_gpu > 1 && p.gpu_milli < 1000) return csv.Error(col[4], "a GPU share (< 1000) of more than one GPU");
    if (col[5] != SIZE_MAX) {
      ASSIGN_OR_RETURN(std::string_view spec, Field(csv, col[5]));
      p.gpu_spec = std::string(spec);
    }
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::vector<PhillyJob>> ParsePhillyCsv(std::string_view text, std::string_view file_name) {
  CsvCursor csv(text, file_name);
  ASSIGN_OR_RETURN(const std::vector<size_t> col, FindColumns(csv, {"timestamp", "duration", "num_gpus"}, 3));
  std::vector<PhillyJob> out;
  while (csv.Next()) {
    PhillyJob j;
    ASSIGN_OR_RETURN(j.submit_s, TimestampField(csv, col[0]));
    ASSIGN_OR_RETURN(std::string_view d, Field(csv, col[1]));
    double seconds = 0;
    const auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), seconds);
    // Up to 10 years; a run of 0 s still holds its GPUs for a moment: 1 s.
    if (d.empty() || ec != std::errc() || ptr != d.data() + d.size() || !(seconds >= 0 && seconds <= 3.2e8)) {
      return csv.Error(col[1], fmt::format("duration '{}' is not a number of seconds in 0..3.2e8", d));
    }
    j.duration_s = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(seconds)));
    ASSIGN_OR_RETURN(j.num_gpus, IntField<int32_t>(csv, col[2], "num_gpus", 1, 1024));
    out.push_back(j);
  }
  return out;
}

absl::StatusOr<std::vector<SpotTraceNode>> ParseSpotNodeCsv(std::string_view text, std::string_view file_name) {
  CsvCursor csv(text, file_name);
  ASSIGN_OR_RETURN(const std::vector<size_t> col,
                   FindColumns(csv, {"node_name", "gpu_model", "gpu_capacity_num", "cpu_num"}, 4));
  std::vector<SpotTraceNode> out;
  while (csv.Next()) {
    SpotTraceNode n;
    ASSIGN_OR_RETURN(std::string_view name, Field(csv, col[0]));
    if (name.empty()) return csv.Error(col[0], "empty node_name");
    n.name = std::string(name);
    ASSIGN_OR_RETURN(std::string_view model, Field(csv, col[1]));
    if (model.empty()) return csv.Error(col[1], "empty gpu_model");
    n.model = std::string(model);
    ASSIGN_OR_RETURN(n.gpus, IntField<int32_t>(csv, col[2], "gpu_capacity_num", 1, kMaxGpus));
    ASSIGN_OR_RETURN(const int64_t vcpus, IntField<int64_t>(csv, col[3], "cpu_num", 1, 1 << 20));
    n.cpu_milli = vcpus * 1000;
    out.push_back(std::move(n));
  }
  return out;
}

absl::StatusOr<std::vector<TraceNode>> ReadNodeCsv(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseNodeCsv(text, path);
}

absl::StatusOr<std::vector<TracePod>> ReadPodCsv(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParsePodCsv(text, path);
}

absl::StatusOr<std::vector<PhillyJob>> ReadPhillyCsv(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParsePhillyCsv(text, path);
}

absl::StatusOr<std::vector<SpotTraceNode>> ReadSpotNodeCsv(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseSpotNodeCsv(text, path);
}

}  // namespace gpugeek::sim
