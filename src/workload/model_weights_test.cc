// Exact weights for an architecture the config reader does not know, from safetensors files and an
// index written here in the real format, and the plan the generic path makes from them.

#include "workload/model_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "workload/model_source.h"
#include "workload/param_count.h"
#include "workload/planner.h"

namespace gpugeek::workload {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};

int64_t ElementBytes(const std::string& dtype) { return dtype == "F32" ? 4 : dtype == "F8_E4M3" ? 1 : 2; }

// Writes a safetensors file (header + zero data) the way safetensors.torch.save_file lays it out.
void WriteSafetensors(const fs::path& path, const std::vector<Tensor>& tensors) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    int64_t n = 1;
    std::string shape;
    for (int64_t d : t.shape) {
      n *= d;
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    const uint64_t bytes = static_cast<uint64_t>(n * ElementBytes(t.dtype));
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" + t.dtype +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream out(path, std::ios::binary);
  out << prefix << header << std::string(offset, '\0');
}

// A made-up architecture ("acme_lm"): 2 layers of hidden 64, vocab 100, an untied head, a rotary
// buffer and fp8 scales in the checkpoint that are not parameters.
class GenericModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("acme_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::vector<Tensor> a = {{"model.embed.weight", "BF16", {100, 64}}, {"model.final_ln.weight", "BF16", {64}}};
    std::vector<Tensor> b = {{"lm_head.weight", "BF16", {100, 64}}};
    for (int i = 0; i < 2; ++i) {
      const std::string p = "model.blocks." + std::to_string(i) + ".";
      auto& shard = i == 0 ? a : b;
      shard.push_back({p + "mix.wqkvo.weight", "BF16", {256, 64}});
      shard.push_back({p + "ffn.w_in.weight", "F8_E4M3", {128, 64}});
      shard.push_back({p + "ffn.w_in.weight_scale_inv", "F32", {1, 1}});
      shard.push_back({p + "ffn.w_out.weight", "BF16", {64, 128}});
      shard.push_back({p + "ln.weight", "F32", {64}});
      shard.push_back({p + "mix.rotary_emb.inv_freq", "F32", {16}});
    }
    WriteSafetensors(dir_ / "model-00001-of-00002.safetensors", a);
    WriteSafetensors(dir_ / "model-00002-of-00002.safetensors", b);
    std::string map;
    for (const auto& [file, ts] :
         {std::pair{"model-00001-of-00002.safetensors", a}, std::pair{"model-00002-of-00002.safetensors", b}}) {
      for (const Tensor& t : ts) map += (map.empty() ? "" : ",") + ("\"" + t.name + "\":\"" + file + "\"");
    }
    std::ofstream(dir_ / "model.safetensors.index.json")
        << "{\"metadata\":{\"total_size\":123},\"weight_map\":{" << map << "}}";
    std::ofstream(dir_ / "config.json") << R"({"model_type":"acme_lm","hidden_size":64,"num_hidden_layers":2,
        "num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"torch_dtype":"bfloat16"})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Parameters by construction: embed 6400 + head 6400 + final norm 64 + 2 x (16384 + 8192 + 8192 + 64).
  static constexpr int64_t kParams = 6400 + 6400 + 64 + 2 * (256 * 64 + 128 * 64 + 64 * 128 + 64);
  fs::path dir_;
};

TEST_F(GenericModelTest, SumsParameterShapesAndLeavesOutBuffers) {
  for (const fs::path& p : {dir_, dir_ / "model.safetensors.index.json"}) {
    SCOPED_TRACE(p.string());
    auto w = SummarizeSafetensors(p.string());
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->exact);
    EXPECT_EQ(w->files, 2);
    EXPECT_EQ(w->parameters, kParams);
    EXPECT_EQ(w->parameters_by_dtype.at("F8_E4M3"), 2 * 128 * 64);
    EXPECT_EQ(w->bytes_by_dtype.at("F32"), 2u * 64 * 4);
    EXPECT_EQ(w->layers, 2);
    EXPECT_EQ(w->excluded_tensors, 4);  // 2 inv_freq + 2 weight_scale_inv
    EXPECT_THAT(DescribeWeights(*w), testing::HasSubstr("rotary inv_freq buffer"));
    EXPECT_THAT(DescribeWeights(*w), testing::HasSubstr("quantization scale"));
  }
  // One shard on its own.
  auto one = SummarizeSafetensors((dir_ / "model-00002-of-00002.safetensors").string());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->parameters, 6400 + 256 * 64 + 128 * 64 + 64 * 128 + 64);
}

TEST_F(GenericModelTest, UnknownArchitectureIsPlannedFromHeaders) {
  // The config alone is refused, naming the type and the way out.
  auto alone = LoadModelConfig((dir_ / "config.json").string());
  ASSERT_FALSE(alone.ok());
  EXPECT_THAT(alone.status().message(), testing::HasSubstr("'acme_lm'"));
  EXPECT_THAT(alone.status().message(), testing::HasSubstr("safetensors"));
  for (const fs::path& p : {dir_, dir_ / "model.safetensors.index.json", dir_ / "config.json"}) {
    SCOPED_TRACE(p.string());
    auto m = LoadModelForPlan(p.string());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->from_headers);
    EXPECT_EQ(CountParameters(m->config).total, kParams);
    EXPECT_EQ(m->config.hidden_size, 64);
    EXPECT_EQ(m->config.num_layers, 2);
    EXPECT_THAT(m->note, testing::HasSubstr("from safetensors headers"));
    EXPECT_THAT(m->note, testing::HasSubstr("estimates"));
  }
  auto m = LoadModelForPlan(dir_.string());
  ASSERT_TRUE(m.ok());
  const hw::GpuModel* gpu = hw::GpuCatalog::Builtin().Resolve("L40S");
  ASSERT_NE(gpu, nullptr);
  for (TaskKind kind : {TaskKind::kInference, TaskKind::kLora, TaskKind::kFull}) {
    auto plan = MakePlan(m->config, Task{kind, 256, 4}, {PoolEntry{gpu, 1, 1'000'000}});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_FALSE(plan->candidates.empty());
  }
}

TEST_F(GenericModelTest, IndexWithoutShardsIsAnEstimate) {
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  auto w = SummarizeSafetensors(dir_.string());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->exact);
  EXPECT_EQ(w->index_total_size, 123u);
  EXPECT_THAT(w->source, testing::HasSubstr("an estimate"));
  // Names without shapes cannot be planned tensor by tensor: the plan asks for the shards.
  auto m = LoadModelForPlan(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), testing::HasSubstr("put the shard files beside the index"));
}

TEST_F(GenericModelTest, KnownArchitectureIsCrossChecked) {
  std::ofstream(dir_ / "config.json") << R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,
      "num_attention_heads":4,"vocab_size":100,"intermediate_size":128})";
  auto m = LoadModelForPlan((dir_ / "config.json").string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->from_headers);
  ASSERT_TRUE(m->weights.has_value());
  EXPECT_THAT(m->note, testing::HasSubstr("they differ"));
}

TEST_F(GenericModelTest, HostileIndexIsRefused) {
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"metadata":{"total_size":4},"weight_map":{"w":"../../etc/passwd"}})";
  auto w = SummarizeSafetensors(dir_.string());
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), testing::HasSubstr("must be a *.safetensors file name beside the index"));
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"metadata":{"total_size":0},"weight_map":{}})";
  EXPECT_THAT(SummarizeSafetensors(dir_.string()).status().message(), testing::HasSubstr("empty 'weight_map'"));
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map":{"w":"a.safetensors"}})";
  EXPECT_THAT(SummarizeSafetensors(dir_.string()).status().message(), testing::HasSubstr("metadata.total_size"));
  EXPECT_EQ(SummarizeSafetensors((dir_ / "absent").string()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadModelForPlan((dir_ / "absent").string()).status().code(), absl::StatusCode::kNotFound);
  // A checkpoint of buffers only has nothing to plan.
  fs::remove(dir_ / "model.safetensors.index.json");
  fs::remove(dir_ / "model-00001-of-00002.safetensors");
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  WriteSafetensors(dir_ / "model.safetensors", {{"rotary.inv_freq", "F32", {8}}});
  auto empty = LoadModelForPlan(dir_.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), testing::HasSubstr("no parameter tensors"));
}

}  // namespace
}  // namespace gpugeek::workload
