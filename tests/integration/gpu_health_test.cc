// GPU health end to end, with real processes: `gpugeek server --gpu-quarantine 8s` and one `gpugeek agent`
// discovering its two H100s through the fake libnvidia-ml (src/hw/testing/fake_nvml.c). An XID 79 (the
// GPU fell off the bus) raised under a running job's GPU moves its member to the node's other GPU within
// 5 s (measured and printed); that GPU is not chosen again until its quarantine is over, then it is.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using subprocess::Process;

constexpr char kOneGpu[] = "name: {}\nresources: {{accelerators: H100-SXM-80GB:1}}\nrun: exec sleep 600\n";

class GpuHealthEndToEnd : public testing::PoolFixture {
 protected:
  void SetUp() override {
    MakeScratch("gpu_health");
    const std::string agent_url = StartServer(1, {"--gpu-quarantine", "8s"});
    ASSERT_FALSE(agent_url.empty());
    // Each GPU raises XID 79 once the test creates its trigger file.
    const fs::path script = dir_ / "nvml.script";
    std::ofstream(script) << "driver version=550.54.15 cuda=12040\n"
                          << fmt::format(
                                 "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-h0 bus=00000000:18:00.0 "
                                 "mem_total=85899345920 xid=79 xid_when={}\n",
                                 (dir_ / "xid-GPU-h0").string())
                          << fmt::format(
                                 "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-h1 bus=00000000:2a:00.0 "
                                 "mem_total=85899345920 xid=79 xid_when={}\n",
                                 (dir_ / "xid-GPU-h1").string());
    setenv("GPUGEEK_NVML_LIBRARY", GPUGEEK_FAKE_NVML_PATH, 1);
    setenv("GPUGEEK_FAKE_NVML_SCRIPT", script.c_str(), 1);
    setenv("GPUGEEK_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1", 1);
    node_ = "node-nvml-" + std::to_string(::getpid());
    agents_.push_back(
        std::make_unique<Process>(std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file",
                                                           ca_, "--name", node_, "--data-dir", (dir_ / node_).string()},
                                  dir_ / "agent.log"));
    unsetenv("GPUGEEK_NVML_LIBRARY");
    unsetenv("GPUGEEK_FAKE_NVML_SCRIPT");
    unsetenv("GPUGEEK_ROCM_SMI_LIBRARY");
    ASSERT_TRUE(WaitForNodes(1));
  }
  std::string SubmitJob(const std::string& name) {
    auto reply = Client().Post("/v1/jobs", {{"spec_yaml", fmt::format(kOneGpu, name)}});
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? (*reply)["id"].get<std::string>() : "";
  }
  nlohmann::json Job(const std::string& id) {
    auto j = Client().Get("/v1/jobs/" + id);
    return j.ok() ? *j : nlohmann::json::object();
  }
  // The job's GPU UUID once it is RUNNING at an epoch above `after` ("" if not within `limit`).
  std::string RunningGpu(const std::string& id, int64_t after, std::chrono::milliseconds limit) {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      const nlohmann::json j = Job(id);
      if (j.value("state", "") == "RUNNING" && j.value("epoch", int64_t{0}) > after) {
        return j["allocation"]["members"][0]["gpu_uuids"][0].get<std::string>();
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return "";
  }
  std::string node_;
};

TEST_F(GpuHealthEndToEnd, AnXid79MovesTheMemberWithinFiveSecondsAndTheGpuWaitsOutItsQuarantine) {
  const std::string id = SubmitJob("victim");
  const std::string bad = RunningGpu(id, 0, std::chrono::seconds(20));
  ASSERT_FALSE(bad.empty()) << Job(id).dump(2) << agents_[0]->output();
  const int64_t epoch = Job(id)["epoch"];

  const auto raised = std::chrono::steady_clock::now();
  std::ofstream(dir_ / ("xid-" + bad)) << "now\n";
  const std::string moved = RunningGpu(id, epoch, std::chrono::seconds(15));
  const auto recovery = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - raised);
  ASSERT_FALSE(moved.empty()) << Job(id).dump(2) << server_->output() << agents_[0]->output();
  EXPECT_NE(moved, bad);
  EXPECT_LE(recovery.count(), 5000) << "XID -> RUNNING on another GPU took " << recovery.count() << " ms";
  std::printf("gpu-health: XID 79 -> RUNNING on the other GPU in %lld ms\n", static_cast<long long>(recovery.count()));
  // The move is an event naming the GPU and the XID; it counts against the node-failure retry budget.
  auto events = Client().Get("/v1/events?job=" + id);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(absl::StrContains(events->dump(), "unhealthy GPU: rank 0 on node " + node_ + " GPU ")) << events->dump(2);
  EXPECT_TRUE(absl::StrContains(events->dump(), "XID 79 (quarantined for 8 s more)")) << events->dump(2);
  EXPECT_EQ(Job(id)["retries"].value("node-failure", 0), 1);
  auto node = Client().Get("/v1/nodes/" + node_);
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(absl::StrContains((*node)["unhealthy_gpus"].value(bad, ""), "XID 79 (quarantined for")) << node->dump(2);

  // The quarantined GPU is not chosen: a second job waits until the 8 s quarantine is over, then gets it.
  const std::string second = SubmitJob("after");
  std::this_thread::sleep_for(milliseconds(2000));
  EXPECT_EQ(Job(second).value("state", ""), "PENDING") << Job(second).dump(2);
  const std::string later = RunningGpu(second, 0, std::chrono::seconds(20));
  EXPECT_EQ(later, bad) << Job(second).dump(2);
  EXPECT_GE(std::chrono::steady_clock::now() - raised, std::chrono::seconds(8));
  node = Client().Get("/v1/nodes/" + node_);
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE((*node)["unhealthy_gpus"].empty()) << node->dump(2);
}

}  // namespace
}  // namespace gpugeek
