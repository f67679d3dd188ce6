#pragma once
// A cleaning run over a dataset version's files: every file parsed into records (records.h), exact and
// near-duplicate records removed (near_duplicates.h: MinHash LSH candidates confirmed by exact Jaccard,
// so neither a collision nor a chain removes a record unlike every kept one), anomalies reported
// (anomalies.h) and, for the kinds asked for, removed. The result is the kept records as canonical JSON
// Lines, one output file per input file, and a report saying what was removed and why, which the CLI
// commits as a new version (`gpugeek data clean`).

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/anomalies.h"
#include "data/near_duplicates.h"
#include "data/records.h"

namespace gpugeek::data {

struct CleanOptions {
  std::string format = "auto";  // records.h ChooseRecordFormat, for every file
  RecordOptions records;
  NearDuplicateOptions dedup;  // bands and rows must be set (ChooseLsh picks them for a threshold)
  AnomalyOptions anomalies;
  std::set<std::string> drop;  // anomaly kinds to remove ("length", "charset", "repeated_lines",
                               // "numeric:<field>"); the others are only reported
};

struct CleanInput {
  std::string path;   // in the dataset
  std::string bytes;  // the file's contents
};

struct RemovedRecord {
  size_t record = 0;
  std::string reason;       // "exact_duplicate", "near_duplicate" or an anomaly kind
  size_t duplicate_of = 0;  // duplicates: the kept (or first) record it copies
  double jaccard = 0;       // near duplicates: the exact Jaccard index with it
  std::string detail;       // anomalies: what was measured
};

struct CleanResult {
  ParsedRecords parsed;
  std::vector<Anomaly> anomalies;
  std::vector<RemovedRecord> removed;  // by record; a record removed for several reasons is listed once
  std::vector<bool> kept;              // per record
  NearDuplicateResult dedup;
  // Output path -> canonical JSON Lines of its kept records, one per line. A file "a.jsonl" keeps its
  // name; any other gets ".jsonl" appended ("b.csv" -> "b.csv.jsonl"). Files with no kept record are absent.
  std::map<std::string, std::string> files;
};

// InvalidArgument for bad options (the format's name, dedup options, an unknown drop kind). Rows that
// do not parse are reported in parsed.errors, not failed on.
absl::StatusOr<CleanResult> CleanRecords(std::span<const CleanInput> inputs, const CleanOptions& options);

// The report committed beside the cleaned files (cleaning-report.json): counts, options, every removed
// record (source, line, reason, what it duplicates), every anomaly, every unparsable row. `source_commit`
// names the version cleaned.
nlohmann::json CleaningReport(const CleanResult& result, const CleanOptions& options, const std::string& source_commit);

}  // namespace gpugeek::data
