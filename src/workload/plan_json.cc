#include "workload/plan_json.h"

#include "workload/memory_sources.h"

namespace gpugeek::workload {

nlohmann::json PlanCandidateToJson(const PlanCandidate& c) {
  nlohmann::json terms = nlohmann::json::array();
  const bool training = c.memory.Bytes("kv_cache") == 0 && c.prefill_seconds == 0;  // serving plans hold a KV cache
  for (const auto& t : c.memory.terms) {
    terms.push_back({{"label", t.label},
                     {"bytes", t.bytes},
                     {"formula", t.formula},
                     {"source", std::string(MemoryTermSource(t.label, training))}});
  }
  nlohmann::json others = nlohmann::json::array();
  for (const PlanCandidate::OtherLayout& o : c.other_layouts) {
    others.push_back({{"summary", o.summary}, {"seconds", o.seconds}, {"slower", o.slower}});
  }
  return {{"summary", c.Summary()},
          {"gpu_model", c.gpu->id},
          {"gpus", c.gpus},
          {"tp", c.layout.tp},
          {"pp", c.layout.pp},
          {"cp", c.layout.cp},
          {"dp", c.layout.dp},
          {"ep", c.layout.ep},
          {"virtual_stages", c.layout.virtual_stages},
          {"sequence_parallel", c.layout.sequence_parallel},
          {"zero_stage", c.zero_stage},
          {"micro_batch", c.micro_batch},
          {"recompute", std::string(RecomputeName(c.recompute))},
          {"offload", std::string(OffloadName(c.offload))},
          {"memory_per_gpu_bytes", c.memory.Total()},
          {"usable_bytes", c.usable_bytes},
          {"memory", terms},
          {"cpu_offload_bytes", c.cpu_offload_bytes},
          {"step_seconds", c.step_seconds},
          {"prefill_seconds", c.prefill_seconds},
          {"tp_comm_seconds", c.tp_comm_seconds},
          {"tokens_per_second", c.tokens_per_second},
          {"mfu", c.mfu},
          {"seconds", c.seconds},
          {"cost_micros", c.cost_micros},
          {"next_smaller", c.next_smaller},
          {"other_layouts", others},
          {"preferred_size", c.preferred_size},
          {"size_note", c.size_note}};
}

}  // namespace gpugeek::workload
