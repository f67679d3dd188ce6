#pragma once
// EngineFit: a request that loads a compiled engine (Request::engine, e.g. an onnx-int8 graph) fits only
// nodes that report a runtime able to run it (NodeSpec::engines, the agent's `--engines`; api/engines.h).

#include <string>
#include <vector>

#include "sched/plugin.h"

namespace gpugeek::sched {

class EngineFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "EngineFit"; }
  // Keeps the candidates with one of shape.engine->runtimes; all of them when the shape needs no engine.
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  // "engine onnx-int8 needs onnxruntime or tensorrt; this node has opencv-dnn", or "" when node `n` fits.
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

}  // namespace gpugeek::sched
