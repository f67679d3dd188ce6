#include "data/records.h"

#include <fmt/format.h>

#include "common/json_parse.h"

namespace gpugeek::data {
namespace {

using nlohmann::json;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void ParseJsonLines(std::string_view bytes, const std::string& source, const RecordOptions& o, ParsedRecords& out) {
  uint64_t line = 0;
  while (!bytes.empty()) {
    ++line;
    const size_t nl = bytes.find('\n');
    std::string_view row = bytes.substr(0, nl);
    bytes.remove_prefix(nl == std::string_view::npos ? bytes.size() : nl + 1);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.find_first_not_of(" \t") == std::string_view::npos) continue;
    absl::StatusOr<json> j = ParseJsonBounded(row, JsonLimits{.max_bytes = o.max_record_bytes, .max_depth = 32});
    if (!j.ok()) {
      out.errors.push_back({source, line, std::string(j.status().message())});
      continue;
    }
    if (!j->is_object()) {
      out.errors.push_back({source, line, "the line is not a JSON object"});
      continue;
    }
    auto text = j->find(o.text_field);
    if (text == j->end() || !text->is_string()) {
      out.errors.push_back({source, line, fmt::format("no string field {:?} (--field names it)", o.text_field)});
      continue;
    }
    out.records.push_back({source, line, text->get<std::string>(), std::move(*j)});
  }
}

// One CSV row from `bytes` (RFC 4180), advancing it; `lines` counts the line breaks consumed.
// Returns false with `error` set for an unterminated quote or a stray quote inside an unquoted cell.
bool NextCsvRow(std::string_view& bytes, std::vector<std::string>& cells, uint64_t& lines, std::string& error,
                uint64_t max_bytes) {
  cells.assign(1, "");
  size_t i = 0;
  uint64_t size = 0;
  bool quoted = false, was_quoted = false;
  while (i < bytes.size()) {
    const char c = bytes[i];
    if (++size > max_bytes) {
      error = fmt::format("row is over {} bytes", max_bytes);
      return false;
    }
    if (quoted) {
      if (c == '"') {
        if (i + 1 < bytes.size() && bytes[i + 1] == '"') {
          cells.back() += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        if (c == '\n') ++lines;
        cells.back() += c;
      }
      ++i;
      continue;
    }
    if (c == '"') {
      if (!cells.back().empty() || was_quoted) {
        error = "a quote inside an unquoted cell (quote the whole cell and double inner quotes)";
        return false;
      }
      quoted = was_quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
      was_quoted = false;
    } else if (c == '\n' || c == '\r') {
      ++i;
      if (c == '\r' && i < bytes.size() && bytes[i] == '\n') ++i;
      ++lines;
      bytes.remove_prefix(i);
      return true;
    } else {
      if (was_quoted) {
        error = "text after a closing quote";
        return false;
      }
      cells.back() += c;
    }
    ++i;
  }
  bytes = {};
  if (quoted) {
    error = "a quoted cell is not closed before the end of the file";
    return false;
  }
  return true;
}

void ParseCsv(std::string_view bytes, const std::string& source, const RecordOptions& o, ParsedRecords& out) {
  std::vector<std::string> header, cells;
  uint64_t line = 1;
  std::string error;
  if (!NextCsvRow(bytes, header, line, error, o.max_record_bytes)) {
    out.errors.push_back({source, 1, "header: " + error});
    return;
  }
  size_t text_column = header.size();
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == o.text_field) text_column = c;
  }
  if (text_column == header.size()) {
    out.errors.push_back({source, 1, fmt::format("no column {:?} in the header (--field names it)", o.text_field)});
    return;
  }
  while (!bytes.empty()) {
    const uint64_t start = line;
    if (!NextCsvRow(bytes, cells, line, error, o.max_record_bytes)) {
      out.errors.push_back({source, start, error});
      return;  // the rest of the file cannot be split into rows reliably
    }
    if (cells.size() == 1 && cells[0].empty()) continue;  // a blank line
    if (cells.size() != header.size()) {
      out.errors.push_back(
          {source, start, fmt::format("{} cells where the header has {} columns", cells.size(), header.size())});
      continue;
    }
    json fields = json::object();
    for (size_t c = 0; c < header.size(); ++c) fields[header[c]] = cells[c];
    out.records.push_back({source, start, cells[text_column], std::move(fields)});
  }
}

}  // namespace

absl::StatusOr<RecordFormat> ChooseRecordFormat(std::string_view name, std::string_view path) {
  if (name == "text") return RecordFormat::kText;
  if (name == "jsonl") return RecordFormat::kJsonLines;
  if (name == "csv") return RecordFormat::kCsv;
  if (name == "auto") {
    if (EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson")) return RecordFormat::kJsonLines;
    if (EndsWith(path, ".csv")) return RecordFormat::kCsv;
    return RecordFormat::kText;
  }
  return absl::InvalidArgumentError(
      fmt::format("record format {:?} is not one of auto, text, jsonl, csv", std::string(name)));
}

const char* RecordFormatName(RecordFormat format) {
  switch (format) {
    case RecordFormat::kText:
      return "text";
    case RecordFormat::kJsonLines:
      return "jsonl";
    case RecordFormat::kCsv:
      return "csv";
  }
  return "?";
}

void ParseRecords(std::string_view bytes, const std::string& source, RecordFormat format, const RecordOptions& options,
                  ParsedRecords& out) {
  switch (format) {
    case RecordFormat::kText:
      if (bytes.size() > options.max_record_bytes) {
        out.errors.push_back({source, 1, fmt::format("the file is over {} bytes", options.max_record_bytes)});
        return;
      }
      out.records.push_back({source, 1, std::string(bytes), nullptr});
      return;
    case RecordFormat::kJsonLines:
      ParseJsonLines(bytes, source, options, out);
      return;
    case RecordFormat::kCsv:
      ParseCsv(bytes, source, options, out);
      return;
  }
}

std::string CanonicalRecordLine(const Record& r) {
  return json{{"source", r.source}, {"line", r.line}, {"text", r.text}, {"fields", r.fields}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpugeek::data
