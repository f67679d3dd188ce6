#include "sim/trace_reader.h"

#include <gtest/gtest.h>

namespace gpugeek::sim {
namespace {

TEST(TraceReaderTest, ReadsElevenAndFiveColumnPodLists) {
  auto pods = ParsePodCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\r\n"
      "p1,6000,12288,1,460,V100M16|V100M32,LS,Running,1,2,1\n",
      "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[1].gpu_milli, 460);
  EXPECT_EQ((*pods)[1].gpu_spec, "V100M16|V100M32");
  EXPECT_EQ((*pods)[0].memory_mib, 16384u);
  auto multi = ParsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,88000,327680,8,1000\n", "m.csv");
  ASSERT_TRUE(multi.ok());
  EXPECT_EQ((*multi)[0].num_gpu, 8);
  EXPECT_EQ((*multi)[0].gpu_spec, "");
}

TEST(TraceReaderTest, ErrorsNameFileLineAndColumn) {
  auto bad = ParsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1000\np1,1,x,1,1000\n", "pods.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "pods.csv:3:3: memory_mib 'x' is not an integer in range");
  bad = ParsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,2,500\n", "pods.csv");
  EXPECT_EQ(bad.status().message(), "pods.csv:2:5: a GPU share (< 1000) of more than one GPU");
  bad = ParsePodCsv("name,cpu_milli,memory_mib,num_gpu\n", "pods.csv");
  EXPECT_EQ(bad.status().message(), "pods.csv:1:1: header has no column 'gpu_milli'");
  bad = ParsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1\n", "pods.csv");
  EXPECT_EQ(bad.status().message(), "pods.csv:2:4: row has 3 fields, column 4 is missing");
  auto nodes = ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,\n", "nodes.csv");
  EXPECT_EQ(nodes.status().message(), "nodes.csv:2:5: a node with GPUs needs a model, and only it");
  EXPECT_EQ(ReadPodCsv("/nonexistent/x.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(TraceReaderTest, ReadsTheRealTrace) {
  const std::string dir = std::string(GPUGEEK_SHARED_DIR) + "/traces/alibaba-gpu-v2023/csv/";
  auto nodes = ReadNodeCsv(dir + "openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(nodes->size(), 1213u);
  int64_t gpus = 0;
  for (const auto& n : *nodes) gpus += n.gpus;
  EXPECT_EQ(gpus, 6212);
  auto pods = ReadPodCsv(dir + "openb_pod_list_default.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(pods->size(), 8152u);
}

}  // namespace
}  // namespace gpugeek::sim
