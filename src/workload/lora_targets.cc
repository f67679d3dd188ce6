#include "workload/lora_targets.h"

namespace gpugeek::workload {
namespace {

using A = LoraModuleAlias;
const std::vector<std::string> kQkv = {"q_proj", "k_proj", "v_proj"};

}  // namespace

std::vector<LoraModuleAlias> LoraModuleAliases(std::string_view model_type) {
  const size_t slash = model_type.rfind('/');
  const std::string_view t = slash == std::string_view::npos ? model_type : model_type.substr(slash + 1);
  if (t == "t5" || t == "mt5") {
    // modeling_t5.py: T5Attention q/k/v/o, T5DenseGatedActDense wi_0/wi_1/wo (wi when not gated).
    return {A{"q", {"attn.q"}},       A{"k", {"attn.k"}},     A{"v", {"attn.v"}},   A{"o", {"attn.o"}},
            A{"wi_0", {"gate_proj"}}, A{"wi_1", {"up_proj"}}, A{"wi", {"up_proj"}}, A{"wo", {"down_proj"}}};
  }
  if (t == "gpt2" || t == "gpt_bigcode") {
    return {A{"c_attn", kQkv, true}, A{"c_proj", {"o_proj", "down_proj"}}, A{"c_fc", {"up_proj"}}};
  }
  if (t == "bloom" || t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel" || t == "gpt_neox" ||
      t == "persimmon") {
    return {A{"query_key_value", kQkv, true}, A{"dense", {"o_proj"}}, A{"dense_h_to_4h", {"up_proj"}},
            A{"dense_4h_to_h", {"down_proj"}}};
  }
  if (t == "chatglm") {
    return {A{"query_key_value", kQkv, true}, A{"dense", {"o_proj"}},
            A{"dense_h_to_4h", {"gate_proj", "up_proj"}, true}, A{"dense_4h_to_h", {"down_proj"}}};
  }
  if (t == "mpt") return {A{"Wqkv", kQkv, true}, A{"out_proj", {"o_proj"}}};
  if (t == "phi-msft") {
    return {A{"Wqkv", kQkv, true}, A{"out_proj", {"o_proj"}}, A{"fc1", {"up_proj"}}, A{"fc2", {"down_proj"}}};
  }
  if (t == "codegen") {
    return {A{"qkv_proj", kQkv, true}, A{"out_proj", {"o_proj"}}, A{"fc_in", {"up_proj"}}, A{"fc_out", {"down_proj"}}};
  }
  if (t == "gptj") return {A{"out_proj", {"o_proj"}}, A{"fc_in", {"up_proj"}}, A{"fc_out", {"down_proj"}}};
  if (t == "phi") return {A{"dense", {"o_proj"}}, A{"fc1", {"up_proj"}}, A{"fc2", {"down_proj"}}};
  if (t == "opt") return {A{"out_proj", {"o_proj"}}, A{"fc1", {"up_proj"}}, A{"fc2", {"down_proj"}}};
  if (t == "starcoder2") return {A{"c_fc", {"up_proj"}}, A{"c_proj", {"down_proj"}}};
  if (t == "bert" || t == "roberta" || t == "xlm-roberta") {
    // modeling_bert.py: attention.self.query/key/value, attention.output.dense, intermediate.dense,
    // output.dense: PEFT's "dense" matches all three.
    return {A{"query", {"q_proj"}}, A{"key", {"k_proj"}}, A{"value", {"v_proj"}},
            A{"dense", {"o_proj", "up_proj", "down_proj"}}};
  }
  if (t == "distilbert") {
    return {A{"q_lin", {"q_proj"}},   A{"k_lin", {"k_proj"}}, A{"v_lin", {"v_proj"}},
            A{"out_lin", {"o_proj"}}, A{"lin1", {"up_proj"}}, A{"lin2", {"down_proj"}}};
  }
  if (t == "baichuan") return {A{"W_pack", kQkv, true}};
  if (t == "internlm2") {
    return {A{"wqkv", kQkv, true}, A{"wo", {"o_proj"}}, A{"w1", {"gate_proj"}}, A{"w3", {"up_proj"}},
            A{"w2", {"down_proj"}}};
  }
  if (t == "qwen") {
    // QWen remote code: attn.c_attn (fused, bias), attn.c_proj and mlp.c_proj; mlp.w1 / w2.
    return {A{"c_attn", kQkv, true}, A{"c_proj", {"o_proj", "down_proj"}}, A{"w1", {"up_proj"}},
            A{"w2", {"gate_proj"}}};
  }
  return {};
}

}  // namespace gpugeek::workload
