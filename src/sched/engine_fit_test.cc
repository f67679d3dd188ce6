#include "sched/engine_fit.h"

#include <gtest/gtest.h>

#include <map>

#include "sched/framework.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

Request OnnxInt8(std::string id) {
  Request r = Req(std::move(id), Shape(0, 1, 1000));
  r.engine = {.format = "onnx-int8", .runtimes = {"onnxruntime", "tensorrt"}};
  return r;
}

TEST(EngineFitTest, OnlyNodesWithARuntimeOfTheFormatAreChosen) {
  NodeSpec trt = Node("trt", 8000, 4, "T4");
  trt.engines = {"libtorch", "tensorrt"};
  NodeSpec cv = Node("cv", 8000, 1, "T4");  // the tightest fit: BestFit alone would take it
  cv.engines = {"opencv-dnn"};
  auto c = Cluster::Create({Node("bare", 8000, 8, "T4"), cv, trt});
  ASSERT_TRUE(c.ok());
  auto fw = BestFitFramework(&*c);
  ASSERT_NE(fw, nullptr);
  AcceptAllBinder binder;
  auto d = fw->Schedule(OnnxInt8("r"), binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 2);
  // fp32 ONNX also runs in OpenCV's DNN module: now the tightest node qualifies.
  Request fp32 = Req("fp32", Shape(0, 1, 1000));
  fp32.engine = {.format = "onnx", .runtimes = {"onnxruntime", "opencv-dnn", "tensorrt"}};
  d = fw->Schedule(fp32, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 1);
  // Without an engine the request may go anywhere (the bare node is the only one with room left for 8).
  d = fw->Schedule(Req("plain", Shape(0, 8, 1000)), binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 0);
}

TEST(EngineFitTest, TheReasonNamesTheFormatTheRuntimesAndWhatTheNodeHas) {
  NodeSpec cv = Node("cv", 8000, 2, "T4");
  cv.engines = {"libtorch", "opencv-dnn"};
  auto c = Cluster::Create({cv, Node("bare", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  auto fw = BestFitFramework(&*c);
  ASSERT_NE(fw, nullptr);
  AcceptAllBinder binder;
  auto d = fw->Schedule(OnnxInt8("r"), binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  std::map<NodeIndex, std::string> why;
  for (const NodeReason& reason : d->reasons) why[reason.node] = reason.plugin + ": " + reason.reason;
  ASSERT_EQ(why.size(), 2u);
  EXPECT_EQ(why[0], "EngineFit: engine onnx-int8 needs onnxruntime or tensorrt; this node has libtorch, opencv-dnn");
  EXPECT_EQ(why[1], "EngineFit: engine onnx-int8 needs onnxruntime or tensorrt; this node has no engine runtime");
}

}  // namespace
}  // namespace gpugeek::sched
