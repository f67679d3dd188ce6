// Engine-aware placement end to end: a real server and two agents, one reporting the engine runtimes this
// machine's linker cache holds (`--engines auto`: Debian's libopencv-dnn and libtorch, from
// scripts/install-deps.sh) and one reporting none. A model pushed to the registry holds an ONNX graph; a
// job naming it (`weights:`) with `engine: onnx` lands only on the node with a runtime, learns the format and
// the runtime from GPUGEEK_ENGINE / GPUGEEK_ENGINE_RUNTIMES, and runs the graph there with OpenCV's DNN
// module. A second such job waits rather than take the free node without a runtime; an `engine: onnx-int8`
// job, which no node here can run, is refused at submission naming each node's runtimes, and an `engine:
// torchscript` one because the model holds no TorchScript file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using subprocess::WriteFile;

// Writes DIR/model.onnx: y = x @ W with W = [[1, 2], [3, 4]] (opset 13), through Debian's python3-onnx.
constexpr char kMakeOnnx[] = R"(import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array(np.array([[1, 2], [3, 4]], dtype=np.float32), "w")
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1] + "/model.onnx")
)";

// What a deployment runs: the model's ONNX file through the runtime the node reported.
constexpr char kServe[] = R"(import os
import numpy as np
print("engine", os.environ["GPUGEEK_ENGINE"], "runtimes", os.environ["GPUGEEK_ENGINE_RUNTIMES"])
assert "opencv-dnn" in os.environ["GPUGEEK_ENGINE_RUNTIMES"].split(",")
import cv2
net = cv2.dnn.readNetFromONNX(os.path.join(os.environ["GPUGEEK_MODEL_DIR"], "model.onnx"))
net.setInput(np.array([[1, 1]], dtype=np.float32))
print("y", net.forward().tolist())
)";

class EngineEndToEnd : public testing::PoolFixture {
 protected:
  void SetUp() override {
    const std::string agent_url = StartPool("engine_e2e", 2);
    ASSERT_FALSE(agent_url.empty());
    const std::string pid = std::to_string(::getpid());
    with_ = "node-engines-" + pid;
    without_ = "node-bare-" + pid;
    StartAgent(agent_url, with_, "1xL4", {"--engines", "auto"});
    StartAgent(agent_url, without_, "1xL4", {"--engines", "none"});
  }
  std::string with_, without_;
};

TEST_F(EngineEndToEnd, AnEngineJobLandsWhereARuntimeOfItsFormatIsAndRunsThere) {
  // The nodes' reports, as the API and `gpugeek node` show them.
  auto node = Client().Get("/v1/nodes/" + with_);
  ASSERT_TRUE(node.ok()) << node.status();
  const std::vector<std::string> engines = (*node)["engines"];
  EXPECT_TRUE(std::find(engines.begin(), engines.end(), "opencv-dnn") != engines.end()) << node->dump();
  EXPECT_TRUE(std::find(engines.begin(), engines.end(), "libtorch") != engines.end()) << node->dump();
  EXPECT_EQ((*Client().Get("/v1/nodes/" + without_))["engines"], nlohmann::json::array());
  EXPECT_TRUE(absl::StrContains(Cli({"node", without_}).second, "\n  engines:   -\n"));

  // The model: an ONNX graph, pushed to the registry.
  const fs::path model = dir_ / "matmul";
  fs::create_directories(model);
  WriteFile(dir_ / "make_onnx.py", kMakeOnnx);
  auto [made, made_out] =
      subprocess::Run({"/usr/bin/python3", (dir_ / "make_onnx.py").string(), model.string()}, dir_ / "make.log");
  ASSERT_EQ(made, 0) << made_out;
  auto [code, out] = Cli({"model", "push", model.string(), "--name", "matmul", "--tag", "v1", "-m", "onnx", "--cache",
                          (dir_ / "cache").string()});
  ASSERT_EQ(code, 0) << out;

  WriteFile(dir_ / "serve.py", kServe);
  const std::string spec = fmt::format(
      "name: NAME\nresources: {{accelerators: L4:1}}\nweights: matmul@v1\nengine: ENGINE\n"
      "run: /usr/bin/python3 {} && sleep 300\n",
      (dir_ / "serve.py").string());
  const auto spec_for = [&](const std::string& name, const std::string& engine) {
    std::string s = spec;
    s.replace(s.find("NAME"), 4, name);
    s.replace(s.find("ENGINE"), 6, engine);
    WriteFile(dir_ / (name + ".yaml"), s);
    return dir_ / (name + ".yaml");
  };

  const std::string first = Submit(spec_for("serve-a", "onnx"));
  ASSERT_FALSE(first.empty());
  const std::string log = WaitForLog(first, "y ");
  EXPECT_TRUE(absl::StrContains(log, "engine onnx runtimes opencv-dnn\ny [[4.0, 6.0]]\n")) << log;
  auto job = Client().Get("/v1/jobs/" + first);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["allocation"]["members"][0]["node"], with_) << job->dump();

  // The only node with a runtime is full: the second waits, though the node without one is free.
  const std::string second = Submit(spec_for("serve-b", "onnx"));
  ASSERT_FALSE(second.empty());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  job = Client().Get("/v1/jobs/" + second);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["state"], "PENDING") << job->dump();
  EXPECT_TRUE(absl::StrContains(job->dump(),
                                "engine onnx needs onnxruntime or opencv-dnn or tensorrt; this node "
                                "has no engine runtime"))
      << job->dump();

  // No node here runs a QDQ graph: refused at submission, each node's reason named.
  auto [refused, refusal] = Cli({"submit", spec_for("serve-int8", "onnx-int8").string()});
  EXPECT_NE(refused, 0);
  EXPECT_TRUE(absl::StrContains(refusal,
                                "engine onnx-int8 needs onnxruntime or tensorrt; this node has no "
                                "engine runtime"))
      << refusal;
  EXPECT_TRUE(absl::StrContains(refusal, "engine onnx-int8 needs onnxruntime or tensorrt; this node has ")) << refusal;

  // The model holds no TorchScript file: a job loading one from it is refused, though a node has libtorch.
  auto [no_file, no_file_out] = Cli({"submit", spec_for("serve-ts", "torchscript").string()});
  EXPECT_NE(no_file, 0);
  EXPECT_TRUE(absl::StrContains(no_file_out,
                                "weights: matmul@v1: engine torchscript: the version holds no "
                                "torchscript file (none of its 1 files ends in .pt, .pth, .torchscript)"))
      << no_file_out;

  // Cancelling the first makes room: the second takes the node with the runtime.
  ASSERT_EQ(Cli({"cancel", first}).first, 0);
  EXPECT_TRUE(absl::StrContains(WaitForLog(second, "y "), "y [[4.0, 6.0]]\n"));
  job = Client().Get("/v1/jobs/" + second);
  EXPECT_EQ((*job)["allocation"]["members"][0]["node"], with_) << job->dump();
  ASSERT_EQ(Cli({"cancel", second}).first, 0);
}

}  // namespace
}  // namespace gpugeek
