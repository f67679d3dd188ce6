#include "api/csv_lines.h"

namespace gpugeek::api {
namespace {

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

absl::Status ForEachCsvRecord(std::string_view text, std::string_view header,
                              const std::function<absl::Status(int, const std::vector<std::string>&)>& record) {
  int line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    line = Trim(line);
    if (line.empty() || line.front() == '#' || line.starts_with(header)) continue;
    std::vector<std::string> fields;
    for (std::string_view f : Split(line, ',')) fields.emplace_back(Trim(f));
    if (absl::Status st = record(line_no, fields); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::api
