// Exact parameter counts of the families beyond ../shared/models, against testdata/models/INDEX.md:
// every row's computed count to the parameter, and each model type's reference (an exact figure
// from its owner, a safetensors header/index or a printed transformers/PyTorch count; or, where only
// a rounded owner figure exists, the exact count and its rounding). Sources beside each value; the
// "code index id" sources are public GitHub files INDEX.md describes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "workload/inference_memory.h"
#include "workload/lora.h"
#include "workload/model_config.h"
#include "workload/param_count.h"
#include "workload/planner.h"

namespace gpugeek::workload {
namespace {

const std::string kDir = std::string(GPUGEEK_SOURCE_DIR) + "/src/workload/testdata/models/";

ModelConfig Load(const std::string& file) {
  auto c = LoadModelConfig(kDir + file);
  EXPECT_TRUE(c.ok()) << file << ": " << c.status();
  return c.ok() ? *c : ModelConfig{};
}
int64_t Total(const std::string& file) { return CountParameters(Load(file)).total; }

// Rounds `n` to `step` (1e9 for "7B", 1e8 for "1.1B", ...) as an owner's rounded figure does.
double Rounded(int64_t n, double step) { return std::round(static_cast<double>(n) / step) * step; }

TEST(ParamCountFamiliesTest, EveryIndexRowMatchesExactly) {
  std::ifstream in(kDir + "INDEX.md");
  ASSERT_TRUE(in) << kDir << "INDEX.md";
  const std::regex row_re(R"(^\|\s*\d+\s*\|\s*`([^`]+)`\s*\|)");
  std::string line;
  std::set<std::string> types;
  int rows = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row_re)) continue;
    // "\|" inside a cell is a literal bar (Markdown), not a column separator.
    std::string unescaped = std::regex_replace(line, std::regex(R"(\\\|)"), "/");
    std::vector<std::string> cells;
    std::stringstream ss(unescaped);
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(cell);
    ASSERT_GE(cells.size(), 7u) << line;
    std::string digits;
    for (char ch : cells[6]) {
      if (isdigit(static_cast<unsigned char>(ch))) digits += ch;
    }
    SCOPED_TRACE(m[1].str());
    ASSERT_FALSE(digits.empty());
    const ModelConfig c = Load(m[1].str());
    EXPECT_EQ(CountParameters(c).total, std::stoll(digits));
    types.insert(c.model_type);
    ++rows;
  }
  EXPECT_GE(rows, 39);
  // One type per family folder; llava and Qwen2.5-VL read as "wrapper/inner".
  EXPECT_GE(types.size(), 32u);
}

// Exact references (INDEX.md "Reference" column, kind "exact").
TEST(ParamCountFamiliesTest, ExactReferences) {
  struct Case {
    const char* file;
    int64_t reference;
  };
  const Case cases[] = {
      // PEFT print_trainable_parameters "all params: 2,779,683,840" (code index id 54559353379).
      {"phi/phi-2.phi-msft.json", 2'779'683'840},
      // torchinfo "Total params: 1,418,270,720" (code index id 1268678394).
      {"phi/phi-1_5.phi-msft.json", 1'418'270'720},
      // PyTorch "# of params: 6050882784" for the HF GPT-J (code index id 37133021827).
      {"gptj/gpt-j-6b.json", 6'050'882'784},
      // aya-expanse-8b, same tensors: 8028033024 (Hub safetensors count, code index id 12439498600).
      {"cohere/aya-23-8B.json", 8'028'033'024},
      // OLMo-2 safetensors metadata / survey table (code index ids 63246184712, 68415208792).
      {"olmo2/OLMo-2-1124-7B.json", 7'298'617'344},
      {"olmo2/OLMo-2-1124-13B.json", 13'716'198'400},
      {"olmo2/OLMo-2-0325-32B.json", 32'234'279'936},
      // "olmo3_32b_bits = 32233522176 * 16" (code index id 53559420034).
      {"olmo3/Olmo-3.1-32B-Instruct.json", 32'233'522'176},
      // "Exact safetensors-header base count: 7,737,708,544" (code index id 60585215169).
      {"internlm2/internlm2_5-7b-chat.json", 7'737'708'544},
      {"internlm2/internlm2-chat-7b.json", 7'737'708'544},
      // torchinfo of ChatGLM3-6B "Total params: 6,243,584,000" (code index id 29309863113).
      {"chatglm/chatglm3-6b.json", 6'243'584'000},
      // stablelm-3b-4e1t model card table: 2,795,443,200 (code index id 15710750240).
      {"stablelm/stablelm-3b-4e1t.json", 2'795'443'200},
      // stablelm-2-1_6b-chat "1,644,515,328 stored" (code index id 69825381427).
      {"stablelm/stablelm-2-zephyr-1_6b.json", 1'644'515'328},
      // Qwen1.5-MoE-A2.7B "safetensors 14,315,784,192 BF16" (code index id 58413280785).
      {"qwen2_moe/Qwen1.5-MoE-A2.7B.json", 14'315'784'192},
      // deepseek-moe-16b "num_params: 16375728128" (code index id 67161653560).
      {"deepseek/deepseek-moe-16b.json", 16'375'728'128},
      // gemma-3-1b-it "Model Exact Parameter Count: 999,885,952" (code index id 71369598389).
      {"gemma3/gemma-3-1b-it.json", 999'885'952},
      // Qwen2.5-VL-7B index total_size 16,584,333,312 bf16 bytes / 2 (code index id 61082468558).
      {"qwen2_5_vl/Qwen2.5-VL-7B-Instruct.json", 16'584'333'312 / 2},
      // llava-1.5-7b-hf safetensors headers: 7,063,427,072 (code index id 69593245356).
      {"llava/llava-1.5-7b-hf.json", 7'063'427'072},
      // BertModel of bert-base shape: 109,482,240 (code index id 57171356145).
      {"bert/snowflake-arctic-embed-m.json", 109'482'240},
      // roberta-base 124,645,632 (id 62064254422); roberta-large "all params: 355,359,744" (id 62569539128).
      {"roberta/roberta-base.json", 124'645'632},
      {"roberta/roberta-large.json", 355'359'744},
      // XLMRobertaModel 278,043,648 (code index id 63703566678).
      {"xlm-roberta/xlm-roberta-base.json", 278'043'648},
      // distilbert-base shape "DistilBERT parameters: 66,362,880" (code index id 57171356145).
      {"distilbert/msmarco-distilbert-base-tas-b.json", 66'362'880},
      // mT5-small 300,176,768 (id 54040208602); mT5-base 582,401,280 (id 70561851824).
      {"mt5/mt5-small.json", 300'176'768},
      {"mt5/mt5-base.json", 582'401'280},
      // mamba-130m-hf "129,135,360 unique parameters, 242 tensors" (code index id 71363844228).
      {"mamba/mamba-130m-hf.json", 129'135'360},
      // EXAONE-4.0-32B analytic = index total_size / 2 = 32,003,216,384 (code index id 58151180185).
      {"exaone4/EXAONE-4.0-32B.json", 32'003'216'384},
      // granite-3.3-8b-instruct 8,170,864,640 (code index id 69720435308).
      {"granite/granite-3.x-8b-instruct.json", 8'170'864'640},
      // gemma-3-4b-it "4,300,079,472 parameters (safetensors metadata)" (code index id 65969618575).
      {"gemma3/gemma-3-4b-it.json", 4'300'079'472},
      // OLMoE-1B-7B-0924 "safetensors total 6,919,161,856 BF16 params" (code index id 58413280785).
      {"olmoe/OLMoE-1B-7B-0924.json", 6'919'161'856},
      // Qwen1.5-1.8B, the same tensors as Qwen-1.8B: 1,836,828,672 (code index id 65835899932).
      {"qwen/Qwen-1_8B.qwen-v1.json", 1'836'828'672},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    EXPECT_EQ(Total(c.file), c.reference);
  }
}

// Rounded owner figures: the exact count (INDEX.md) and its rounding.
TEST(ParamCountFamiliesTest, RoundedOwnerFigures) {
  // bigcode/santacoder model card: "1.1B parameter models".
  EXPECT_EQ(Total("gpt_bigcode/gpt_bigcode-santacoder.json"), 1'124'886'528);
  EXPECT_EQ(Rounded(1'124'886'528, 1e8), 1.1e9);
  // starcoder2-7b model card: "7B parameter model".
  EXPECT_EQ(Total("starcoder2/starcoder2-7b.json"), 7'173'923'840);
  EXPECT_EQ(Rounded(7'173'923'840, 1e9), 7e9);
  // InternLM model card: 7B.
  EXPECT_EQ(Total("internlm/internlm-chat-7b.json"), 7'321'948'160);
  EXPECT_EQ(Rounded(7'321'948'160, 1e9), 7e9);
  // Orion-14B model card: 14B.
  EXPECT_EQ(Total("orion/Orion-14B.json"), 14'498'703'360);
  EXPECT_EQ(Rounded(14'498'703'360, 1e9), 14e9);
  // MiniCPM README: "2.4B parameters excluding embeddings".
  const ParamCounts minicpm = CountParameters(Load("minicpm/MiniCPM-2B.json"));
  EXPECT_EQ(minicpm.total, 3'007'736'064);
  EXPECT_EQ(minicpm.non_embedding, 2'442'057'984);
  EXPECT_EQ(Rounded(minicpm.non_embedding, 1e8), 2.4e9);
  // Qwen-1.8B model card: 1.8B.
  EXPECT_EQ(Rounded(Total("qwen/Qwen-1_8B.qwen-v1.json"), 1e8), 1.8e9);
  // Snowflake arctic-embed-m model card: 110M.
  EXPECT_EQ(Rounded(Total("bert/snowflake-arctic-embed-m.json"), 1e7), 1.1e8);
}

// Derived references: the same tensors as a model with an exact figure, except the ones named.
TEST(ParamCountFamiliesTest, DerivedReferences) {
  // phi-1 = phi-1.5 (exact 1,418,270,720) with 905 fewer vocabulary rows in the embedding, the head
  // and the head's bias: 51,200 - 50,295 rows x (2 x 2048 + 1).
  EXPECT_EQ(Total("phi/phi-1.json"), 1'418'270'720 - (51'200 - 50'295) * (2 * 2048 + 1));
  // RedPajama-INCITE-3B has Pythia-2.8B's 32 x 2560 layers: Pythia model card "2,517,652,480
  // non-embedding params" (exact); its total is "2.8B" (RedPajama-INCITE model card).
  const ParamCounts rp = CountParameters(Load("gpt_neox/RedPajama-INCITE-Base-3B-v1.json"));
  EXPECT_EQ(rp.non_embedding, 2'517'652'480);
  EXPECT_EQ(rp.total, 2'775'864'320);
  EXPECT_EQ(Rounded(rp.total, 1e8), 2.8e9);
}

// Active parameters of the new MoE families.
TEST(ParamCountFamiliesTest, MoeActiveCounts) {
  // deepseek-moe-16b "num_params_active: 2828650496" (code index id 67161653560).
  EXPECT_EQ(CountParameters(Load("deepseek/deepseek-moe-16b.json")).active, 2'828'650'496);
  // Qwen1.5-MoE-A2.7B model card: "2.7B activated"; 4 of 60 experts + the shared expert and its gate.
  const int64_t active = CountParameters(Load("qwen2_moe/Qwen1.5-MoE-A2.7B.json")).active;
  EXPECT_EQ(active, 2'689'173'504);
  EXPECT_EQ(Rounded(active, 1e8), 2.7e9);
  // OLMoE model card: 1.3B active (8 of 64 experts).
  const int64_t olmoe = CountParameters(Load("olmoe/OLMoE-1B-7B-0924.json")).active;
  EXPECT_EQ(olmoe, 1'282'017'280);
  EXPECT_EQ(Rounded(olmoe, 1e8), 1.3e9);
}

// The traps each family's reader must get right.
TEST(ParamCountFamiliesTest, ReadsFamilyTraps) {
  const ModelConfig bigcode = Load("gpt_bigcode/gpt_bigcode-santacoder.json");
  EXPECT_EQ(bigcode.num_kv_heads, 1);  // multi_query
  EXPECT_TRUE(bigcode.tie_word_embeddings);
  const ModelConfig glm = Load("chatglm/chatglm3-6b.json");
  EXPECT_EQ(glm.num_kv_heads, 2);    // multi_query_group_num
  EXPECT_EQ(glm.head_dim, 128);      // kv_channels
  EXPECT_EQ(glm.vocab_size, 65024);  // padded_vocab_size
  const ModelConfig starcoder2 = Load("starcoder2/starcoder2-7b.json");
  EXPECT_TRUE(starcoder2.tie_word_embeddings);  // Starcoder2Config default
  EXPECT_EQ(starcoder2.NumSlidingLayers(), 32);
  const ModelConfig gemma3 = Load("gemma3/gemma-3-1b-it.json");
  EXPECT_EQ(gemma3.NumSlidingLayers(), 26 - 4);  // layers 6, 12, 18, 24 are global
  const ModelConfig gemma3mm = Load("gemma3/gemma-3-4b-it.json");
  EXPECT_EQ(gemma3mm.model_type, "gemma3/gemma3_text");
  EXPECT_EQ(gemma3mm.tower.kind, TowerKind::kSiglip);
  EXPECT_EQ(gemma3mm.vocab_size, 262208);          // Gemma3TextConfig default: the file does not say
  EXPECT_EQ(gemma3mm.NumSlidingLayers(), 34 - 5);  // every 6th layer global
  int64_t siglip = 0;
  for (const ParamGroup& g : ParamInventory(gemma3mm)) siglip += g.tower ? g.Total() : 0;
  // SigLIP-So400m/14 at 896 px (modeling_siglip.py, no head) + Gemma3MultiModalProjector.
  EXPECT_EQ(siglip, 416'866'032 + 2'950'272);
  const ModelConfig exaone = Load("exaone4/EXAONE-4.0-32B.json");
  EXPECT_EQ(exaone.NumSlidingLayers(), 48);
  const ModelConfig llava = Load("llava/llava-1.5-7b-hf.json");
  EXPECT_EQ(llava.model_type, "llava/llama");
  EXPECT_EQ(llava.hidden_size, 4096);  // LlamaConfig default: the text_config does not say
  EXPECT_EQ(llava.tower.kind, TowerKind::kClip);
  int64_t tower = 0;
  for (const ParamGroup& g : ParamInventory(llava)) tower += g.tower ? g.Total() : 0;
  // CLIP ViT-L/14-336 vision model 303,507,456 + projector 20,979,712 (modeling_clip / modeling_llava).
  EXPECT_EQ(tower, 303'507'456 + 20'979'712);
  const ModelConfig vl = Load("qwen2_5_vl/Qwen2.5-VL-7B-Instruct.json");
  EXPECT_EQ(vl.model_type, "qwen2_5_vl/qwen2");
  EXPECT_EQ(CountParameters(vl).total - 7'615'616'512, 676'550'144);  // Qwen2-7B text model + vision
  const ModelConfig mamba = Load("mamba/mamba-130m-hf.json");
  EXPECT_EQ(mamba.kind, ArchitectureKind::kStateSpace);
  EXPECT_EQ(mamba.ssm.StateElementsPerLayer(), 1536 * (4 + 16));
  EXPECT_EQ(Load("bert/snowflake-arctic-embed-m.json").kind, ArchitectureKind::kEncoder);
  EXPECT_EQ(Load("mt5/mt5-small.json").kind, ArchitectureKind::kEncoderDecoder);
}

// The planner sizes every new kind without failing: KV only where there is attention over a cache,
// a fixed state for SSMs.
TEST(ParamCountFamiliesTest, PlannerHandlesNewKinds) {
  const hw::GpuModel* h100 = hw::GpuCatalog::Builtin().Resolve("H100-SXM-80GB");
  ASSERT_NE(h100, nullptr);
  for (const char* file : {"mamba/mamba-130m-hf.json", "bert/snowflake-arctic-embed-m.json",
                           "llava/llava-1.5-7b-hf.json", "qwen2_5_vl/Qwen2.5-VL-7B-Instruct.json",
                           "qwen2_moe/Qwen1.5-MoE-A2.7B.json", "mt5/mt5-small.json", "phi/phi-2.phi-msft.json"}) {
    SCOPED_TRACE(file);
    const ModelConfig c = Load(file);
    for (TaskKind kind : {TaskKind::kInference, TaskKind::kLora, TaskKind::kFull}) {
      Task task{kind, 512, 8};
      auto plan = MakePlan(c, task, {PoolEntry{h100, 8, 2'000'000}});
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_FALSE(plan->candidates.empty());
    }
  }
  InferenceOptions o;
  o.context_tokens = 4096;
  o.concurrent_sequences = 4;
  const MemoryBreakdown mamba = InferenceMemory(Load("mamba/mamba-130m-hf.json"), o);
  EXPECT_EQ(mamba.Bytes("kv_cache"), 0u);
  // 4 sequences x 24 layers x 1536 x (4 + 16) state elements x 2 bytes (bf16), whatever the context.
  EXPECT_EQ(mamba.Bytes("ssm_state"), 4u * 24 * 1536 * 20 * 2);
  EXPECT_EQ(InferenceMemory(Load("bert/snowflake-arctic-embed-m.json"), o).Bytes("kv_cache"), 0u);
}

// Families read without a collected reference config: tiny configs whose counts follow, tensor by
// tensor, from each family's modelling file (named beside each case).
TEST(ParamCountFamiliesTest, FamiliesWithoutReferenceConfigsFollowTheirModellingCode) {
  struct Case {
    const char* json;
    int64_t total;
  };
  const Case cases[] = {
      // modeling_mpt.py: Wqkv 8x24 + out_proj 8x8 + up 8x32 + down 32x8, weight-only norm_1/norm_2,
      // no biases (no_bias), ALiBi (no position table), tied wte 10x8, norm_f 8.
      {R"({"model_type":"mpt","d_model":8,"n_heads":2,"n_layers":1,"expansion_ratio":4,"vocab_size":10,
           "attn_config":{"alibi":true}})",
       192 + 64 + 256 + 256 + 16 + 80 + 8},
      // modeling_codegen.py: qkv_proj 8x24 and out_proj 8x8 without bias, fc_in 8x32+32, fc_out 32x8+8,
      // ln_1 16, wte 80, ln_f 16, lm_head 80 + bias 10.
      {R"({"model_type":"codegen","n_embd":8,"n_layer":1,"n_head":2,"n_positions":16,"vocab_size":10})",
       192 + 64 + 288 + 264 + 16 + 80 + 16 + 90},
      // modeling_mamba2.py: in_proj 8 x (2x8 + 2x1x4 + 2), conv1d over 8 + 2x4 channels (k 4 + bias),
      // dt_bias / A_log / D per head, gated norm 8, out_proj 8x8, layer norm 8, embeddings 80, norm_f 8.
      {R"({"model_type":"mamba2","hidden_size":8,"num_hidden_layers":1,"vocab_size":10,"num_heads":2,
           "head_dim":4,"state_size":4,"n_groups":1,"conv_kernel":4})",
       208 + 80 + 6 + 8 + 64 + 8 + 80 + 8},
      // modeling_olmo.py: LayerNorms without parameters; q/k/v/o 4 x 64, gated MLP 3 x 8 x 16, untied.
      {R"({"model_type":"olmo","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,
           "intermediate_size":16,"vocab_size":10})",
       256 + 384 + 80 + 80},
      // modeling_persimmon.py: query_key_value 8x24+24, dense 8x8+8, dense_h_to_4h 8x16+16,
      // dense_4h_to_h 16x8+8, two LayerNorms 32, q/k LayerNorms over head_dim 4 (2 x 2 x 4),
      // final LayerNorm 16, untied embeddings and head 2 x 80.
      {R"({"model_type":"persimmon","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,
           "intermediate_size":16,"vocab_size":10})",
       216 + 72 + 144 + 136 + 32 + 16 + 16 + 160},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    auto config = ParseModelConfig(c.json);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(CountParameters(*config).total, c.total);
  }
}

// PEFT's default target modules per family (huggingface/peft@5d602fd
// src/peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
TEST(ParamCountFamiliesTest, PeftTargetNamesPerFamily) {
  struct Case {
    const char* file;
    std::vector<std::string> targets;
    int64_t trainable;  // rank 8; fused modules carry one adapter over their combined output
  };
  const int64_t r = 8;
  const Case cases[] = {
      // T5 / mT5 "q", "v": mt5-small d_model 512, 6 heads x 64, 8 + 2 x 8 attention blocks.
      {"mt5/mt5-small.json", {"q", "v"}, r * (512 + 384) * 2 * (8 + 16)},
      // gpt_neox "query_key_value": one adapter h -> 3h per layer.
      {"gpt_neox/RedPajama-INCITE-Base-3B-v1.json", {"query_key_value"}, r * (2560 + 3 * 2560) * 32},
      // chatglm "query_key_value": 4096 -> 4096 + 2 x 2 x 128.
      {"chatglm/chatglm3-6b.json", {"query_key_value"}, r * (4096 + 4608) * 28},
      // phi "q_proj", "v_proj", "fc1", "fc2" (phi-1, HF modelling names).
      {"phi/phi-1.json", {"q_proj", "v_proj", "fc1", "fc2"}, r * ((2 * 2048) * 2 + (2048 + 8192) * 2) * 24},
      // bert "query", "value".
      {"bert/snowflake-arctic-embed-m.json", {"query", "value"}, r * (2 * 768) * 2 * 12},
      // gpt_bigcode "c_attn": 2048 -> 2048 + 2 x 128 (multi-query).
      {"gpt_bigcode/gpt_bigcode-santacoder.json", {"c_attn"}, r * (2048 + 2048 + 256) * 24},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto p = CountLoraParams(Load(c.file), LoraConfig{r, c.targets});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->trainable, c.trainable);
  }
  // BLOOM "query_key_value" (../shared/models): 14336 -> 3 x 14336, 70 layers.
  auto bloom = LoadModelConfig(std::string(GPUGEEK_SHARED_DIR) + "/models/bloom/bloom-176b.json");
  ASSERT_TRUE(bloom.ok()) << bloom.status();
  auto b = CountLoraParams(*bloom, LoraConfig{r, {"query_key_value"}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->trainable, r * (14336 + 3 * 14336) * 70);
  // A name of another family is refused with the model's own names listed.
  auto wrong = CountLoraParams(Load("mt5/mt5-small.json"), LoraConfig{r, {"query_key_value"}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), testing::HasSubstr("'query_key_value'"));
}

// anchors/planner.md I1: bert-base-cased loaded in fp32 takes 413.68 MB (MiB, accelerate's unit) on CUDA,
// 413.18 MB by accelerate's estimator (huggingface/accelerate docs/source/usage_guides/model_size_estimator.md).
// Ours: 108,310,272 parameters x 4 B = 413.17 MiB, 0.12% under the measured load (within 5%).
TEST(ParamCountFamiliesTest, BertBaseCasedFp32LoadIsAnchorI1) {
  const int64_t params = Total("bert/bert-base-cased.json");
  EXPECT_EQ(params, 108'310'272);
  const double mib = static_cast<double>(params) * 4 / (1 << 20);
  EXPECT_NEAR(mib, 413.68, 0.05 * 413.68);
  EXPECT_NEAR(mib, 413.18, 0.02);
}

}  // namespace
}  // namespace gpugeek::workload
