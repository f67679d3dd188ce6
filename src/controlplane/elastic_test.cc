// Elastic gangs (api::ElasticSpec, controllers/elastic_reform.cc), on a FakeClock with the test playing the
// agents and the default failure timeline (suspect past 2 s of silence, down past 3 s): a lost node's
// member is replaced beside the survivors, who keep their GPUs throughout and restart at the next epoch;
// with no room the gang goes on with at least min_nodes, with fewer it is requeued whole.
#include <functional>
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
using std::chrono::milliseconds;
using ::testing::HasSubstr;

class ElasticTest : public testing::ControlPlaneFixture {
 protected:
  Allocation AllocationOf(const std::string& id) { return *cp_->GetJob(id)->allocation; }
  int64_t Allocated(const std::string& node) { return cp_->Node(node)->gpu_milli_allocated; }
  // Every member of `id` at `epoch` reports running from its node.
  void AllRunning(const std::string& id, int64_t epoch) {
    for (const AllocationMember& m : AllocationOf(id).members) {
      Beat(m.node, {{.job_id = id, .epoch = epoch, .phase = WorkloadPhase::kRunning, .node_rank = m.rank}});
    }
  }
  // node-a, node-b and node-c but `lost`.
  static std::vector<std::string> AllBut(const std::string& lost) {
    std::vector<std::string> alive;
    for (const std::string node : {"node-a", "node-b", "node-c"}) {
      if (node != lost) alive.push_back(node);
    }
    return alive;
  }
  // `dead` falls silent for just over the 3 s to down while `alive` beat every 500 ms; `each` runs after
  // every step (the survivors' GPUs checked throughout).
  void Silence(
      const std::vector<std::string>& alive, const std::function<void()>& each = [] {}) {
    for (int step = 0; step < 7; ++step) {
      clock_.Advance(milliseconds(step < 6 ? 500 : 1));
      for (const std::string& node : alive) Heartbeat(node);
      cp_->Reconcile();
      each();
    }
  }
};

constexpr char kGang[] =
    "name: elastic\nnum_nodes: {}\nresources: {{accelerators: H100-SXM-80GB:8}}\nelastic: {{min_nodes: {}}}\n"
    "run: torchrun train.py\n";

// Rank 0's node is lost: a spare node takes rank 0 (and the rendezvous), rank 1 keeps its node and the same
// GPUs by UUID throughout, both restart at epoch 2, and the job is RUNNING again once both report.
TEST_F(ElasticTest, ALostMemberIsReplacedAndTheSurvivorKeepsItsGpus) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 2, 1));
  cp_->Reconcile();
  AllRunning(id, 1);
  ASSERT_EQ(State(id), JobState::kRunning);
  const Allocation before = AllocationOf(id);
  const std::string lost = before.members[0].node, survivor = before.members[1].node;
  std::string spare = "node-a";
  for (const std::string node : {"node-a", "node-b", "node-c"}) {
    if (node != lost && node != survivor) spare = node;
  }
  Silence({survivor, spare}, [&] { EXPECT_EQ(Allocated(survivor), 8000) << "the survivor's GPUs are never freed"; });
  EXPECT_EQ(NodeState(lost), "down");
  // First the survivor is told to stop (its checkpoint moment), keeping its GPUs; nothing else changes yet.
  EXPECT_EQ(State(id), JobState::kRunning);
  ASSERT_EQ(Assignments(survivor).size(), 1u);
  EXPECT_TRUE(Assignments(survivor)[0].cancel);
  EXPECT_EQ(Assignments(survivor)[0].epoch, 1);
  EXPECT_TRUE(Assignments(spare).empty()) << "no run of epoch 2 before the survivor's has stopped";
  clock_.Advance(milliseconds(500));
  Beat(spare);
  Beat(survivor, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 143, .node_rank = 1}});
  EXPECT_EQ(Allocated(survivor), 8000);

  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_EQ(job->record.retries.at("node-failure"), 1);
  EXPECT_THAT(job->record.reason,
              HasSubstr(fmt::format("re-formed (elastic): rank 0 on {} replaced; rank 1 kept their GPUs; node {} "
                                    "stopped heartbeating",
                                    spare, lost)));
  const Allocation after = AllocationOf(id);
  ASSERT_EQ(after.members.size(), 2u);
  EXPECT_EQ(after.members[0].node, spare);
  EXPECT_EQ(after.members[0].gpu_uuids.size(), 8u);
  EXPECT_EQ(after.members[1].node, survivor);
  EXPECT_EQ(after.members[1].gpu_uuids, before.members[1].gpu_uuids);
  EXPECT_EQ(after.master_addr, "10.0.0." + std::to_string(spare.back() - 'a' + 1));
  EXPECT_EQ(Allocated(spare), 8000);
  // Both are told epoch 2, the survivor as rank 1 of 2 (its agent stops epoch 1 and starts it again).
  for (const auto& [node, rank] : std::vector<std::pair<std::string, int>>{{spare, 0}, {survivor, 1}}) {
    const std::vector<api::Assignment> told = Assignments(node);
    ASSERT_EQ(told.size(), 1u) << node;
    EXPECT_EQ(told[0].epoch, 2) << node;
    EXPECT_EQ(told[0].node_rank, rank) << node;
    EXPECT_EQ(told[0].num_nodes, 2) << node;
    EXPECT_EQ(told[0].master_addr, after.master_addr) << node;
    EXPECT_FALSE(told[0].cancel) << node;
  }
  // A late report of epoch 1 is stale: nothing changes.
  Beat(survivor, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 143, .node_rank = 1}});
  EXPECT_EQ(State(id), JobState::kScheduled);
  AllRunning(id, 2);
  job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kRunning);
  EXPECT_THAT(job->record.reason, HasSubstr("recovered in"));
  // It ends as any job does.
  for (const AllocationMember& m : after.members) {
    Beat(m.node, {{.job_id = id, .epoch = 2, .phase = WorkloadPhase::kExited, .exit_code = 0, .node_rank = m.rank}});
  }
  EXPECT_EQ(State(id), JobState::kSucceeded);
  for (const std::string& node : {survivor, spare}) EXPECT_EQ(Allocated(node), 0) << node;
}

// No spare node: a 3-node gang with min_nodes 2 goes on with its two survivors, ranked 0 and 1 in their old
// order, on the same GPUs.
TEST_F(ElasticTest, WithNoRoomTheGangGoesOnWithItsSurvivors) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 3, 2));
  cp_->Reconcile();
  AllRunning(id, 1);
  const Allocation before = AllocationOf(id);
  const std::string lost = before.members[1].node;
  Silence({before.members[0].node, before.members[2].node});
  for (int rank : {0, 2}) {
    Beat(before.members[rank].node,
         {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 143, .node_rank = rank}});
  }
  const Allocation after = AllocationOf(id);
  ASSERT_EQ(after.members.size(), 2u);
  EXPECT_EQ(after.members[0].node, before.members[0].node);
  EXPECT_EQ(after.members[0].gpu_uuids, before.members[0].gpu_uuids);
  EXPECT_EQ(after.members[1].node, before.members[2].node);
  EXPECT_EQ(after.members[1].rank, 1);
  EXPECT_EQ(after.members[1].gpu_uuids, before.members[2].gpu_uuids);
  EXPECT_EQ(after.master_port, before.master_port);  // rank 0 kept its node
  EXPECT_THAT(cp_->GetJob(id)->record.reason,
              HasSubstr("re-formed (elastic): no node fits rank 1: goes on with 2 of 3 nodes (elastic.min_nodes 2); "
                        "ranks 0, 2 kept their GPUs"));
  const std::vector<api::Assignment> told = Assignments(before.members[2].node);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].node_rank, 1);
  EXPECT_EQ(told[0].num_nodes, 2);
  AllRunning(id, 2);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(Allocated(lost), 0);
}

// Fewer survivors than min_nodes and no room: requeued whole, as a gang without `elastic` is.
TEST_F(ElasticTest, FewerSurvivorsThanMinNodesRequeueTheWholeGang) {
  for (const std::string node : {"node-a", "node-b"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 2, 2));
  cp_->Reconcile();
  AllRunning(id, 1);
  const Allocation before = AllocationOf(id);
  const std::string survivor = before.members[1].node;
  Silence({survivor});
  const std::vector<api::Assignment> told = Assignments(survivor);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_TRUE(told[0].cancel) << "the survivor is stopped before the gang is placed again";
  Beat(survivor, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 143, .node_rank = 1}});
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.retries.at("node-failure"), 1);
  EXPECT_THAT(job->record.reason,
              HasSubstr("no node fits its 1 lost members and its 1 survivors are fewer than elastic.min_nodes 2"));
  EXPECT_EQ(Allocated(survivor), 0) << "released once the survivor stopped";
}

// A survivor that never confirms its stop (its agent wedged) is presumed stopped at its drain deadline
// (its checkpoint grace + the 3 s of fencing after the loss): only then does the gang re-form.
TEST_F(ElasticTest, ASurvivorThatNeverConfirmsIsPresumedStoppedAtItsDrainDeadline) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 2, 1) + "checkpoint: {grace: 2s}\n");
  cp_->Reconcile();
  AllRunning(id, 1);
  const Allocation before = AllocationOf(id);
  const std::string survivor = before.members[1].node;
  const std::vector<std::string> alive = AllBut(before.members[0].node);
  Silence(alive);
  for (int step = 0; step < 9; ++step) {  // 4.5 s: still within 2 s + 3 s
    clock_.Advance(milliseconds(500));
    for (const std::string& node : alive) Heartbeat(node);
    cp_->Reconcile();
    ASSERT_EQ(cp_->GetJob(id)->record.epoch, 1) << "step " << step;
  }
  clock_.Advance(milliseconds(500));
  for (const std::string& node : alive) Heartbeat(node);
  cp_->Reconcile();
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(AllocationOf(id).members[1].gpu_uuids, before.members[1].gpu_uuids);
  EXPECT_EQ(Assignments(survivor).at(0).epoch, 2);
}

// A survivor whose collectives broke when its peer's node fell silent exits with an error before that node
// is declared down: held (not the job's error, its GPUs kept) and restarted in place when the gang re-forms.
TEST_F(ElasticTest, ASurvivorThatFailedBesideASilentNodeIsHeldAndRestarted) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 2, 1));
  cp_->Reconcile();
  AllRunning(id, 1);
  const Allocation before = AllocationOf(id);
  const std::string lost = before.members[1].node, survivor = before.members[0].node;
  bool reported = false;
  const std::vector<std::string> alive = AllBut(lost);
  Silence(alive, [&] {
    if (reported || NodeState(lost) != "suspect") return;
    Beat(survivor, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 1, .node_rank = 0}});
    reported = true;
    EXPECT_EQ(State(id), JobState::kRunning) << "held, not failed";
    EXPECT_EQ(Allocated(survivor), 8000);
  });
  ASSERT_TRUE(reported);
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->record.retries.count("error"), 0u);
  const Allocation after = AllocationOf(id);
  EXPECT_EQ(after.members[0].node, survivor);
  EXPECT_EQ(after.members[0].gpu_uuids, before.members[0].gpu_uuids);
  EXPECT_NE(after.members[1].node, lost);
  EXPECT_EQ(Assignments(survivor).at(0).epoch, 2);
}

// Asking for elasticity is asking to outlive a lost node: a gang whose retry.on lists only `error` still
// re-forms, within retry.limit; the loss past the limit ends it FAILED as the policy says.
TEST_F(ElasticTest, ReformingIsWithinRetryLimitWhateverRetryOnLists) {
  for (const std::string node : {"node-a", "node-b", "node-c", "node-d"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 2, 1) + "retry: {on: [error], limit: 1}\n");
  cp_->Reconcile();
  AllRunning(id, 1);
  std::vector<std::string> all = {"node-a", "node-b", "node-c", "node-d"};
  for (int loss = 1; loss <= 2; ++loss) {
    const Allocation now = AllocationOf(id);
    const std::string lost = now.members[1].node, survivor = now.members[0].node;
    std::erase(all, lost);
    Silence(all);
    if (loss == 2) break;
    Beat(survivor, {{.job_id = id, .epoch = loss, .phase = WorkloadPhase::kExited, .exit_code = 143, .node_rank = 0}});
    auto job = cp_->GetJob(id);
    ASSERT_EQ(job->record.epoch, 2);
    EXPECT_THAT(job->record.reason,
                HasSubstr(fmt::format("node-failure: node {} stopped heartbeating; retry 1 of 1", lost)));
    AllRunning(id, 2);
  }
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_THAT(job->record.reason, HasSubstr("retry.on does not list node-failure"));
}

// The server restarts while the gang stops its survivors: the re-forming is stored with the allocation, so
// the survivor's exit is still taken for the stop that was asked (not the job's error) and the gang re-forms
// once the lost node is declared down again, as the restarted server sees it.
TEST_F(ElasticTest, ARestartWhileTheSurvivorsStopGoesOnReforming) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(fmt::format(kGang, 2, 1));
  cp_->Reconcile();
  AllRunning(id, 1);
  const Allocation before = AllocationOf(id);
  const std::string lost = before.members[1].node, survivor = before.members[0].node;
  const std::vector<std::string> alive = AllBut(lost);
  Silence(alive);
  EXPECT_THAT(
      cp_->GetJob(id)->record.reason,
      HasSubstr(fmt::format("re-forming (elastic): stopping the survivors; node {} stopped heartbeating", lost)));
  ASSERT_NO_FATAL_FAILURE(Restart());
  cp_->Reconcile();
  EXPECT_TRUE(Assignments(survivor).at(0).cancel) << "still told to stop after the restart";
  // The survivor's SIGTERMed run exits 143 while the restarted server still counts the lost node as alive.
  Beat(survivor, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 143, .node_rank = 0}});
  EXPECT_EQ(State(id), JobState::kRunning) << "not the job's error";
  Silence(alive);
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->record.retries.at("node-failure"), 1) << "one loss, one retry";
  EXPECT_EQ(job->record.retries.count("error"), 0u);
  const Allocation after = AllocationOf(id);
  EXPECT_FALSE(after.reforming);
  EXPECT_EQ(after.members[0].node, survivor);
  EXPECT_EQ(after.members[0].gpu_uuids, before.members[0].gpu_uuids);
  EXPECT_NE(after.members[1].node, lost);
}

}  // namespace
}  // namespace gpugeek::controlplane
