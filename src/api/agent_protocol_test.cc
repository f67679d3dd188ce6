#include "api/agent_protocol.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::api {
namespace {

Assignment SampleAssignment() {
  Assignment a;
  a.job_id = "j-000007";
  a.epoch = 3;
  a.node_rank = 1;
  a.num_nodes = 2;
  a.gpu_indices = {4, 5, 6, 7};
  a.gpu_milli = 1000;
  a.cpu_milli = 16000;
  a.memory_bytes = uint64_t{64} << 30;
  a.master_addr = "10.0.0.7";
  a.master_port = 29500;
  a.run = "torchrun train.py";
  a.env = {{"HF_HOME", "/cache"}};
  a.checkpoint_dir = "/ckpt/j7";
  a.grace_ms = 5000;
  a.restart_count = 2;
  return a;
}

TEST(AgentProtocol, HeartbeatReplyRoundTrips) {
  HeartbeatReply reply;
  reply.assignments.push_back(SampleAssignment());
  reply.assignments.push_back(SampleAssignment());
  reply.assignments[1].cancel = true;
  auto back = HeartbeatReplyFromJson(ToJson(reply));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->assignments.size(), 2u);
  const Assignment& a = back->assignments[0];
  EXPECT_EQ(a.job_id, "j-000007");
  EXPECT_EQ(a.epoch, 3);
  EXPECT_EQ(a.gpu_indices, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(a.memory_bytes, uint64_t{64} << 30);
  EXPECT_EQ(a.env.at("HF_HOME"), "/cache");
  EXPECT_EQ(a.restart_count, 2);
  EXPECT_FALSE(a.cancel);
  EXPECT_TRUE(back->assignments[1].cancel);
}

TEST(AgentProtocol, HeartbeatRoundTripsWithReportsAndLogs) {
  Heartbeat h;
  h.node = "node-a";
  h.workloads.push_back({"j-1", 2, WorkloadPhase::kExited, 0, 0, ""});
  h.workloads.push_back({"j-2", 1, WorkloadPhase::kExited, std::nullopt, 9, "killed"});
  h.logs.push_back({"j-1", 0, 128, "step 10 loss 1.25\n"});
  auto back = HeartbeatFromJson(ToJson(h));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->workloads.size(), 2u);
  EXPECT_EQ(back->workloads[0].exit_code, 0);
  EXPECT_EQ(back->workloads[1].exit_code, std::nullopt);
  EXPECT_EQ(back->workloads[1].term_signal, 9);
  ASSERT_EQ(back->logs.size(), 1u);
  EXPECT_EQ(back->logs[0].offset, 128u);
  EXPECT_EQ(back->logs[0].data, "step 10 loss 1.25\n");
}

TEST(AgentProtocol, RegistrationCarriesTheInventory) {
  auto spec = hw::ParseEmulateSpec("8xH100-SXM-80GB");
  ASSERT_TRUE(spec.ok()) << spec.status();
  Registration r;
  r.node = "node-a";
  r.address = "127.0.0.1";
  r.capacity_type = "spot";
  r.inventory = hw::BuildEmulatedInventory(*spec, "node-a", hw::HostInfo{});
  auto back = RegistrationFromJson(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->inventory.gpus.size(), 8u);
  EXPECT_EQ(back->capacity_type, "spot");
  EXPECT_EQ(back->metrics_address, "");
}

TEST(AgentProtocol, RegistrationCarriesTheMetricsAddress) {
  Registration r;
  r.node = "node-a";
  r.address = "10.0.0.7";
  r.metrics_address = "10.0.0.7:9471";
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j.at("metrics_address"), "10.0.0.7:9471");
  auto back = RegistrationFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metrics_address, "10.0.0.7:9471");
  EXPECT_EQ(back->address, "10.0.0.7");

  // Optional: a registration from an agent that serves no metrics (or predates them) has none.
  nlohmann::json old = j;
  old.erase("metrics_address");
  auto without = RegistrationFromJson(old);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->metrics_address, "");

  old["metrics_address"] = 9471;
  auto bad = RegistrationFromJson(old);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "registration.metrics_address:")) << bad.status();
}

TEST(AgentProtocol, BadFieldsAreNamed) {
  nlohmann::json j = ToJson(HeartbeatReply{{SampleAssignment()}, false});
  j["assignments"][0]["epoch"] = "three";
  auto bad = HeartbeatReplyFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "heartbeat_reply.assignments[0].epoch: must be an integer"))
      << bad.status();

  j = ToJson(HeartbeatReply{{SampleAssignment()}, false});
  j["assignments"][0]["node_rank"] = 2;  // num_nodes is 2
  EXPECT_FALSE(HeartbeatReplyFromJson(j).ok());

  nlohmann::json hb = {{"node", "n"}, {"workloads", {{{"job_id", "j"}, {"epoch", 1}, {"phase", "dancing"}}}}};
  auto bad_phase = HeartbeatFromJson(hb);
  ASSERT_FALSE(bad_phase.ok());
  EXPECT_TRUE(absl::StartsWith(bad_phase.status().message(), "heartbeat.workloads[0].phase:")) << bad_phase.status();

  EXPECT_FALSE(RegistrationFromJson({{"node", "n"}}).ok());  // inventory is required
  EXPECT_FALSE(RegistrationFromJson(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace gpugeek::api
