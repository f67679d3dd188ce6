#pragma once
// Records: the rows of a dataset's files in one canonical form, whatever the file's format, so cleaning
// (deduplication, anomaly reports) and sharding see the same thing. Formats:
//   text   the whole file is one record (its text)
//   jsonl  JSON Lines (https://jsonlines.org): each non-blank line a JSON object; the record's text is the
//          string at options.text_field; every field is kept
//   csv    RFC 4180: a header row naming the columns, then one record per row; quoted fields may hold
//          commas, "" and line breaks; the text is the column options.text_field
// A malformed row (bad JSON, a missing or non-string text field, a row with the wrong number of cells, an
// unterminated quote) is not fatal: it is reported with its file and line and left out.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace gpugeek::data {

enum class RecordFormat { kText, kJsonLines, kCsv };

// "text", "jsonl" or "csv"; "auto" picks by the path's extension (.jsonl / .ndjson, .csv, anything else
// text). InvalidArgument naming the value and the choices otherwise.
absl::StatusOr<RecordFormat> ChooseRecordFormat(std::string_view name, std::string_view path);
const char* RecordFormatName(RecordFormat format);

struct Record {
  std::string source;     // the file it came from (a path in the dataset)
  uint64_t line = 1;      // 1-based line where it starts
  std::string text;       // what deduplication and the text checks look at
  nlohmann::json fields;  // jsonl: the object; csv: column -> cell (strings); text: null
};

struct RecordError {
  std::string source;
  uint64_t line = 0;
  std::string message;  // what is wrong, naming the field or column
};

struct RecordOptions {
  std::string text_field = "text";
  uint64_t max_record_bytes = uint64_t{16} << 20;  // a longer row is an error, not a record
};

struct ParsedRecords {
  std::vector<Record> records;
  std::vector<RecordError> errors;
};

// Appends the records of one file's bytes to `out`. Never fails as a whole: bad rows go to out.errors.
void ParseRecords(std::string_view bytes, const std::string& source, RecordFormat format, const RecordOptions& options,
                  ParsedRecords& out);

// One record as a line of canonical JSON Lines: {"fields":...,"line":N,"source":"...","text":"..."}
// (no trailing newline). Invalid UTF-8 in the text is replaced by U+FFFD.
std::string CanonicalRecordLine(const Record& record);

}  // namespace gpugeek::data
