#include "data/cleaning.h"

#include <fmt/format.h>

#include "common/status_macros.h"

namespace gpugeek::data {
namespace {

bool KnownKind(const std::string& kind) {
  return kind == "length" || kind == "charset" || kind == "repeated_lines" ||
         (kind.starts_with("numeric:") && kind.size() > 8);
}

std::string OutputPath(const std::string& source) { return source.ends_with(".jsonl") ? source : source + ".jsonl"; }

}  // namespace

absl::StatusOr<CleanResult> CleanRecords(std::span<const CleanInput> inputs, const CleanOptions& options) {
  RETURN_IF_ERROR(ValidateNearDuplicateOptions(options.dedup));
  for (const std::string& kind : options.drop) {
    if (!KnownKind(kind)) {
      return absl::InvalidArgumentError(
          fmt::format("--drop {:?}: not an anomaly kind (length, charset, repeated_lines, numeric:<field>)", kind));
    }
  }
  // Output names must not collide: "a" and "a.jsonl" both become a.jsonl; "d" -> d.jsonl cannot be a
  // file when "d.jsonl/x" needs it as a folder; cleaning-report.json is the report's.
  std::set<std::string> outputs;
  for (const CleanInput& in : inputs) {
    if (!outputs.insert(OutputPath(in.path)).second) {
      return absl::InvalidArgumentError(
          fmt::format("{:?} and another file both become {:?}; rename one of them", in.path, OutputPath(in.path)));
    }
  }
  for (const std::string& out : outputs) {
    auto next = outputs.upper_bound(out + "/");
    if ((next != outputs.end() && next->starts_with(out + "/")) || out.starts_with("cleaning-report.json/")) {
      return absl::InvalidArgumentError(fmt::format(
          "the cleaned file {:?} would also be a folder of other cleaned files (or of the report); rename the folder",
          out));
    }
  }
  CleanResult result;
  for (const CleanInput& in : inputs) {
    ASSIGN_OR_RETURN(const RecordFormat format, ChooseRecordFormat(options.format, in.path));
    const size_t records_before = result.parsed.records.size();
    const size_t errors_before = result.parsed.errors.size();
    ParseRecords(in.bytes, in.path, format, options.records, result.parsed);
    // A file of rows none of which has the text field is a wrong --field, not a file of bad rows.
    if (format != RecordFormat::kText && result.parsed.records.size() == records_before &&
        result.parsed.errors.size() > errors_before) {
      return absl::InvalidArgumentError(fmt::format("{}: no row was read ({}); is --field {:?} right?", in.path,
                                                    result.parsed.errors[errors_before].message,
                                                    options.records.text_field));
    }
  }
  const std::vector<Record>& records = result.parsed.records;
  std::vector<std::string_view> texts;
  texts.reserve(records.size());
  for (const Record& r : records) texts.push_back(r.text);
  result.dedup = FindNearDuplicates(SketchDocuments(texts, options.dedup), options.dedup.threshold);
  result.anomalies = FindAnomalies(records, options.anomalies);

  result.kept.assign(records.size(), true);
  std::vector<const Anomaly*> dropped(records.size(), nullptr);
  for (const Anomaly& a : result.anomalies) {
    if (options.drop.contains(a.kind) && dropped[a.record] == nullptr) dropped[a.record] = &a;
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const DocumentVerdict& v = result.dedup.verdicts[i];
    if (v.verdict != Verdict::kKept) {
      result.removed.push_back({i, v.verdict == Verdict::kExactDuplicate ? "exact_duplicate" : "near_duplicate",
                                v.duplicate_of, v.jaccard, ""});
    } else if (dropped[i] != nullptr) {
      result.removed.push_back({i, dropped[i]->kind, 0, 0, dropped[i]->detail});
    } else {
      result.files[OutputPath(records[i].source)] += CanonicalRecordLine(records[i]) + "\n";
      continue;
    }
    result.kept[i] = false;
  }
  return result;
}

nlohmann::json CleaningReport(const CleanResult& result, const CleanOptions& options,
                              const std::string& source_commit) {
  using nlohmann::json;
  const std::vector<Record>& records = result.parsed.records;
  auto where = [&](size_t i) { return json{{"source", records[i].source}, {"line", records[i].line}}; };
  json removed = json::array();
  std::map<std::string, size_t> by_reason;
  for (const RemovedRecord& r : result.removed) {
    json j = where(r.record);
    j["reason"] = r.reason;
    if (r.reason.ends_with("duplicate")) {
      j["duplicate_of"] = where(r.duplicate_of);
      j["jaccard"] = r.jaccard;
    } else {
      j["detail"] = r.detail;
    }
    removed.push_back(std::move(j));
    by_reason[r.reason] += 1;
  }
  json anomalies = json::array();
  for (const Anomaly& a : result.anomalies) {
    json j = where(a.record);
    j["kind"] = a.kind;
    j["detail"] = a.detail;
    j["removed"] = !result.kept[a.record] && options.drop.contains(a.kind);
    anomalies.push_back(std::move(j));
  }
  json errors = json::array();
  for (const RecordError& e : result.parsed.errors) {
    errors.push_back({{"source", e.source}, {"line", e.line}, {"error", e.message}});
  }
  size_t kept = 0;
  for (bool k : result.kept) kept += k;
  return json{{"source_commit", source_commit},
              {"records", records.size()},
              {"kept", kept},
              {"removed_by_reason", by_reason},
              {"unparsable_rows", result.parsed.errors.size()},
              {"options",
               {{"format", options.format},
                {"text_field", options.records.text_field},
                {"threshold", options.dedup.threshold},
                {"ngram", options.dedup.shingles.n},
                {"unit", options.dedup.shingles.unit == ShingleUnit::kChar ? "char" : "word"},
                {"bands", options.dedup.lsh.bands},
                {"rows", options.dedup.lsh.rows},
                {"seed", options.dedup.lsh.seed},
                {"drop", options.drop}}},
              {"removed", std::move(removed)},
              {"anomalies", std::move(anomalies)},
              {"errors", std::move(errors)}};
}

}  // namespace gpugeek::data
