#include "crypto/sealed_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "crypto/test_util.h"

namespace gpugeek::crypto {
namespace {

using ::testing::HasSubstr;
using testing::ModeOf;
using testing::ReadRaw;
using testing::TempDir;
using testing::WriteRaw;

constexpr char kMarker[] = "PLAINTEXT-MARKER-7f3a";

class SealedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CreateMasterKeyFile(key_path_).ok());
    provider_ = FileKeyProvider::Open(key_path_).value();
    keyring_ = Keyring::Open(keyring_path_, *provider_).value();
  }

  TempDir dir_;
  const std::string key_path_ = dir_.Path("master.key");
  const std::string keyring_path_ = dir_.Path("keyring.json");
  std::unique_ptr<FileKeyProvider> provider_;
  std::unique_ptr<Keyring> keyring_;
};

TEST_F(SealedFileTest, SealedFileIsUnreadableWithoutTheKey) {
  const std::string path = dir_.Path("job-7.env");
  const std::string plaintext = absl::StrCat("HF_TOKEN=", kMarker, "\nWANDB_KEY=abc\n");
  ASSERT_TRUE(SealFile(*keyring_, "acme", path, plaintext, "env:job-7").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  const std::string raw = ReadRaw(path);
  EXPECT_EQ(raw.find(kMarker), std::string::npos);
  EXPECT_EQ(raw.find("HF_TOKEN"), std::string::npos);
  EXPECT_EQ(OpenFile(*keyring_, "acme", path, "env:job-7").value(), plaintext);
  auto wrong_aad = OpenFile(*keyring_, "acme", path, "env:job-8");
  EXPECT_EQ(wrong_aad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(wrong_aad.status().message(), HasSubstr(path));
  EXPECT_EQ(OpenFile(*keyring_, "acme", dir_.Path("missing"), "x").status().code(), absl::StatusCode::kNotFound);

  // Another master key cannot get at it: a keyring opened with another key file fails at open, and a
  // fresh keyring under another key has no data key for the blob.
  const std::string other_key = dir_.Path("other.key");
  ASSERT_TRUE(CreateMasterKeyFile(other_key).ok());
  auto other_provider = FileKeyProvider::Open(other_key).value();
  keyring_.reset();
  auto wrong = Keyring::Open(keyring_path_, *other_provider);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.status().message(), HasSubstr("which master key file " + other_key + " does not hold"));
  auto other_keyring = Keyring::Open(dir_.Path("other-keyring.json"), *other_provider).value();
  ASSERT_TRUE(other_keyring->Seal("acme", "x", "x").ok());  // acme gets data key 1 there too
  EXPECT_EQ(OpenFile(*other_keyring, "acme", path, "env:job-7").status().code(), absl::StatusCode::kDataLoss);
  // With the right key file it opens again.
  keyring_ = Keyring::Open(keyring_path_, *provider_).value();
  EXPECT_EQ(OpenFile(*keyring_, "acme", path, "env:job-7").value(), plaintext);
}

TEST_F(SealedFileTest, LogRecordsReadFromAnyBoundaryAndHideThePlaintext) {
  const std::string path = dir_.Path("rank-0.epoch-1.log");
  auto writer = SealedLogWriter::Open(*keyring_, "acme", path, "log:job-7/0/1").value();
  std::vector<uint64_t> offsets;
  for (int i = 0; i < 100; ++i) {
    auto offset = writer->Append(absl::StrCat("step ", i, " loss=0.", i, " ", kMarker, "\n"));
    ASSERT_TRUE(offset.ok()) << offset.status();
    offsets.push_back(*offset);
  }
  ASSERT_TRUE(writer->Sync().ok());
  EXPECT_EQ(offsets[0], 0u);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ReadRaw(path).find(kMarker), std::string::npos);
  EXPECT_EQ(ReadRaw(path).find("loss"), std::string::npos);

  auto all = ReadSealedLog(*keyring_, "acme", path, "log:job-7/0/1", 0, uint64_t{1} << 30).value();
  ASSERT_EQ(all.records.size(), 100u);
  EXPECT_EQ(all.records[42].plaintext, absl::StrCat("step 42 loss=0.42 ", kMarker, "\n"));
  EXPECT_EQ(all.next_offset, writer->size());

  auto from_middle = ReadSealedLog(*keyring_, "acme", path, "log:job-7/0/1", offsets[70]).value();
  ASSERT_EQ(from_middle.records.size(), 30u);
  EXPECT_EQ(from_middle.records[0].plaintext.substr(0, 8), "step 70 ");

  // Paging by max_bytes: every record exactly once, in order.
  std::vector<std::string> paged;
  for (uint64_t at = 0; at < writer->size();) {
    auto page = ReadSealedLog(*keyring_, "acme", path, "log:job-7/0/1", at, 500).value();
    ASSERT_FALSE(page.records.empty());
    for (auto& r : page.records) paged.push_back(r.plaintext);
    at = page.next_offset;
  }
  ASSERT_EQ(paged.size(), 100u);
  EXPECT_EQ(paged[99].substr(0, 8), "step 99 ");

  // Plaintext sizes from the headers alone.
  auto scan = ScanRecordFrames(ReadRaw(path), 0).value();
  ASSERT_EQ(scan.frames.size(), 100u);
  EXPECT_EQ(scan.frames[5].plaintext_bytes(), all.records[5].plaintext.size());
  EXPECT_EQ(scan.end, writer->size());

  // Another log's context, another tenant, or a non-boundary offset do not open.
  EXPECT_EQ(ReadSealedLog(*keyring_, "acme", path, "log:job-8/0/1", 0).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadSealedLog(*keyring_, "globex", path, "log:job-7/0/1", 0).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(ReadSealedLog(*keyring_, "acme", path, "log:job-7/0/1", offsets[3] + 1).ok());
}

TEST_F(SealedFileTest, ReorderedRecordsDoNotOpen) {
  const std::string path = dir_.Path("a.log");
  auto writer = SealedLogWriter::Open(*keyring_, "acme", path, "log:a").value();
  const uint64_t first = writer->Append("aaaa").value();
  const uint64_t second = writer->Append("bbbb").value();
  writer.reset();
  const std::string raw = ReadRaw(path);
  // Same-size records swapped: each frame is well formed, but at the other's offset.
  WriteRaw(path, raw.substr(second) + raw.substr(first, second));
  auto read = ReadSealedLog(*keyring_, "acme", path, "log:a", 0);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("offset 0"));
}

TEST_F(SealedFileTest, ATornLastRecordIsCutOffAndAppendingContinues) {
  const std::string path = dir_.Path("torn.log");
  {
    auto writer = SealedLogWriter::Open(*keyring_, "acme", path, "log:t").value();
    ASSERT_TRUE(writer->Append("one").ok());
    ASSERT_TRUE(writer->Append("two").ok());
  }
  const std::string whole = ReadRaw(path);
  // A crash in the middle of the third append: its prefix and part of its blob reached the disk.
  const std::string third = SealRecord(*keyring_, "acme", "log:t", whole.size(), "three").value();
  WriteRaw(path, whole + third.substr(0, third.size() / 2));
  auto partial = ReadSealedLog(*keyring_, "acme", path, "log:t", 0).value();
  EXPECT_EQ(partial.records.size(), 2u);  // readers stop before it
  EXPECT_EQ(partial.next_offset, whole.size());

  auto writer = SealedLogWriter::Open(*keyring_, "acme", path, "log:t").value();
  EXPECT_EQ(writer->size(), whole.size());
  ASSERT_TRUE(writer->Append("three").ok());
  auto read = ReadSealedLog(*keyring_, "acme", path, "log:t", 0).value();
  ASSERT_EQ(read.records.size(), 3u);
  EXPECT_EQ(read.records[2].plaintext, "three");
}

TEST_F(SealedFileTest, NotALogIsDataLoss) {
  const std::string path = dir_.Path("plain.txt");
  WriteRaw(path, "hello, this is a plain text file\n");
  auto writer = SealedLogWriter::Open(*keyring_, "acme", path, "log:p");
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(writer.status().message(), HasSubstr(path));
  EXPECT_EQ(ReadRaw(path), "hello, this is a plain text file\n");  // left as it was
  EXPECT_EQ(ReadSealedLog(*keyring_, "acme", path, "log:p", 0).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ScanRecordFrames(std::string("\0\0\0\x01xxxx", 8), 0).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gpugeek::crypto
