// GPU health as a scheduling input (controllers/gpu_health.h), on a FakeClock with the test playing the
// agent: a hardware XID moves the member on that GPU and quarantines the GPU; an application XID does not;
// a sticky condition (uncorrectable ECC) holds the GPU for as long as the samples show it.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kOneGpu[] = "name: one\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1000\n";

class GpuHealthTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    o.gpu_quarantine = seconds(30);
    return o;
  }
  // A heartbeat of node-a carrying one sample per GPU, GPU `bad` with `health`, then a controller pass.
  void Samples(int bad, hw::GpuHealth health, std::vector<api::WorkloadReport> reports = {}) {
    api::Heartbeat hb;
    hb.node = "node-a";
    hb.samples.resize(2);
    if (bad >= 0) hb.samples[bad].health = std::move(health);
    hb.workloads = std::move(reports);
    ASSERT_TRUE(cp_->Heartbeat(hb).ok());
    cp_->Reconcile();
  }
  std::string Uuid(int index) { return cp_->Node("node-a")->registration.inventory.gpus.at(index).uuid; }
  int GpuOf(const std::string& id) {
    const std::string uuid = cp_->GetJob(id)->allocation->members.at(0).gpu_uuids.at(0);
    return uuid == Uuid(0) ? 0 : 1;
  }
};

TEST_F(GpuHealthTest, AHardwareXidMovesTheMemberAndQuarantinesTheGpu) {
  Register("node-a", "2xH100-SXM-80GB");
  const std::string first = Submit(kOneGpu);
  cp_->Reconcile();
  ASSERT_EQ(State(first), JobState::kScheduled);
  const int bad = GpuOf(first);
  Samples(-1, {}, {{first, 1, WorkloadPhase::kRunning, {}, 0, "", 0}});
  ASSERT_EQ(State(first), JobState::kRunning);

  // XID 79 (fell off the bus) on the job's GPU: the job is requeued (node-failure) and its member told to stop.
  Samples(bad, {.xid_errors = {79}});
  auto job = cp_->GetJob(first);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_EQ(job->record.retries.count("node-failure"), 1u);
  EXPECT_THAT(
      job->record.reason,
      HasSubstr(fmt::format("unhealthy GPU: rank 0 on node node-a GPU {}: XID 79 (quarantined for 30 s more)", bad)));
  const std::vector<api::Assignment> stop = Assignments("node-a");
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_TRUE(stop[0].cancel);
  EXPECT_EQ(cp_->Node("node-a")->unhealthy_gpus,
            (std::map<std::string, std::string>{
                {Uuid(bad), fmt::format("GPU {}: XID 79 (quarantined for 30 s more)", bad)}}));

  // The member stops: the job runs again on the healthy GPU; a second one-GPU job finds no healthy GPU.
  Samples(-1, {}, {{first, 1, WorkloadPhase::kExited, std::nullopt, 15, "", 0}});
  ASSERT_EQ(State(first), JobState::kScheduled);
  EXPECT_EQ(GpuOf(first), 1 - bad);
  const std::string second = Submit(kOneGpu);
  for (int i = 0; i < 29; ++i) {
    clock_.Advance(seconds(1));
    Samples(-1, {});
  }
  EXPECT_EQ(State(second), JobState::kPending);
  EXPECT_EQ(cp_->Node("node-a")->unhealthy_gpus.count(Uuid(bad)), 1u);
  // The quarantine runs out: healthy again, the second job lands on it.
  clock_.Advance(seconds(1));
  Samples(-1, {});
  EXPECT_TRUE(cp_->Node("node-a")->unhealthy_gpus.empty());
  ASSERT_EQ(State(second), JobState::kScheduled);
  EXPECT_EQ(GpuOf(second), bad);
}

TEST_F(GpuHealthTest, AnApplicationXidMovesNothingAndStickyEccHoldsTheGpuWhileItLasts) {
  Register("node-a", "2xH100-SXM-80GB");
  const std::string job = Submit(kOneGpu);
  cp_->Reconcile();
  const int used = GpuOf(job);
  const int other = 1 - used;
  Samples(-1, {}, {{job, 1, WorkloadPhase::kRunning, {}, 0, "", 0}});
  // XID 13 (graphics engine exception) is the workload's own fault: nothing moves.
  Samples(used, {.xid_errors = {13}});
  EXPECT_EQ(State(job), JobState::kRunning);
  EXPECT_TRUE(cp_->Node("node-a")->unhealthy_gpus.empty());
  // Uncorrectable ECC errors on the idle GPU: held while the samples show them, free once they clear
  // (the driver's volatile counter resets with the GPU).
  Samples(other, {.ecc_uncorrected = 2});
  EXPECT_EQ(cp_->Node("node-a")->unhealthy_gpus,
            (std::map<std::string, std::string>{
                {Uuid(other), fmt::format("GPU {}: 2 uncorrectable ECC error(s) since the driver loaded", other)}}));
  EXPECT_EQ(State(job), JobState::kRunning);
  const std::string waiting = Submit(kOneGpu);
  Samples(other, {.ecc_uncorrected = 2});
  EXPECT_EQ(State(waiting), JobState::kPending);
  Samples(other, {.ecc_uncorrected = 0});
  EXPECT_TRUE(cp_->Node("node-a")->unhealthy_gpus.empty());
  EXPECT_EQ(State(waiting), JobState::kScheduled);
  EXPECT_EQ(GpuOf(waiting), other);
}

}  // namespace
}  // namespace gpugeek::controlplane
