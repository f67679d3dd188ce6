// The checkpoint contract on the server (docs/checkpointing.md), on a FakeClock with the test playing the
// agents: the step a member reports complete is stored with the job as what it resumes from; within a
// placement only forward; the checkpoint written on the SIGTERM of a planned move (drain) arrives with
// the member's exit and counts; a stale placement's report does not; it survives a restart.
#include <string>

#include <gtest/gtest.h>

#include "controlplane/api_views.h"
#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using std::chrono::seconds;

constexpr char kOneGpu[] = "name: train\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1000\n";

class CheckpointTest : public testing::ControlPlaneFixture {
 protected:
  static api::WorkloadReport Running(const std::string& id, int64_t epoch, std::optional<int64_t> step) {
    return {.job_id = id, .epoch = epoch, .phase = WorkloadPhase::kRunning, .checkpoint_step = step};
  }
  std::optional<int64_t> Step(const std::string& id) { return cp_->GetJob(id)->record.checkpoint_step; }
};

TEST_F(CheckpointTest, TheReportedStepIsWhatTheJobResumesFrom) {
  Register("node-a", "1xH100-SXM-80GB");
  Register("node-b", "1xH100-SXM-80GB");
  const std::string id = Submit(kOneGpu);
  cp_->Reconcile();
  const std::string first = cp_->GetJob(id)->allocation->members.at(0).node;
  const std::string second = first == "node-a" ? "node-b" : "node-a";
  Beat(first, {Running(id, 1, std::nullopt)});
  ASSERT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(Step(id), std::nullopt);
  EXPECT_TRUE(JobToJson(*cp_->GetJob(id))["checkpoint"].is_null());

  clock_.Advance(seconds(5));
  Heartbeat(second);  // alive: the move below lands there
  Beat(first, {Running(id, 1, 100)});
  EXPECT_EQ(Step(id), 100);
  EXPECT_EQ(cp_->GetJob(id)->record.checkpoint_at, clock_.Now());
  EXPECT_EQ(JobToJson(*cp_->GetJob(id))["checkpoint"],
            (nlohmann::json{{"step", 100}, {"reported_at", "2027-01-15T08:00:05.000Z"}, {"region", ""}}));
  const int64_t version = cp_->GetJob(id)->record.version;
  Beat(first, {Running(id, 1, 100)});  // resent every beat: no write
  EXPECT_EQ(cp_->GetJob(id)->record.version, version);
  Beat(first, {Running(id, 1, 50)});  // behind the one of this placement: ignored
  EXPECT_EQ(Step(id), 100);
  Beat(first, {Running(id, 1, 200)});
  EXPECT_EQ(Step(id), 200);

  // A planned move: the node is drained; the member checkpoints on its SIGTERM and exits, reporting 250.
  ASSERT_TRUE(cp_->Drain(first).ok());
  EXPECT_EQ(State(id), JobState::kPending);
  ASSERT_TRUE(Assignments(first).at(0).cancel);
  Beat(first, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0, .checkpoint_step = 250}});
  EXPECT_EQ(Step(id), 250);
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(cp_->GetJob(id)->allocation->members.at(0).node, second);
  EXPECT_EQ(cp_->GetJob(id)->record.epoch, 2);

  // The new placement's first report is taken as it is (a run may resume from an older checkpoint it
  // chose), then only forward; a stale report of placement 1 with a later step changes nothing.
  Beat(second, {Running(id, 2, 240)});
  EXPECT_EQ(Step(id), 240);
  Beat(second, {Running(id, 2, 230)});
  EXPECT_EQ(Step(id), 240);
  Beat(first, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0, .checkpoint_step = 900}});
  EXPECT_EQ(Step(id), 240);
  Restart();
  EXPECT_EQ(Step(id), 240) << "stored with the job";
}

}  // namespace
}  // namespace gpugeek::controlplane
