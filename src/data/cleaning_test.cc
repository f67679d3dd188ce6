#include "data/cleaning.h"

#include <gtest/gtest.h>

#include <cmath>

#include "data/anomalies.h"
#include "data/minhash.h"
#include "data/records.h"

namespace gpugeek::data {
namespace {

ParsedRecords Parse(std::string_view bytes, const std::string& source, RecordFormat format,
                    const RecordOptions& options = {}) {
  ParsedRecords out;
  ParseRecords(bytes, source, format, options, out);
  return out;
}

TEST(Records, JsonLinesKeepEveryFieldAndReportBadLines) {
  const ParsedRecords p =
      Parse("{\"text\":\"hello\",\"score\":3}\n\n{\"text\":1}\nnot json\r\n[1]\n{\"text\":\"last\"}", "a.jsonl",
            RecordFormat::kJsonLines);
  ASSERT_EQ(p.records.size(), 2u);
  EXPECT_EQ(p.records[0].text, "hello");
  EXPECT_EQ(p.records[0].line, 1u);
  EXPECT_EQ(p.records[0].fields["score"], 3);
  EXPECT_EQ(p.records[1].text, "last");
  EXPECT_EQ(p.records[1].line, 6u);
  ASSERT_EQ(p.errors.size(), 3u);
  EXPECT_EQ(p.errors[0].line, 3u);
  EXPECT_EQ(p.errors[0].message, "no string field \"text\" (--field names it)");
  EXPECT_EQ(p.errors[1].line, 4u);
  EXPECT_EQ(p.errors[2].message, "the line is not a JSON object");
}

TEST(Records, CsvFollowsRfc4180) {
  const ParsedRecords p =
      Parse("id,body,n\r\n1,plain,5\n2,\"with, comma and \"\"quotes\"\"\",6\n3,\"two\nlines\",7\n4,short\n5,x,8\n",
            "t.csv", RecordFormat::kCsv, {.text_field = "body"});
  ASSERT_EQ(p.records.size(), 4u);
  EXPECT_EQ(p.records[0].text, "plain");
  EXPECT_EQ(p.records[0].line, 2u);
  EXPECT_EQ(p.records[1].text, "with, comma and \"quotes\"");
  EXPECT_EQ(p.records[2].text, "two\nlines");
  EXPECT_EQ(p.records[2].line, 4u);
  EXPECT_EQ(p.records[3].text, "x");
  EXPECT_EQ(p.records[3].line, 7u);  // the quoted line break counted
  EXPECT_EQ(p.records[3].fields["n"], "8");
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].line, 6u);
  EXPECT_EQ(p.errors[0].message, "2 cells where the header has 3 columns");
  EXPECT_EQ(Parse("a,b\n1,2\n", "t.csv", RecordFormat::kCsv).errors.at(0).message,
            "no column \"text\" in the header (--field names it)");
  EXPECT_EQ(Parse("text\n\"open\n", "t.csv", RecordFormat::kCsv).errors.at(0).message,
            "a quoted cell is not closed before the end of the file");
}

TEST(Records, FormatsByNameOrExtension) {
  EXPECT_EQ(ChooseRecordFormat("auto", "x/data.ndjson").value(), RecordFormat::kJsonLines);
  EXPECT_EQ(ChooseRecordFormat("auto", "x/t.csv").value(), RecordFormat::kCsv);
  EXPECT_EQ(ChooseRecordFormat("auto", "README").value(), RecordFormat::kText);
  EXPECT_EQ(ChooseRecordFormat("xml", "a").status().message(),
            "record format \"xml\" is not one of auto, text, jsonl, csv");
}

TEST(Anomalies, RobustSpreadIsMedianAndMad) {
  // 1 2 3 4 100: median 3; deviations 2 1 0 1 97 -> MAD 1.
  const MedianMad m = RobustSpread({1, 2, 3, 4, 100});
  EXPECT_EQ(m.median, 3);
  EXPECT_EQ(m.mad, 1);
  EXPECT_EQ(RobustSpread({1, 2, 3, 4}).median, 2.5);
}

TEST(Anomalies, FlagsOutliersCharsetAndRepeatedLines) {
  std::vector<Record> records;
  for (int i = 0; i < 9; ++i) {
    records.push_back(
        {"a.jsonl", static_cast<uint64_t>(i + 1), std::string(100 + i, 'x'), {{"text", "-"}, {"price", 10 + i % 3}}});
  }
  records[4].fields["price"] = 1000;           // z = 0.6745 * (1000 - 11) / 1 = 667
  records[5].text = std::string(100000, 'y');  // log length far from the rest
  records[6].text = "bad \xff byte";
  records[7].text = "a\nb\na\na\nb\nc";  // 3 of 6 lines repeat: 50% > 30%
  const std::vector<Anomaly> found = FindAnomalies(records);
  std::vector<std::pair<size_t, std::string>> got;
  for (const Anomaly& a : found) got.emplace_back(a.record, a.kind);
  const std::vector<std::pair<size_t, std::string>> want = {{4, "numeric:price"}, {5, "length"}, {6, "charset"},
                                                            {6, "length"},        {7, "length"}, {7, "repeated_lines"}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(found[0].detail, "1000 against a median of 11: robust z 667.1 (limit 3.5)");
  EXPECT_EQ(found.back().detail, "3 of 6 lines repeat an earlier one (limit 30%)");
}

TEST(Cleaning, RemovesDuplicatesAndAskedForAnomaliesAndReportsWhy) {
  std::string words;
  for (int i = 0; i < 60; ++i) words += "w" + std::to_string(i) + " ";
  std::string near = words;
  near.replace(near.find("w30"), 3, "zz");  // one word of 60 changed
  const std::vector<CleanInput> inputs = {
      {"a.jsonl", "{\"text\":\"" + words + "\"}\n{\"text\":\"" + words + "\"}\n{\"text\":\"bad \\u0001\\u0002\"}\n"},
      {"b.csv", "id,text\n1,\"" + near + "\"\n2,unrelated words here\n"},
      {"c.txt", "a text file\n"}};
  CleanOptions options;
  options.dedup.threshold = 0.8;
  options.dedup.lsh = ChooseLsh(0.8);
  options.dedup.threads = 1;
  options.drop = {"charset"};
  const CleanResult r = CleanRecords(inputs, options).value();
  ASSERT_EQ(r.parsed.records.size(), 6u);
  EXPECT_EQ(r.kept, (std::vector<bool>{true, false, false, false, true, true}));
  ASSERT_EQ(r.removed.size(), 3u);
  EXPECT_EQ(r.removed[0].reason, "exact_duplicate");
  EXPECT_EQ(r.removed[0].duplicate_of, 0u);
  EXPECT_EQ(r.removed[1].reason, "charset");
  EXPECT_EQ(r.removed[2].reason, "near_duplicate");
  EXPECT_GE(r.removed[2].jaccard, 0.8);
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.files.at("c.txt.jsonl"),
            "{\"fields\":null,\"line\":1,\"source\":\"c.txt\",\"text\":\"a text file\\n\"}\n");
  EXPECT_EQ(r.files.at("b.csv.jsonl"),
            "{\"fields\":{\"id\":\"2\",\"text\":\"unrelated words here\"},\"line\":3,\"source\":\"b.csv\",\"text\":"
            "\"unrelated words here\"}\n");
  const nlohmann::json report = CleaningReport(r, options, "abc");
  EXPECT_EQ(report["records"], 6);
  EXPECT_EQ(report["kept"], 3);
  EXPECT_EQ(report["removed_by_reason"]["exact_duplicate"], 1);
  EXPECT_EQ(report["removed"][2]["duplicate_of"]["source"], "a.jsonl");
  EXPECT_EQ(report["removed"][2]["source"], "b.csv");
  std::vector<CleanInput> clash = {{"a", "x"}, {"a.jsonl", "{\"text\":\"y\"}"}};
  EXPECT_EQ(CleanRecords(clash, options).status().message(),
            "\"a.jsonl\" and another file both become \"a.jsonl\"; rename one of them");
  clash = {{"d", "x"}, {"d.jsonl/x.jsonl", "{\"text\":\"y\"}"}};
  EXPECT_TRUE(absl::IsInvalidArgument(CleanRecords(clash, options).status()));
  CleanOptions typo = options;
  typo.records.text_field = "body";
  EXPECT_EQ(CleanRecords(inputs, typo).status().message(),
            "a.jsonl: no row was read (no string field \"body\" (--field names it)); is --field \"body\" right?");
  options.drop = {"colour"};
  EXPECT_EQ(CleanRecords(inputs, options).status().message(),
            "--drop \"colour\": not an anomaly kind (length, charset, repeated_lines, numeric:<field>)");
}

}  // namespace
}  // namespace gpugeek::data
