#include "data/shard_format.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "archive/digest.h"
#include "data/shard_reader.h"
#include "data/shard_writer.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Spit(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

std::string Message(const absl::Status& st) { return std::string(st.message()); }

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek-shard-{}-{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ShardIndex Write(const std::vector<std::string>& records, uint64_t shard_bytes) {
    auto w = ShardWriter::Create({.dir = dir_.string(), .shard_bytes = shard_bytes});
    EXPECT_TRUE(w.ok()) << w.status();
    for (const std::string& r : records) EXPECT_TRUE((*w)->Add(r).ok());
    auto index = (*w)->Finish();
    EXPECT_TRUE(index.ok()) << index.status();
    return *index;
  }

  // The mixed records of the boundary test: 9 x 10 bytes, an empty one, 500 bytes, 2 x 10 bytes.
  static std::vector<std::string> Mixed() {
    std::vector<std::string> records;
    for (int i = 0; i < 9; ++i) records.push_back(fmt::format("record-{:03d}", i).substr(0, 10));
    records.push_back("");
    records.push_back(std::string(500, 'x'));
    records.push_back("abcdefghij");
    records.push_back("0123456789");
    return records;
  }

  fs::path dir_;
};

TEST(ShardFormatTest, FooterLayoutIsPinned) {
  EXPECT_EQ(ShardFileName(0), "shard-00000.bin");
  EXPECT_EQ(ShardFileName(123456), "shard-123456.bin");
  const std::string footer = EncodeShardFooter({3, 0, 2});
  ASSERT_EQ(footer.size(), 8 * 4 + 16u);
  EXPECT_EQ(footer.substr(8, 8), std::string("\x03\0\0\0\0\0\0\0", 8));   // offset 1
  EXPECT_EQ(footer.substr(24, 8), std::string("\x05\0\0\0\0\0\0\0", 8));  // offset 3 = end of records
  EXPECT_EQ(footer.substr(32), std::string("\x03\0\0\0\0\0\0\0GGSHARD1", 16));
  auto offsets = ParseShardFile("abcde" + footer, "s");
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  EXPECT_THAT(*offsets, ElementsAre(0, 3, 3, 5));
}

TEST(ShardFormatTest, CorruptShardBytesAreDataLoss) {
  const std::string good = "abcde" + EncodeShardFooter({3, 0, 2});
  EXPECT_THAT(Message(ParseShardFile(good.substr(0, good.size() - 1), "s.bin").status()), HasSubstr("no GGSHARD1"));
  EXPECT_THAT(Message(ParseShardFile("abc", "s.bin").status()), HasSubstr("too short"));
  EXPECT_THAT(Message(ParseShardFile(good.substr(3), "s.bin").status()), HasSubstr("offsets run from 0 to 5"));
  std::string huge = good;
  huge[good.size() - 16] = '\xff';  // count 255 in a 53-byte file
  EXPECT_THAT(Message(ParseShardFile(huge, "s.bin").status()), HasSubstr("more than a 53-byte file can hold"));
  std::string backwards = good;
  backwards[5 + 8] = 4;  // record 0 ends at 4, record 1 then "ends" at 3
  auto st = ParseShardFile(backwards, "s.bin").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(st), HasSubstr("record 1 ends at 3, before it starts at 4"));
}

TEST_F(ShardTest, BoundariesFallWhereTheSizesSay) {
  // 100-byte shards: n records of 10 bytes take 10 n + 8 (n + 1) + 16 bytes, so 4 fit (96 bytes). The
  // third shard holds a 10-byte and the empty record (50 bytes); the 500-byte record gets a shard of its
  // own (500 + 16 + 16 = 532 bytes); the last two records make 60 bytes.
  const ShardIndex index = Write(Mixed(), 100);
  ASSERT_EQ(index.shards.size(), 5u);
  std::vector<uint64_t> bytes, records, firsts;
  for (const ShardInfo& s : index.shards) {
    bytes.push_back(s.bytes);
    records.push_back(s.records);
    firsts.push_back(s.first_record);
    EXPECT_EQ(s.sha256, archive::Sha256Hex(Slurp(dir_ / s.file))) << s.file;
    EXPECT_EQ(fs::file_size(dir_ / s.file), s.bytes);
  }
  EXPECT_THAT(bytes, ElementsAre(96, 96, 50, 532, 60));
  EXPECT_THAT(records, ElementsAre(4, 4, 2, 1, 2));
  EXPECT_THAT(firsts, ElementsAre(0, 4, 8, 10, 11));
  EXPECT_EQ(index.total_records, 13u);
  EXPECT_EQ(index.total_bytes, 834u);
  EXPECT_EQ(index.shards[4].file, "shard-00004.bin");
  // Only the shards and the index are left: no temporary files.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 6);
  auto parsed = ParseShardIndex(Slurp(dir_ / "index.json"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->RecordCounts(), records);
  EXPECT_EQ(parsed->ShardOf(0), 0u);
  EXPECT_EQ(parsed->ShardOf(7), 1u);
  EXPECT_EQ(parsed->ShardOf(10), 3u);
  EXPECT_EQ(parsed->ShardOf(12), 4u);
}

TEST_F(ShardTest, RoundTripsEveryRecordIncludingEmptyAndOversized) {
  const std::vector<std::string> records = Mixed();
  Write(records, 100);
  auto reader = ShardReader::Open(dir_.string(), {.verify_digests = true});
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->size(), records.size());
  for (uint64_t k = 0; k < records.size(); ++k) {
    auto r = (*reader)->Record(k);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, records[k]) << "record " << k;
  }
  EXPECT_EQ((*reader)->Record(7).value(), records[7]);  // again, from the cached file
  EXPECT_EQ((*reader)->Record(13).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(ShardTest, DefaultSizePutsSmallDatasetsInOneShard) {
  std::vector<std::string> records;
  for (int i = 0; i < 1000; ++i) records.push_back(std::string(i % 37, static_cast<char>('a' + i % 26)));
  const ShardIndex index = Write(records, kDefaultShardBytes);
  ASSERT_EQ(index.shards.size(), 1u);
  EXPECT_EQ(index.shards[0].records, 1000u);
  auto reader = ShardReader::Open(dir_.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Record(999).value(), records[999]);
}

TEST_F(ShardTest, EmptyDatasetHasAnIndexAndNoShards) {
  const ShardIndex index = Write({}, 100);
  EXPECT_TRUE(index.shards.empty());
  auto reader = ShardReader::Open(dir_.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->size(), 0u);
  EXPECT_EQ((*reader)->Record(0).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(ShardTest, WriterRefusesAFinishedDatasetAndTinyShards) {
  Write({"a"}, 100);
  auto again = ShardWriter::Create({.dir = dir_.string()});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(Message(again.status()), HasSubstr("remove it or choose another folder"));
  EXPECT_EQ(ShardWriter::Create({.dir = (dir_ / "x").string(), .shard_bytes = 63}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ShardTest, CorruptOrTruncatedFilesGiveClearErrors) {
  Write(Mixed(), 100);
  const fs::path shard1 = dir_ / "shard-00001.bin";
  const std::string original = Slurp(shard1);
  // A flipped record byte: the structure holds, the digest does not.
  std::string flipped = original;
  flipped[3] ^= 1;
  Spit(shard1, flipped);
  EXPECT_TRUE(ShardReader::Open(dir_.string()).ok());
  auto verified = ShardReader::Open(dir_.string(), {.verify_digests = true});
  EXPECT_EQ(verified.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(verified.status()), HasSubstr("shard-00001.bin: SHA-256"));
  // A broken trailer, same size: Record says which file.
  std::string no_magic = original;
  no_magic[no_magic.size() - 1] = '0';
  Spit(shard1, no_magic);
  auto reader = ShardReader::Open(dir_.string());
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->Record(3).value(), Mixed()[3]);  // other shards still read
  auto bad = (*reader)->Record(5);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(bad.status()), HasSubstr("shard-00001.bin: no GGSHARD1 trailer"));
  // An offset pointing past the records.
  std::string wild = original;
  wild[original.size() - 16 - 8 * 3] = 100;  // offset 2 (of 5) of a shard whose records end at 40
  Spit(shard1, wild);
  reader = ShardReader::Open(dir_.string());
  ASSERT_TRUE(reader.ok());
  EXPECT_THAT(Message((*reader)->Record(5).status()), HasSubstr("record 1 spans bytes [10, 100)"));
  // Truncated, and missing.
  Spit(shard1, original.substr(0, 50));
  auto truncated = ShardReader::Open(dir_.string());
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(truncated.status()), HasSubstr("shard-00001.bin: 50 bytes, index.json says 96"));
  fs::remove(shard1);
  EXPECT_EQ(ShardReader::Open(dir_.string()).status().code(), absl::StatusCode::kNotFound);
  fs::remove(dir_ / "index.json");
  auto no_index = ShardReader::Open(dir_.string());
  EXPECT_EQ(no_index.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(no_index.status()), HasSubstr("no index.json"));
}

// Each field of index.json checked, the message naming it.
TEST_F(ShardTest, IndexFieldsAreValidated) {
  Write(Mixed(), 100);
  const nlohmann::json good = nlohmann::json::parse(Slurp(dir_ / "index.json"));
  auto error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    absl::StatusOr<ShardIndex> parsed = ParseShardIndex(j.dump());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    return Message(parsed.status());
  };
  EXPECT_THAT(error([](auto& j) { j["format"] = "tar"; }), HasSubstr("format: \"tar\", expected \"gpugeek-shards\""));
  EXPECT_THAT(error([](auto& j) { j["version"] = 2; }), HasSubstr("version: 2, this gpugeek reads version 1"));
  EXPECT_THAT(error([](auto& j) { j.erase("total_records"); }), HasSubstr("total_records: missing"));
  EXPECT_THAT(error([](auto& j) { j["total_records"] = 12; }), HasSubstr("total_records: 12, but the shards hold 13"));
  EXPECT_THAT(error([](auto& j) { j["total_bytes"] = -1; }), HasSubstr("total_bytes: -1 is not a non-negative"));
  EXPECT_THAT(error([](auto& j) { j["shard_bytes"] = 3; }), HasSubstr("shard_bytes: 3, below the minimum of 64"));
  EXPECT_THAT(error([](auto& j) { j["extra"] = 1; }), HasSubstr("extra: unknown key"));
  EXPECT_THAT(error([](auto& j) { j["shards"] = "none"; }), HasSubstr("shards: not an array"));
  EXPECT_THAT(error([](auto& j) { j["shards"][1] = 7; }), HasSubstr("shards[1]: not an object"));
  EXPECT_THAT(error([](auto& j) { j["shards"][1]["file"] = "../../etc/passwd"; }),
              HasSubstr("shards[1].file: \"../../etc/passwd\", expected \"shard-00001.bin\""));
  EXPECT_THAT(error([](auto& j) { j["shards"][2]["first_record"] = 9; }),
              HasSubstr("shards[2].first_record: 9, expected 8"));
  EXPECT_THAT(error([](auto& j) { j["shards"][2]["records"] = 0; }), HasSubstr("shards[2].records: 0;"));
  EXPECT_THAT(error([](auto& j) { j["shards"][2]["bytes"] = 30; }),
              HasSubstr("shards[2].bytes: 30, too small for the footer of 2 records"));
  EXPECT_THAT(error([](auto& j) { j["shards"][0]["sha256"] = "ABC"; }),
              HasSubstr("shards[0].sha256: not 64 lower-case hex digits"));
  EXPECT_THAT(error([](auto& j) { j["shards"][0]["records"] = 1.5; }), HasSubstr("shards[0].records: 1.5 is not"));
  EXPECT_THAT(error([](auto& j) { j["shards"][0].erase("sha256"); }), HasSubstr("shards[0].sha256: missing"));
  EXPECT_THAT(error([](auto& j) { j["shards"][0]["records"] = UINT64_MAX; }),
              HasSubstr("shards[0].bytes: 96, too small"));
  EXPECT_THAT(Message(ParseShardIndex("{\"format\": ").status()), HasSubstr("JSON syntax error"));
  EXPECT_THAT(Message(ParseShardIndex(std::string(100, '[')).status()), HasSubstr("nesting"));
  EXPECT_THAT(Message(ParseShardIndex("[]").status()), HasSubstr("not a JSON object"));
  // A broken index.json on disk: Open names the folder and the field.
  Spit(dir_ / "index.json", R"({"format": "gpugeek-shards"})");
  EXPECT_THAT(Message(ShardReader::Open(dir_.string()).status()), HasSubstr("index.json: version: missing"));
}

}  // namespace
}  // namespace gpugeek::data
