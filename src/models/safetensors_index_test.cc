#include "models/safetensors_index.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/quantize.h"

namespace gpugeek::models {
namespace {

using ::testing::HasSubstr;

std::string Zeros(size_t floats) { return std::string(4 * floats, '\0'); }

class SafetensorsIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / "gpugeek-index-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    ASSERT_TRUE(WriteSafetensors(dir_ + "/model-00001-of-00002.safetensors",
                                 {{.spec = {.name = "a.weight", .shape = {4, 32}}, .bytes = Zeros(128)},
                                  {.spec = {.name = "a.bias", .shape = {4}}, .bytes = Zeros(4)}})
                    .ok());
    ASSERT_TRUE(WriteSafetensors(dir_ + "/model-00002-of-00002.safetensors",
                                 {{.spec = {.name = "b.weight", .shape = {2, 64}}, .bytes = Zeros(128)}})
                    .ok());
    std::ofstream(dir_ + "/config.json") << R"({"model_type": "toy"})";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteIndex(const std::string& text) { std::ofstream(dir_ + "/model.safetensors.index.json") << text; }
  std::string Error() { return std::string(OpenShardedSafetensors(dir_).status().message()); }

  const std::string good_ =
      R"({"metadata": {"total_size": 1040}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
          "a.bias": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}})";
  std::string dir_;
};

TEST_F(SafetensorsIndexTest, OpensTheShardsItNamesAndChecksTotalSize) {
  WriteIndex(good_);
  absl::StatusOr<ShardedSafetensors> m = OpenShardedSafetensors(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->index.total_size, 4u * (128 + 4 + 128));
  EXPECT_EQ(m->index.Shards(),
            (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(m->shards.size(), 2u);
  EXPECT_TRUE(OpenShardedSafetensors(dir_ + "/model.safetensors.index.json").ok());
}

TEST_F(SafetensorsIndexTest, RefusesAnIndexThatDisagreesWithItsShards) {
  WriteIndex(R"({"metadata": {"total_size": 1}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
      "a.bias": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(Error(), HasSubstr("metadata.total_size is 1 but the shards' tensors hold 1040 bytes"));
  WriteIndex(R"({"metadata": {"total_size": 1040}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
      "b.weight": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(Error(), HasSubstr("model-00001-of-00002.safetensors holds a.bias, which weight_map does not list"));
  WriteIndex(R"({"metadata": {"total_size": 1040}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
      "a.bias": "model-00002-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(Error(), HasSubstr("holds a.bias, which weight_map puts in model-00002-of-00002.safetensors"));
  WriteIndex(R"({"metadata": {"total_size": 1040}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
      "a.bias": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors",
      "c.weight": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(Error(),
              HasSubstr("weight_map puts c.weight in model-00002-of-00002.safetensors, which does not hold it"));
  WriteIndex(R"({"metadata": {"total_size": 0}, "weight_map": {"x": "../../etc/passwd.safetensors"}})");
  EXPECT_THAT(Error(),
              HasSubstr("weight_map.x: shard \"../../etc/passwd.safetensors\" must be a *.safetensors file name"));
  WriteIndex(R"({"weight_map": {}})");
  EXPECT_THAT(Error(), HasSubstr("metadata.total_size: missing"));
  WriteIndex(R"({"metadata": {"total_size": 0}, "weight_map": {"x": "missing.safetensors"}})");
  EXPECT_THAT(Error(), HasSubstr("missing.safetensors: cannot open"));
}

TEST_F(SafetensorsIndexTest, QuantisesEveryShardAndWritesANewIndexBesideTheOtherFiles) {
  WriteIndex(good_);
  std::string out = dir_ + "/int8";
  absl::StatusOr<QuantizeReport> r = QuantizeShardedSafetensors(dir_, out, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->quantised_bytes_before, 4u * 256);
  EXPECT_EQ(r->quantised_bytes_after, 256u + 4 * (4 + 2));
  absl::StatusOr<ShardedSafetensors> q = OpenShardedSafetensors(out);  // the new index agrees with its shards
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->index.weight_map.at("a.weight.qscale"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(q->index.total_size, 256u + 4 * (4 + 2) + 16);
  EXPECT_TRUE(std::filesystem::exists(out + "/config.json"));
  EXPECT_THAT(std::string(QuantizeShardedSafetensors(dir_, dir_, {}).status().message()),
              HasSubstr("the model's own folder"));
}

}  // namespace
}  // namespace gpugeek::models
