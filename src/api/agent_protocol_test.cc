#include "api/agent_protocol.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

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
  a.gpu_uuids = {"GPU-4", "GPU-5", "GPU-6", "GPU-7"};
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
  a.file_archives = {{"data", std::string(64, 'a')}, {"", std::string(64, 'b')}};
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
  EXPECT_EQ(a.gpu_uuids, (std::vector<std::string>{"GPU-4", "GPU-5", "GPU-6", "GPU-7"}));
  EXPECT_EQ(a.memory_bytes, uint64_t{64} << 30);
  EXPECT_EQ(a.env.at("HF_HOME"), "/cache");
  EXPECT_EQ(a.restart_count, 2);
  EXPECT_EQ(a.file_archives, (std::vector<FileArchive>{{"data", std::string(64, 'a')}, {"", std::string(64, 'b')}}));
  EXPECT_FALSE(a.cancel);
  EXPECT_TRUE(back->assignments[1].cancel);
}

TEST(AgentProtocol, HeartbeatRoundTripsWithReportsAndLogs) {
  Heartbeat h;
  h.node = "node-a";
  h.workloads.push_back({"j-1", 2, WorkloadPhase::kExited, 0, 0, ""});
  h.workloads.push_back({"j-2", 1, WorkloadPhase::kExited, std::nullopt, 9, "killed"});
  h.workloads.push_back(
      {.job_id = "j-3", .epoch = 1, .phase = WorkloadPhase::kRunning, .node_rank = 1, .checkpoint_step = 1200});
  h.workloads[1].ended_ms_ago = 4'250;
  h.logs.push_back({"j-1", 0, 128, "step 10 loss 1.25\n"});
  auto back = HeartbeatFromJson(ToJson(h));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->workloads.size(), 3u);
  EXPECT_EQ(back->workloads[0].exit_code, 0);
  EXPECT_EQ(back->workloads[0].checkpoint_step, std::nullopt);
  EXPECT_EQ(back->workloads[2].checkpoint_step, 1200);
  EXPECT_EQ(back->workloads[2].node_rank, 1);
  EXPECT_EQ(back->workloads[1].exit_code, std::nullopt);
  EXPECT_EQ(back->workloads[1].term_signal, 9);
  EXPECT_EQ(back->workloads[1].ended_ms_ago, 4'250);
  EXPECT_EQ(back->workloads[0].ended_ms_ago, 0);
  ASSERT_EQ(back->logs.size(), 1u);
  EXPECT_EQ(back->logs[0].offset, 128u);
  EXPECT_EQ(back->logs[0].data, "step 10 loss 1.25\n");
}

TEST(AgentProtocol, ACheckpointStepOutOfRangeIsRefusedByName) {
  Heartbeat h;
  h.node = "node-a";
  h.workloads.push_back({.job_id = "j-1", .epoch = 1, .checkpoint_step = 5});
  nlohmann::json j = ToJson(h);
  j["workloads"][0]["checkpoint_step"] = -1;
  auto back = HeartbeatFromJson(j);
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::StrContains(back.status().message(), "checkpoint_step")) << back.status();
  j["workloads"][0]["checkpoint_step"] = "12";
  EXPECT_FALSE(HeartbeatFromJson(j).ok());
  // An exit more than a week ago, or in the future, is refused by name too.
  j["workloads"][0]["checkpoint_step"] = 12;
  for (int64_t ago : {int64_t{-1}, kMaxEndedAgoMs + 1}) {
    j["workloads"][0]["ended_ms_ago"] = ago;
    back = HeartbeatFromJson(j);
    ASSERT_FALSE(back.ok()) << ago;
    EXPECT_TRUE(absl::StrContains(back.status().message(), "ended_ms_ago")) << back.status();
  }
}

TEST(AgentProtocol, MetricReportsTravelConsecutiveAndFinite) {
  Heartbeat h;
  h.node = "n1";
  WorkloadReport w{.job_id = "j-1", .epoch = 2};
  w.metrics = {{.seq = 4, .step = 10, .value = 0.5}, {.seq = 5, .step = 20, .value = -1.25}};
  h.workloads.push_back(w);
  nlohmann::json j = ToJson(h);
  auto back = HeartbeatFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->workloads[0].metrics.size(), 2u);
  EXPECT_EQ(back->workloads[0].metrics[1].seq, 5);
  EXPECT_EQ(back->workloads[0].metrics[1].step, 20);
  EXPECT_EQ(back->workloads[0].metrics[1].value, -1.25);

  j["workloads"][0]["metrics"][1]["seq"] = 7;
  back = HeartbeatFromJson(j);
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::StrContains(back.status().message(), "metrics[1].seq: must follow 4")) << back.status();
  j["workloads"][0]["metrics"][1]["seq"] = 5;
  j["workloads"][0]["metrics"][0]["value"] = "0.5";
  back = HeartbeatFromJson(j);
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::StrContains(back.status().message(), "metrics[0].value: must be a finite number")) << back.status();

  Assignment a{.job_id = "j-1", .epoch = 2};
  a.metrics_stored = 6;
  a.platform_env = {{"GPUGEEK_TRIAL_ID", "3"}, {"GPUGEEK_PARAMS", R"({"lr":0.1})"}};
  auto assignment = AssignmentFromJson(ToJson(a));
  ASSERT_TRUE(assignment.ok()) << assignment.status();
  EXPECT_EQ(assignment->metrics_stored, 6);
  EXPECT_EQ(assignment->platform_env, a.platform_env);
  // Only the trial's variables: a server (or an impostor) cannot steer the loader through this map.
  a.platform_env = {{"LD_PRELOAD", "/tmp/x.so"}};
  EXPECT_EQ(AssignmentFromJson(ToJson(a)).status().message(),
            "assignment.platform_env.LD_PRELOAD: not a platform variable (GPUGEEK_EXPERIMENT, GPUGEEK_TRIAL_ID, "
            "GPUGEEK_PARAMS, PORT, GPUGEEK_SERVICE, GPUGEEK_SERVICE_VERSION)");
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

// The defect: log bytes travelled as a JSON string, so output that was not UTF-8 was altered on the way
// (U+FFFD) and the offsets that followed no longer matched the file. Base64 carries every byte.
TEST(AgentProtocol, LogChunkBytesRoundTripExactlyThroughJsonText) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  bytes += "\xff\xfehello world\n";  // invalid UTF-8 then text, as printf '\xff\xfe...' writes it
  bytes += "\xc3";                   // a sequence cut short at the end
  bytes += std::string("\0mid\0", 5);
  Heartbeat h;
  h.node = "node-a";
  h.logs.push_back({.job_id = "j-1", .node_rank = 1, .offset = 7, .data = bytes, .epoch = 4});
  const std::string text = ToJson(h).dump();  // what the HTTP layer sends
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(parsed.is_discarded());
  ASSERT_TRUE(parsed.at("logs").at(0).contains("data_b64"));
  EXPECT_FALSE(parsed.at("logs").at(0).contains("data"));
  auto back = HeartbeatFromJson(parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->logs.size(), 1u);
  EXPECT_EQ(back->logs[0].data.size(), 256u + 14u + 1u + 5u);
  EXPECT_EQ(back->logs[0].data, bytes);
  EXPECT_EQ(back->logs[0].offset, 7u);
  EXPECT_EQ(back->logs[0].epoch, 4);
  EXPECT_EQ(back->logs[0].node_rank, 1);
}

TEST(AgentProtocol, LogDataIsStandardPaddedBase64) {
  Heartbeat h;
  h.node = "n";
  h.logs.push_back({.job_id = "j", .data = "hi\xff"});
  EXPECT_EQ(ToJson(h).at("logs").at(0).at("data_b64"), "aGn/");
  h.logs[0].data = "a";
  EXPECT_EQ(ToJson(h).at("logs").at(0).at("data_b64"), "YQ==");
}

TEST(AgentProtocol, BadLogDataIsNamed) {
  nlohmann::json hb = {{"node", "n"}, {"logs", {{{"job_id", "j"}, {"data_b64", "not base64!"}}}}};
  auto bad = HeartbeatFromJson(hb);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "heartbeat.logs[0].data_b64: is not valid base64");

  hb["logs"][0].erase("data_b64");
  hb["logs"][0]["data"] = "plain";  // the old key is no longer part of the protocol
  bad = HeartbeatFromJson(hb);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "heartbeat.logs[0].data: is not a known field");
}

TEST(AgentProtocol, LogChunksHoldAtMostOneMebibyte) {
  Heartbeat h;
  h.node = "n";
  h.logs.push_back({.job_id = "j", .data = std::string(kMaxLogChunkBytes, 'x')});
  auto at_limit = HeartbeatFromJson(ToJson(h));
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(at_limit->logs[0].data.size(), size_t{1} << 20);

  h.logs[0].data.push_back('y');
  auto over = HeartbeatFromJson(ToJson(h));
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(absl::StartsWith(over.status().message(), "heartbeat.logs[0].data_b64: decodes to ")) << over.status();
}

TEST(AgentProtocol, InstanceIdTravelsInRegistrationAndHeartbeat) {
  auto id = NewInstanceId();
  ASSERT_TRUE(id.ok()) << id.status();
  Registration r;
  r.node = "node-a";
  r.instance_id = *id;
  auto reg = RegistrationFromJson(ToJson(r));
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(reg->instance_id, *id);

  Heartbeat h;
  h.node = "node-a";
  h.instance_id = *id;
  auto hb = HeartbeatFromJson(ToJson(h));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->instance_id, *id);

  nlohmann::json bad = ToJson(h);
  bad["instance_id"] = "xyz";
  EXPECT_EQ(HeartbeatFromJson(bad).status().message(), "heartbeat.instance_id: must hold only hex digits");
  bad["instance_id"] = std::string(129, 'a');
  EXPECT_EQ(HeartbeatFromJson(bad).status().message(), "heartbeat.instance_id: must be at most 128 bytes");
  bad.erase("instance_id");
  auto old = HeartbeatFromJson(bad);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->instance_id, "");
}

TEST(AgentProtocol, InstanceIdsAre128RandomBitsInHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto id = NewInstanceId();
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_EQ(id->size(), 32u);
    for (char c : *id) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << *id;
    seen.insert(*id);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(AgentProtocol, RegistrationReplyCarriesTheLease) {
  const nlohmann::json defaults = ToJson(RegistrationReply{});
  EXPECT_EQ(defaults, (nlohmann::json{{"heartbeat_interval_ms", 1000}, {"lease_ms", 3000}, {"fence_grace_ms", 2000}}));
  auto back = RegistrationReplyFromJson(
      ToJson(RegistrationReply{.heartbeat_interval_ms = 500, .lease_ms = 1500, .fence_grace_ms = 0}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->heartbeat_interval_ms, 500);
  EXPECT_EQ(back->lease_ms, 1500);
  EXPECT_EQ(back->fence_grace_ms, 0);

  auto old = RegistrationReplyFromJson({{"heartbeat_interval_ms", 1000}});  // a server from before leases
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->lease_ms, 3000);
  EXPECT_EQ(old->fence_grace_ms, 2000);

  auto bad = RegistrationReplyFromJson({{"lease_ms", 50}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "registration_reply.lease_ms: = 50 must be between 100 and 3600000");
  bad = RegistrationReplyFromJson({{"fence_grace_ms", -1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "registration_reply.fence_grace_ms:")) << bad.status();
}

TEST(AgentProtocol, RegistrationReplyCarriesTheExecToken) {
  RegistrationReply reply;
  reply.exec_token = std::string(64, 'a');
  EXPECT_EQ(ToJson(reply)["exec_token"], std::string(64, 'a'));
  auto back = RegistrationReplyFromJson(ToJson(reply));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->exec_token, std::string(64, 'a'));
  EXPECT_FALSE(ToJson(RegistrationReply{}).contains("exec_token"));  // none: not on the wire
  auto bad = RegistrationReplyFromJson({{"exec_token", std::string(257, 'a')}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "registration_reply.exec_token: is longer than 256 bytes");
}

TEST(AgentProtocol, NodeNamesFollowTheNameRule) {
  Heartbeat h;
  for (const std::string& good : std::vector<std::string>{"n", "node-a", "gpu01.rack_2", "9", std::string(128, 'a')}) {
    h.node = good;
    EXPECT_TRUE(HeartbeatFromJson(ToJson(h)).ok()) << good;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "-a", ".a", "a b", "a/b", "n\xc3\xa9", std::string(129, 'a')}) {
    h.node = bad;
    auto s = HeartbeatFromJson(ToJson(h)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StartsWith(s.message(), "heartbeat.node: ")) << s;
  }
  const auto colon = RegistrationFromJson(ToJson(Registration{.node = "a:b"})).status();
  EXPECT_EQ(colon.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(colon.message(), "registration.node: ")) << colon;
}

TEST(AgentProtocol, GpuUuidsAreBounded) {
  nlohmann::json j = ToJson(SampleAssignment());
  j["gpu_uuids"] = std::vector<std::string>(64, "GPU-x");
  auto ok = AssignmentFromJson(j);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->gpu_uuids.size(), 64u);

  j["gpu_uuids"] = std::vector<std::string>(65, "GPU-x");
  EXPECT_EQ(AssignmentFromJson(j).status().message(), "assignment.gpu_uuids: has 65 entries; at most 64 are allowed");
  j["gpu_uuids"] = {"GPU-0", std::string(129, 'u')};
  EXPECT_EQ(AssignmentFromJson(j).status().message(), "assignment.gpu_uuids[1]: must be 1-128 bytes");
  j["gpu_uuids"] = {"GPU-0", 1};
  EXPECT_EQ(AssignmentFromJson(j).status().message(), "assignment.gpu_uuids[1]: must be a string");
  j["gpu_uuids"] = "GPU-0";
  EXPECT_EQ(AssignmentFromJson(j).status().message(), "assignment.gpu_uuids: must be an array of strings");
  j.erase("gpu_uuids");
  j["gpu_indices"] = {0};  // replaced by gpu_uuids
  EXPECT_EQ(AssignmentFromJson(j).status().message(), "assignment.gpu_indices: is not a known field");
}

TEST(AgentProtocol, HeartbeatCountsAndMessagesAreBounded) {
  Heartbeat h;
  h.node = "n";
  h.workloads.push_back({.job_id = "j", .epoch = 1, .message = std::string(4096, 'm')});
  ASSERT_TRUE(HeartbeatFromJson(ToJson(h)).ok());
  h.workloads[0].message.push_back('!');
  EXPECT_EQ(HeartbeatFromJson(ToJson(h)).status().message(),
            "heartbeat.workloads[0].message: is 4097 bytes; at most 4096 are allowed");

  h.workloads.assign(4096, WorkloadReport{.job_id = "j", .epoch = 1});
  ASSERT_TRUE(HeartbeatFromJson(ToJson(h)).ok());
  h.workloads.push_back(h.workloads[0]);
  EXPECT_EQ(HeartbeatFromJson(ToJson(h)).status().message(),
            "heartbeat.workloads: has 4097 entries; at most 4096 are allowed");

  h.workloads.clear();
  h.logs.assign(4097, LogChunk{.job_id = "j", .data = "x"});
  EXPECT_EQ(HeartbeatFromJson(ToJson(h)).status().message(),
            "heartbeat.logs: has 4097 entries; at most 4096 are allowed");

  h.logs.clear();
  h.samples.assign(65, hw::GpuSample{});
  EXPECT_EQ(HeartbeatFromJson(ToJson(h)).status().message(),
            "heartbeat.samples: has 65 entries; at most 64 are allowed");
}

// The fuzzer's seeds are current protocol (a seed the decoders refuse explores only the error paths).
TEST(AgentProtocol, FuzzSeedsDecode) {
  const auto load = [](const std::string& name) {
    std::ifstream in(std::string(GPUGEEK_SOURCE_DIR) + "/src/api/testdata/agent_protocol_corpus/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  };
  auto hb = HeartbeatFromJson(load("heartbeat.json"));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->logs.at(0).data, "step 1\n");
  auto binary = HeartbeatFromJson(load("heartbeat_binary_log.json"));
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ(binary->logs.at(0).data, std::string("\xff\xfe") + "hello world\n" + std::string("\0\x80\xc3", 3));
  auto metrics = HeartbeatFromJson(load("heartbeat_metrics.json"));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->workloads.at(0).metrics.at(1).value, 2.5);
  auto reply = HeartbeatReplyFromJson(load("reply.json"));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->assignments.at(0).gpu_uuids.size(), 2u);
  auto lease = RegistrationReplyFromJson(load("registration_reply.json"));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->lease_ms, 3000);
}

}  // namespace
}  // namespace gpugeek::api

namespace gpugeek::api {
namespace {

TEST(AgentProtocol, ImagesTravelInRegistrationAndAssignment) {
  auto spec = hw::ParseEmulateSpec("1xL4");
  ASSERT_TRUE(spec.ok()) << spec.status();
  Registration r;
  r.node = "node-a";
  r.inventory = hw::BuildEmulatedInventory(*spec, "node-a", hw::HostInfo{});
  r.images = {"localhost/busybox:latest", "localhost/pytorch:bookworm"};
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j.at("images"), nlohmann::json::array({"localhost/busybox:latest", "localhost/pytorch:bookworm"}));
  auto back = RegistrationFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->images, r.images);
  j.erase("images");  // optional: an agent without containers
  ASSERT_TRUE(RegistrationFromJson(j).ok());
  EXPECT_EQ(RegistrationFromJson(j)->images, std::vector<std::string>{});

  j["images"] = {"busybox"};
  EXPECT_EQ(RegistrationFromJson(j).status().message(),
            "registration.images[0]: 'busybox' is not canonical; send localhost/busybox:latest");
  j["images"] = {"localhost/b:latest", "localhost/a:latest"};
  EXPECT_EQ(RegistrationFromJson(j).status().message(),
            "registration.images[1]: images must be sorted, without duplicates");
  j["images"] = {"localhost/a;b:latest"};
  EXPECT_TRUE(absl::StartsWith(RegistrationFromJson(j).status().message(),
                               "registration.images[0]: 'localhost/a;b:latest' is not an image reference"))
      << RegistrationFromJson(j).status();

  Assignment a = SampleAssignment();
  a.image = "localhost/busybox:latest";
  nlohmann::json aj = ToJson(HeartbeatReply{{a}, false});
  EXPECT_EQ(aj["assignments"][0].at("image"), "localhost/busybox:latest");
  auto reply = HeartbeatReplyFromJson(aj);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->assignments[0].image, "localhost/busybox:latest");
  aj["assignments"][0]["image"] = "busybox";
  EXPECT_EQ(HeartbeatReplyFromJson(aj).status().message(),
            "heartbeat_reply.assignments[0].image: must be a canonical image reference (NAME:TAG with a domain)");
  aj["assignments"][0].erase("image");
  ASSERT_TRUE(HeartbeatReplyFromJson(aj).ok());
  EXPECT_EQ(HeartbeatReplyFromJson(aj)->assignments[0].image, "");
}

// A node's engine runtimes (api/engines.h) travel in its registration, a job's engine format in its
// assignment; both optional, both checked.
TEST(AgentProtocol, EnginesTravelInRegistrationAndAssignment) {
  Registration r;
  r.node = "node-a";
  r.engines = {"libtorch", "opencv-dnn"};
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j.at("engines"), nlohmann::json::array({"libtorch", "opencv-dnn"}));
  auto back = RegistrationFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->engines, r.engines);
  r.engines.clear();
  EXPECT_FALSE(ToJson(r).contains("engines"));  // optional: a node without runtimes sends no key
  EXPECT_EQ(RegistrationFromJson(ToJson(r))->engines, std::vector<std::string>{});
  j["engines"] = {"opencv-dnn", "libtorch"};
  EXPECT_EQ(RegistrationFromJson(j).status().message(),
            "registration.engines[1]: runtimes must be sorted, without duplicates");
  j["engines"] = {"Lib;Torch"};
  EXPECT_EQ(RegistrationFromJson(j).status().message(),
            "registration.engines[0]: a runtime name is 1-32 of [a-z0-9-], e.g. onnxruntime");

  Assignment a = SampleAssignment();
  a.engine = "onnx-int8";
  nlohmann::json aj = ToJson(HeartbeatReply{{a}, false});
  EXPECT_EQ(aj["assignments"][0].at("engine"), "onnx-int8");
  auto reply = HeartbeatReplyFromJson(aj);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->assignments[0].engine, "onnx-int8");
  aj["assignments"][0]["engine"] = "pickle";
  EXPECT_EQ(HeartbeatReplyFromJson(aj).status().message(),
            "heartbeat_reply.assignments[0].engine: unknown engine format 'pickle'; one of torchscript, onnx, "
            "onnx-int8, tensorrt");
  aj["assignments"][0].erase("engine");
  EXPECT_EQ(HeartbeatReplyFromJson(aj)->assignments[0].engine, "");
}

}  // namespace
}  // namespace gpugeek::api
