// Parameter counts against ../shared/models/INDEX.md: every config with an exact count must match
// to the parameter; MoE active counts against INDEX.md's "Active-parameter counts" paragraph.

#include "workload/param_count.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "workload/model_config.h"

namespace gpugeek::workload {
namespace {

const std::string kModels = std::string(GPUGEEK_SHARED_DIR) + "/models";

struct IndexRow {
  std::string file;
  std::optional<int64_t> exact;  // nullopt for "n/a"
};

// Reads the table of INDEX.md: column 2 is the file, column 6 the exact computed count.
std::vector<IndexRow> ReadIndex() {
  std::ifstream in(kModels + "/INDEX.md");
  std::vector<IndexRow> rows;
  std::string line;
  const std::regex row_re(R"(^\|\s*\d+\s*\|\s*`([^`]+)`\s*\|)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row_re)) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(cell);
    // cells[0] is empty (before the first '|'); cells[6] is "Exact (computed)".
    IndexRow row{m[1].str(), std::nullopt};
    std::string exact;
    for (char ch : cells.at(6)) {
      if (isdigit(static_cast<unsigned char>(ch))) exact += ch;
    }
    if (!exact.empty()) row.exact = std::stoll(exact);
    rows.push_back(row);
  }
  return rows;
}

TEST(ParamCountTest, EveryIndexedConfigMatchesExactly) {
  const std::vector<IndexRow> rows = ReadIndex();
  ASSERT_GE(rows.size(), 50u) << "INDEX.md table not found under " << kModels;
  int matched = 0;
  for (const IndexRow& row : rows) {
    SCOPED_TRACE(row.file);
    auto config = LoadModelConfig(kModels + "/" + row.file);
    if (!row.exact) {
      // "n/a" rows: the wrapper Llama 4 is read through text_config; the DeepSeek inference format
      // and the diffusers UNet are not transformers configs and must be refused with a reason.
      if (row.file.find("Llama-4") != std::string::npos) {
        ASSERT_TRUE(config.ok()) << config.status();
      } else {
        ASSERT_FALSE(config.ok());
        EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(config.status().message(), testing::HasSubstr("model_type"));
      }
      continue;
    }
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(CountParameters(*config).total, *row.exact);
    ++matched;
  }
  EXPECT_GE(matched, 48);
}

// INDEX.md, paragraph "Active-parameter counts computed with the same formulas".
TEST(ParamCountTest, MoeActiveCounts) {
  struct Case {
    const char* file;
    int64_t active;
    bool without_input_embedding;  // OpenAI's gpt-oss convention
  };
  const Case cases[] = {
      {"mistral/Mixtral-8x7B-v0.1.json", 12'879'925'248, false},
      {"mistral/Mixtral-8x22B-v0.1.json", 39'152'031'744, false},
      {"qwen/Qwen3-30B-A3B.json", 3'353'032'704, false},
      {"qwen/Qwen3-235B-A22B.json", 22'190'763'520, false},
      {"gpt-oss/gpt-oss-20b.json", 3'608'307'264, true},
      {"gpt-oss/gpt-oss-120b.json", 5'132'849'472, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto config = LoadModelConfig(kModels + "/" + c.file);
    ASSERT_TRUE(config.ok()) << config.status();
    ParamCounts n = CountParameters(*config);
    EXPECT_EQ(c.without_input_embedding ? n.active_without_input_embedding : n.active, c.active);
  }
}

// INDEX.md: DeepSeek-V3 ~37.55B active incl. embeddings (report: 37B); MTP module 11.5B
// (README_WEIGHTS.md) is excluded from the 671B total. DeepSeek-V2-Lite ~2.66B incl. input embedding.
TEST(ParamCountTest, DeepseekActiveAndMtp) {
  auto v3 = LoadModelConfig(kModels + "/deepseek/DeepSeek-V3.json");
  ASSERT_TRUE(v3.ok()) << v3.status();
  ParamCounts n = CountParameters(*v3);
  EXPECT_NEAR(n.active / 1e9, 37.55, 0.01);
  // README_WEIGHTS.md rounds the MTP module to "11.5B"; the module as specified (one MoE layer,
  // two input RMSNorms, the 2h -> h projection, the head norm) holds 11.61B: within 1%.
  EXPECT_NEAR(n.mtp / 1e9, 11.5, 0.115);
  auto lite = LoadModelConfig(kModels + "/deepseek/DeepSeek-V2-Lite.json");
  ASSERT_TRUE(lite.ok()) << lite.status();
  ParamCounts l = CountParameters(*lite);
  EXPECT_NEAR(l.active / 1e9, 2.66, 0.01);
  EXPECT_NEAR(l.active_without_input_embedding / 1e9, 2.45, 0.01);
}

// Non-embedding counts published by the model owners (INDEX.md "Official count" column).
TEST(ParamCountTest, NonEmbeddingMatchesReports) {
  // Gemma report (arXiv:2403.08295) Table 1: 1,981,884,416 non-embedding parameters.
  auto gemma = LoadModelConfig(kModels + "/gemma/gemma-2b.json");
  ASSERT_TRUE(gemma.ok());
  EXPECT_EQ(CountParameters(*gemma).non_embedding, 1'981'884'416);
  // Gemma 2 report (arXiv:2408.00118): 2,024,517,888 non-embedding parameters for the 2B model.
  auto gemma2 = LoadModelConfig(kModels + "/gemma/gemma-2-2b-it.json");
  ASSERT_TRUE(gemma2.ok());
  EXPECT_EQ(CountParameters(*gemma2).non_embedding, 2'024'517'888);
  // Qwen2.5-7B model card: 6.53B non-embedding (embedding and untied head both excluded).
  auto qwen = LoadModelConfig(kModels + "/qwen/Qwen2.5-7B.json");
  ASSERT_TRUE(qwen.ok());
  EXPECT_NEAR(CountParameters(*qwen).non_embedding / 1e9, 6.53, 0.005);
}

// Llama 4 Scout model card: 109B total with the vision tower, 17B active. The text model alone
// holds ~107.8B; its active count is the card's 17B.
TEST(ParamCountTest, Llama4ThroughTextConfig) {
  auto scout = LoadModelConfig(kModels + "/llama/Llama-4-Scout-17B-16E-Instruct.json");
  ASSERT_TRUE(scout.ok()) << scout.status();
  EXPECT_EQ(scout->model_type, "llama4/llama4_text");
  ParamCounts n = CountParameters(*scout);
  EXPECT_GT(n.total, 107'000'000'000);
  EXPECT_LT(n.total, 109'000'000'000);
  EXPECT_NEAR(n.active / 1e9, 17.2, 0.1);
}

// GPT-2 large is not in models/ (INDEX.md "Not collected"): n_embd 1280, n_layer 36, n_head 20;
// exact 774,030,080.
TEST(ParamCountTest, Gpt2LargeFromFields) {
  auto c = ParseModelConfig(R"({"model_type":"gpt2","n_embd":1280,"n_layer":36,"n_head":20,
                                "n_positions":1024,"vocab_size":50257})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(CountParameters(*c).total, 774'030'080);
}

// examples/gpt/config.json, the model examples/gpt/train.py trains: PyTorch counts 3,290,624 parameters
// (tied head once) with `/usr/bin/python3 examples/gpt/model.py examples/gpt/config.json`;
// examples/gpt/tests/test_param_count.py compares the planner's count with PyTorch's live.
TEST(ParamCountTest, ExampleGptEqualsPyTorch) {
  auto c = LoadModelConfig(std::string(GPUGEEK_SOURCE_DIR) + "/examples/gpt/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(CountParameters(*c).total, 3'290'624);
}

TEST(ParamCountTest, FalconMultiQueryTrap) {
  // Both Falcon-7B files (RW keys and in-library keys with num_kv_heads 71) mean one KV head.
  for (const char* f : {"falcon/falcon-7b.json", "falcon/falcon-7b-finetune-hfformat.json"}) {
    auto c = LoadModelConfig(kModels + "/" + f);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->num_kv_heads, 1) << f;
  }
}

TEST(ModelConfigTest, ErrorsNameFieldAndModelType) {
  auto missing = ParseModelConfig(R"({"model_type":"llama","num_hidden_layers":2})");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), testing::HasSubstr("'llama'"));
  EXPECT_THAT(missing.status().message(), testing::HasSubstr("'hidden_size'"));

  auto unsupported = ParseModelConfig(R"({"model_type":"rwkv","hidden_size":8})");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_THAT(unsupported.status().message(), testing::HasSubstr("'rwkv'"));
  EXPECT_THAT(unsupported.status().message(), testing::HasSubstr("unsupported"));

  auto wrong_type = ParseModelConfig(
      R"({"model_type":"qwen2","hidden_size":"big","num_hidden_layers":2,"vocab_size":10,
          "intermediate_size":4,"num_attention_heads":2})");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_THAT(wrong_type.status().message(), testing::HasSubstr("'hidden_size' must be a number"));

  EXPECT_FALSE(ParseModelConfig("[1,2]").ok());
  EXPECT_FALSE(ParseModelConfig("{").ok());
  EXPECT_FALSE(ParseModelConfig(R"({"hidden_size":8})").ok());
  // GQA group must divide the heads.
  EXPECT_FALSE(ParseModelConfig(R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,
      "vocab_size":10,"intermediate_size":4,"num_attention_heads":8,"num_key_value_heads":3})")
                   .ok());
  // Absurd sizes are refused before any arithmetic can overflow.
  auto huge = ParseModelConfig(R"({"model_type":"mixtral","hidden_size":4000000,"num_hidden_layers":60000,
      "vocab_size":10,"intermediate_size":4000000,"num_attention_heads":8,"num_local_experts":60000,
      "num_experts_per_tok":2})");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), testing::HasSubstr("implausible"));
}

TEST(ModelConfigTest, ReadsTraps) {
  auto qwen3 = LoadModelConfig(kModels + "/qwen/Qwen3-4B.json");
  ASSERT_TRUE(qwen3.ok());
  EXPECT_EQ(qwen3->head_dim, 128);  // not 2560 / 32 = 80
  auto gemma2 = LoadModelConfig(kModels + "/gemma/gemma-2-9b.json");
  ASSERT_TRUE(gemma2.ok());
  EXPECT_EQ(gemma2->NumSlidingLayers(), 21);  // alternate layers of 42
  EXPECT_TRUE(gemma2->tie_word_embeddings);
  auto oss = LoadModelConfig(kModels + "/gpt-oss/gpt-oss-120b.json");
  ASSERT_TRUE(oss.ok());
  EXPECT_EQ(oss->NumSlidingLayers(), 18);
  EXPECT_EQ(oss->sliding_window, 128);
  auto v3 = LoadModelConfig(kModels + "/deepseek/DeepSeek-V3.json");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->quant_method, "fp8");
  EXPECT_EQ(v3->quant_block_size, 128);
  EXPECT_EQ(v3->mtp_layers, 1);
}

}  // namespace
}  // namespace gpugeek::workload
