#pragma once
// The module names PEFT and the modelling code use per family, mapped onto the tensor inventory's
// names (workload/param_count.h), so `--lora-targets` accepts what a user copies from a PEFT config.
//
// Sources: huggingface/peft src/peft/utils/constants.py
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: t5/mt5 "q","v"; bloom, falcon, gpt_neox,
// chatglm "query_key_value"; gpt2 and gpt_bigcode "c_attn"; mpt "Wqkv"; codegen "qkv_proj"; bert,
// roberta, xlm-roberta "query","value"; phi "q_proj","v_proj","fc1","fc2"; ...) and each family's
// modelling file for the other names (dense, c_proj, fc_in, W_pack, wqkv, q_lin, ...).

#include <string>
#include <string_view>
#include <vector>

namespace gpugeek::workload {

struct LoraModuleAlias {
  std::string name;                  // as PEFT / the checkpoint names the module
  std::vector<std::string> members;  // inventory names it stands for
  // true: one nn.Linear whose output is the members' concatenated (q/k/v fused: one adapter of
  // r·(in + sum of outs)); false: the name matches several separate modules (BERT's "dense").
  bool fused = false;
};

// The aliases of `model_type` (a wrapper's "outer/inner" type uses the inner one); empty when the
// family's modules carry the inventory's names.
std::vector<LoraModuleAlias> LoraModuleAliases(std::string_view model_type);

}  // namespace gpugeek::workload
