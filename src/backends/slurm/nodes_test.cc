// slurmrestd v0.0.38 node replies: testdata/nodes_v0.0.38.json is the reply of a real Slurm 22.05.8
// cluster (../shared/infra/slurm-up.sh: 2 nodes x 4 fake A100) after `scontrol update nodename=n2
// state=down reason="gpugeek test"`.

#include "backends/slurm/nodes.h"

#include <gtest/gtest.h>

#include "common/file.h"

namespace gpugeek::backends::slurm {
namespace {

const std::string kTestdata = std::string(GPUGEEK_SOURCE_DIR) + "/src/backends/slurm/testdata/";

TEST(SlurmNodesTest, RealReplyParses) {
  auto text = ReadFileBounded(kTestdata + "nodes_v0.0.38.json", 1 << 20, "nodes reply");
  ASSERT_TRUE(text.ok()) << text.status();
  auto nodes = ParseNodes(nlohmann::json::parse(*text));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  const SlurmNode& n1 = (*nodes)[0];
  EXPECT_EQ(n1.name, "n1");
  EXPECT_EQ(n1.address, "127.0.0.1");
  EXPECT_EQ(n1.state, "idle");
  EXPECT_EQ(n1.partitions, std::vector<std::string>{"debug"});
  EXPECT_EQ(n1.gpus, (std::vector<GpuGres>{{"a100", 4}}));
  EXPECT_EQ(n1.gpus_used, (std::vector<GpuGres>{{"a100", 0}}));
  EXPECT_EQ(n1.cpus, 2);
  EXPECT_EQ(n1.memory_bytes, int64_t{4000} * 1024 * 1024);
  EXPECT_EQ(n1.Condition(), NodeCondition::kReady);
  const SlurmNode& n2 = (*nodes)[1];
  EXPECT_EQ(n2.state, "down");
  EXPECT_EQ(n2.reason, "gpugeek test");
  EXPECT_EQ(n2.Condition(), NodeCondition::kDown);
}

TEST(SlurmNodesTest, StatesMapToConditions) {
  SlurmNode n;
  n.state = "mixed";
  EXPECT_EQ(n.Condition(), NodeCondition::kReady);
  n.state_flags = {"DRAIN"};
  EXPECT_EQ(n.Condition(), NodeCondition::kDraining);
  n.state_flags = {"COMPLETING"};
  EXPECT_EQ(n.Condition(), NodeCondition::kReady);
  n.state_flags = {"DRAIN", "NOT_RESPONDING"};
  EXPECT_EQ(n.Condition(), NodeCondition::kDown);
  n.state_flags = {"MAINTENANCE"};
  EXPECT_EQ(n.Condition(), NodeCondition::kDraining);
  n.state_flags.clear();
  for (const char* lost : {"down", "error", "unknown", "future"}) {
    n.state = lost;
    EXPECT_EQ(n.Condition(), NodeCondition::kDown) << lost;
  }
  EXPECT_STREQ(NodeConditionName(NodeCondition::kDraining), "draining");
}

TEST(SlurmNodesTest, HostileRepliesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([])", "not a JSON object"},
      {R"({"nodes": 3})", "no \"nodes\" list"},
      {R"({"nodes": [{"state": "idle"}]})", "node #0 has no name"},
      {R"({"nodes": [{"name": "n1", "cpus": "2"}]})", "'n1': field 'cpus'"},
      {R"({"nodes": [{"name": "n1", "cpus": -2}]})", "'n1': field 'cpus'"},
      {R"({"nodes": [{"name": "n1", "gres": "gpu:a100:x"}]})", "'n1': gres entry"},
      {R"({"nodes": [{"name": "n1", "real_memory": 9007199254740992}]})", "'n1': field 'real_memory'"},
      {R"({"nodes": [{"name": "n1", "state_flags": [1]}]})", "'n1': field 'state_flags'"},
  };
  for (const auto& [body, want] : cases) {
    auto r = ParseNodes(nlohmann::json::parse(body));
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(want), std::string_view::npos) << r.status();
  }
  auto refused = ParseNodes(nlohmann::json::parse(R"({"errors": [{"error": "Unauthorized"}], "nodes": []})"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpugeek::backends::slurm
