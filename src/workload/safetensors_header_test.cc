// The safetensors header reader on bytes in the real format (huggingface/safetensors docs "Format":
// u64 little-endian header length, JSON header, data), well-formed and hostile.

#include "workload/safetensors_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpugeek::workload {
namespace {

// 8-byte little-endian length + header + `data_bytes` zero bytes, as safetensors.torch.save_file writes.
std::string File(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

TEST(SafetensorsHeaderTest, ReadsTensorsAndMetadata) {
  // A bf16 [4, 3] weight, an f32 [3] bias and a scalar, laid out back to back (24 + 12 + 4 bytes),
  // padded with spaces as the writer aligns the data to 8 bytes.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[4,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]},"s":{"dtype":"F32","shape":[],"data_offsets":[36,40]}}  )";
  const std::string bytes = File(header, 40);
  auto h = ParseSafetensorsHeader(bytes, bytes.size());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->header_bytes, header.size());
  EXPECT_EQ(h->metadata.at("format"), "pt");
  ASSERT_EQ(h->tensors.size(), 3u);
  int64_t elements = 0;
  for (const SafetensorsTensor& t : h->tensors) elements += t.Elements();
  EXPECT_EQ(elements, 4 * 3 + 3 + 1);
  // The file length is optional: without it the offsets are checked against the shapes only.
  EXPECT_TRUE(ParseSafetensorsHeader(bytes, 0).ok());
}

TEST(SafetensorsHeaderTest, DtypeSizes) {
  EXPECT_EQ(SafetensorsDtypeBytes("BF16"), 2);
  EXPECT_EQ(SafetensorsDtypeBytes("F8_E4M3"), 1);
  EXPECT_EQ(SafetensorsDtypeBytes("I64"), 8);
  EXPECT_EQ(SafetensorsDtypeBytes("F4"), 0);  // sub-byte: no per-element size
  EXPECT_EQ(SafetensorsDtypeBytes("bf16"), 0);
}

TEST(SafetensorsHeaderTest, RefusesMalformedHeaders) {
  struct Case {
    std::string bytes;
    const char* message;
  };
  const auto one = [](const std::string& entry, size_t data) {
    return File(std::string(R"({"t":)") + entry + "}", data);
  };
  std::string huge(8, '\0');
  huge[7] = 0x7f;  // a length of ~9e18 bytes
  const Case cases[] = {
      {"abc", "shorter than the 8-byte length prefix"},
      {huge + "{}", "outside"},
      {File("{}", 0).substr(0, 9), "runs past"},
      {File("[1,2]", 0), "JSON object"},
      {File("{\"t\":", 0), "syntax"},
      {one(R"({"dtype":"Q4","shape":[2],"data_offsets":[0,2]})", 2), "unsupported dtype 'Q4'"},
      {one(R"({"dtype":"F16","shape":[2,-1],"data_offsets":[0,4]})", 4), "'shape'"},
      {one(R"({"dtype":"F16","shape":[2],"data_offsets":[4,0]})", 4), "end 0 < begin 4"},
      {one(R"({"dtype":"F16","shape":[2],"data_offsets":[0,6]})", 6), "shape x F16 holds 4"},
      {one(R"({"dtype":"F16","shape":[2]})", 4), "'data_offsets'"},
      {one(R"({"dtype":"F16","shape":[2],"data_offsets":[0,4]})", 2), "past the file's 2 data bytes"},
      {one(R"({"dtype":"F16","shape":[1099511627776,1099511627776],"data_offsets":[0,4]})", 4), "2^40"},
      {File(
           R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
           6),
       "overlaps"},
      {File(R"({"__metadata__":{"k":1}})", 0), "must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    auto h = ParseSafetensorsHeader(c.bytes, c.bytes.size());
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(h.status().message(), testing::HasSubstr(c.message));
  }
}

TEST(SafetensorsHeaderTest, ReadsOnlyTheHeaderFromAFile) {
  const std::string path = ::testing::TempDir() + "/header_only.safetensors";
  const std::string header = R"({"w":{"dtype":"F32","shape":[256,256],"data_offsets":[0,262144]}})";
  {
    std::ofstream out(path, std::ios::binary);
    out << File(header, 262144);
  }
  auto h = ReadSafetensorsHeader(path);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 1u);
  EXPECT_EQ(h->tensors[0].Elements(), 65536);
  auto missing = ReadSafetensorsHeader(path + ".absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gpugeek::workload
