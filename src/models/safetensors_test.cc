#include "models/safetensors.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::models {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string t = (std::filesystem::temp_directory_path() / "gpugeek-safetensors-XXXXXX").string();
  if (::mkdtemp(t.data()) == nullptr) std::abort();
  return t;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string Floats(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), 4 * v.size()); }

// A file of an 8-byte length, `header` and `data`.
std::string RawFile(const std::string& header, const std::string& data = "") {
  uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

absl::Status ParseRaw(const std::string& file) { return ParseSafetensorsHeader(file, file.size()).status(); }

TEST(SafetensorsTest, WritesTheReferenceLayoutByteForByte) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteSafetensors(dir + "/a.safetensors", {{.spec = {.name = "a", .dtype = Dtype::kF32, .shape = {2}},
                                                         .bytes = Floats({1.0f, -2.0f})}})
                  .ok());
  // 54 bytes of JSON padded with 2 spaces to 56, so the data section starts 8-byte aligned at byte 64.
  std::string header = R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  ASSERT_EQ(header.size(), 54u);
  EXPECT_EQ(Slurp(dir + "/a.safetensors"), RawFile(header + "  ", Floats({1.0f, -2.0f})));
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.safetensors.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsTest, ReadsBackEveryTensorItsShapeAndTheMetadata) {
  std::string dir = TempDir();
  std::vector<TensorData> tensors = {
      {.spec = {.name = "w", .dtype = Dtype::kF32, .shape = {2, 3}}, .bytes = Floats({1, 2, 3, 4, 5, 6})},
      {.spec = {.name = "h", .dtype = Dtype::kF16, .shape = {2}}, .bytes = std::string("\x00\x3c\x00\xc0", 4)},
      {.spec = {.name = "step", .dtype = Dtype::kI64, .shape = {}}, .bytes = std::string("\x07\0\0\0\0\0\0\0", 8)},
      {.spec = {.name = "empty", .dtype = Dtype::kU8, .shape = {0, 4}}, .bytes = ""},
  };
  ASSERT_TRUE(WriteSafetensors(dir + "/m.safetensors", tensors, {{"format", "pt"}}).ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir + "/m.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsHeader& h = file->header();
  EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(h.header_bytes % 8, 0u);
  EXPECT_EQ(h.data_bytes, 24u + 4 + 8);
  ASSERT_EQ(h.tensors.size(), 4u);
  const TensorInfo* w = h.Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->Elements(), 6u);
  EXPECT_EQ(w->begin, 0u);
  EXPECT_EQ(h.Find("step")->Elements(), 1u);
  EXPECT_EQ(h.Find("empty")->Bytes(), 0u);
  for (const TensorData& t : tensors) EXPECT_EQ(*file->Read(t.spec.name), t.bytes) << t.spec.name;
  EXPECT_EQ(file->Read("nope").status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsTest, RefusesEveryMalformedHeaderNamingWhatIsWrong) {
  const std::string ok_tensor = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data = Floats({1, 2});
  struct Case {
    std::string file;
    std::string error;
  };
  std::string huge(8, '\0');
  uint64_t big = 100'000'001;
  std::memcpy(huge.data(), &big, 8);
  const std::vector<Case> cases = {
      {std::string("\x05\0\0", 3), "the file is 3 bytes"},
      {RawFile(""), "header length 0 is outside"},
      {huge + "{}", "header length 100000001 is outside 1..100000000"},
      {RawFile("{}").substr(0, 9), "runs past the end"},
      {RawFile("{\"a\":"), "JSON syntax error"},
      {RawFile("[1,2]"), "must be a JSON object"},
      {RawFile("{" + ok_tensor + "," + ok_tensor + "}", data), "/a: the key appears twice"},
      {RawFile(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", data), "a.dtype: unknown dtype \"F33\""},
      {RawFile(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), "a.shape: -2 is not a dimension"},
      {RawFile(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
       "a.data_offsets: [0, 8] spans 8 bytes; dtype F32 and shape need 12"},
      {RawFile(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data),
       "a.shape: element count overflows"},
      {RawFile(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           data),
       "b.data_offsets: overlaps the tensor before it"},
      {RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data),
       "a.data_offsets: leaves a hole of 4"},
      {RawFile("{" + ok_tensor + "}", data + "xx"), "tensors end at byte 8 of a data section of 10 bytes"},
      {RawFile("{" + ok_tensor + "}", "1234"), "tensors end at byte 8 of a data section of 4 bytes"},
      {RawFile(R"({"__metadata__":{"k":1}})"), "__metadata__.k: must be a string"},
      {RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data), "a.x: unknown field"},
      {RawFile(R"({"a":{"dtype":"F32","shape":[[[[2]]]],"data_offsets":[0,8]}})", data), "nesting is deeper than 3"},
      {RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", data),
       "a.data_offsets: must be [begin, end]"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseRaw(c.file);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.error;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error));
  }
  EXPECT_TRUE(ParseRaw(RawFile("{" + ok_tensor + "}", data)).ok());
}

TEST(SafetensorsTest, TheWriterRefusesBadTensorsAndLeavesNoHalfFile) {
  std::string dir = TempDir();
  std::string path = dir + "/m.safetensors";
  TensorSpec a{.name = "a", .dtype = Dtype::kF32, .shape = {2}};
  EXPECT_THAT(std::string(SafetensorsWriter::Create(path, {a, a}).status().message()),
              HasSubstr("tensor a: named twice"));
  EXPECT_FALSE(SafetensorsWriter::Create(path, {{.name = "__metadata__"}}).ok());
  EXPECT_FALSE(SafetensorsWriter::Create(path, {{.name = "n", .shape = {-1}}}).ok());
  {
    absl::StatusOr<SafetensorsWriter> w =
        SafetensorsWriter::Create(path, {a, {.name = "b", .dtype = Dtype::kI8, .shape = {3}}});
    ASSERT_TRUE(w.ok());
    EXPECT_THAT(std::string(w->Append("1234567").message()),
                HasSubstr("tensor a: 7 bytes given; dtype F32 and its shape need 8"));
    ASSERT_TRUE(w->Append(Floats({1, 2})).ok());
    EXPECT_THAT(std::string(w->Finish().message()), HasSubstr("1 of 2 tensors written; append b next"));
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));  // an abandoned writer removes its temporary file
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsTest, OpenNamesTheFileItCannotRead) {
  std::string dir = TempDir();
  EXPECT_EQ(SafetensorsFile::Open(dir + "/none.safetensors").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(dir + "/bad.safetensors") << "not a model";
  absl::Status s = SafetensorsFile::Open(dir + "/bad.safetensors").status();
  EXPECT_THAT(std::string(s.message()), HasSubstr(dir + "/bad.safetensors: safetensors header: header length"));
  EXPECT_FALSE(SafetensorsFile::Open(dir).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek::models
