// The guarantees of the restructured control plane (control_plane.h, docs/architecture.md "Control
// plane"), each from a scenario on a FakeClock with the test playing the agents:
//   - time: leases and deadlines are monotonic, so wall-clock steps change nothing; a silent node is
//     suspect after the lease and down only past lease + fence_grace + fence_margin;
//   - fencing: a requeued gang is placed again, and its GPUs given to anyone, only once every surviving
//     member has exited (reported, or presumed at its drain deadline or when its node is down);
//   - identity: an agent restart (a new instance id) restarts its jobs; GPUs are held by UUID, whatever
//     order a node lists them in; rendezvous ports are per node and released with the allocation;
//   - logs: only a member's own node may write its log, byte-exact through the wire format;
//   - the queue: the control plane places the shared queue scenario (sched/testing/queue_scenario.h)
//     in the order the simulator and the queue's reference driver do.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "controlplane/controllers/scheduling.h"
#include "controlplane/testing/control_plane_fixture.h"
#include "sched/testing/queue_scenario.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// The slow profile (`--lease 3s --fence-grace 2s --fence-margin 1s`: suspect at 3 s, down at 6 s), on
// which the scenarios' hand-computed times are counted; DefaultTimelineTest has the defaults (down at 3 s).
class FencingTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    return {.lease = seconds(3), .fence_grace = seconds(2), .fence_margin = seconds(1)};
  }
  std::string NodeOf(const std::string& id, int rank = 0) { return cp_->GetJob(id)->allocation->members.at(rank).node; }
  // The reasons of every event of `id`, oldest first.
  std::vector<std::string> EventReasons(const std::string& id) {
    std::vector<std::string> reasons;
    auto events = cp_->Events({.job_id = id, .limit = 1000});
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) return reasons;
    for (const store::EventRecord& e : *events) reasons.push_back(e.reason);
    return reasons;
  }
  bool AnyEventSays(const std::string& id, const std::string& text) {
    for (const std::string& r : EventReasons(id)) {
      if (absl::StrContains(r, text)) return true;
    }
    return false;
  }
};

std::string Spec(const std::string& name, int gpus, const std::string& extra = "") {
  return fmt::format("name: {}\nresources: {{accelerators: H100-SXM-80GB:{}}}\n{}run: python train.py\n", name, gpus,
                     extra);
}
const std::vector<std::string> kThree = {"node-a", "node-b", "node-c"};
const std::vector<std::string> kFour = {"node-a", "node-b", "node-c", "node-d"};
const std::string kGang = "name: gang\nnum_nodes: 2\nresources: {accelerators: H100-SXM-80GB:8}\nrun: torchrun x.py\n";

// A wall-clock step of an hour either way (NTP, `date -s`) under a live pool marks no node suspect or
// down and fires no drain deadline: every lease and deadline is on the monotonic clock. Silence past
// the fencing deadline still takes the nodes down afterwards.
TEST_F(FencingTest, WallClockStepsChangeNothingAndSilenceStillFences) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "8xH100-SXM-80GB");
  Register("node-c", "8xH100-SXM-80GB");
  const std::string one = Submit(Spec("one", 8));
  const std::string two = Submit(Spec("two", 8));
  // Cancelled below with its member never confirming: it holds its GPUs until its drain deadline,
  // 1 s of grace + 6 s of fencing after the cancel.
  const std::string stopping = Submit(Spec("stopping", 8, "checkpoint: {grace: 1s}\n"));
  cp_->Reconcile();
  for (const std::string& id : {one, two, stopping}) {
    ASSERT_EQ(State(id), JobState::kScheduled) << id;
    Beat(NodeOf(id), {{id, 1, WorkloadPhase::kRunning}});
    ASSERT_EQ(State(id), JobState::kRunning) << id;
  }
  const std::string stopping_node = NodeOf(stopping);
  ASSERT_TRUE(cp_->Cancel(stopping, "test").ok());

  const auto expect_unchanged = [&](const std::string& when) {
    for (const std::string& node : kThree) {
      auto view = cp_->Node(node);
      ASSERT_TRUE(view.ok()) << view.status();
      EXPECT_EQ(view->state, "ready") << node << " " << when;
      EXPECT_EQ(view->gpu_milli_allocated, 8000) << node << " " << when;
    }
    EXPECT_EQ(State(one), JobState::kRunning) << when;
    EXPECT_EQ(State(two), JobState::kRunning) << when;
    EXPECT_EQ(cp_->GetJob(one)->record.restarts, 0) << when;
    EXPECT_EQ(cp_->GetJob(two)->record.restarts, 0) << when;
    // The cancelled job's member is still told to stop and its GPUs are still held.
    const std::vector<api::Assignment> held = Assignments(stopping_node);
    ASSERT_EQ(held.size(), 1u) << when;
    EXPECT_EQ(held[0].job_id, stopping) << when;
    EXPECT_TRUE(held[0].cancel) << when;
    EXPECT_FALSE(cp_->GetJob(stopping)->allocation->released) << when;
  };
  clock_.StepWall(hours(1));
  cp_->Reconcile();
  expect_unchanged("after +1 h");
  for (const std::string& node : kThree) Beat(node);
  expect_unchanged("after +1 h and heartbeats");
  EXPECT_EQ(cp_->Node("node-a")->heartbeat_age, Duration::zero());
  clock_.StepWall(-hours(2));
  cp_->Reconcile();
  expect_unchanged("after -1 h");
  for (const std::string& node : kThree) Beat(node);
  expect_unchanged("after -1 h and heartbeats");

  // Silence: at exactly 6 s the nodes are suspect, not yet down; past it they are down and the jobs
  // requeued (nowhere to go); the cancelled job's GPUs are released with its node.
  clock_.Advance(seconds(6));
  cp_->Reconcile();
  EXPECT_EQ(NodeState("node-a"), "suspect");
  EXPECT_EQ(State(one), JobState::kRunning);
  clock_.Advance(milliseconds(1));
  cp_->Reconcile();
  for (const std::string& node : kThree) EXPECT_EQ(NodeState(node), "down") << node;
  for (const std::string& id : {one, two}) {
    auto job = cp_->GetJob(id);
    EXPECT_EQ(job->record.state, JobState::kPending) << id;
    EXPECT_EQ(job->record.restarts, 1) << id;
  }
  EXPECT_EQ(State(stopping), JobState::kCancelled);
  EXPECT_TRUE(cp_->GetJob(stopping)->allocation->released);
  EXPECT_TRUE(Assignments(stopping_node).empty());
}

class DefaultTimelineTest : public FencingTest {
 protected:
  ControlPlaneOptions Options() const override { return {}; }
};

// The timeline of a silent node with the defaults: ready up to the lease (2 s: two missed 1 s beats),
// suspect past it (no new placements, its members keep running), down only past lease + fence_grace +
// fence_margin (3 s), when its jobs are requeued. Back, it is ready again and takes work.
TEST_F(DefaultTimelineTest, SilentNodeIsSuspectPastTheLeaseAndDownOnlyPastTheFencingDeadline) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "8xA100-SXM-80GB");
  const std::string id = Submit(Spec("train", 4));
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(id), "node-a");
  Beat("node-a", {{id, 1, WorkloadPhase::kRunning}});
  ASSERT_EQ(State(id), JobState::kRunning);

  // node-a falls silent at t = 0; node-b keeps beating.
  clock_.Advance(seconds(2));
  Beat("node-b");
  EXPECT_EQ(NodeState("node-a"), "ready");  // silent for exactly the lease
  clock_.Advance(milliseconds(1));
  Beat("node-b");
  EXPECT_EQ(NodeState("node-a"), "suspect");
  EXPECT_EQ(State(id), JobState::kRunning);
  std::vector<api::Assignment> held = Assignments("node-a");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(held[0].cancel);
  // No new placements there: an H100 job waits although node-a has 4 H100s free.
  const std::string waits = Submit(Spec("waits", 2));
  cp_->Reconcile();
  EXPECT_EQ(State(waits), JobState::kPending);
  EXPECT_EQ(cp_->Pool().gpu_milli_total, 8000);  // node-b's A100s only

  clock_.Advance(seconds(1) - milliseconds(1));  // t = 3 s
  Beat("node-b");
  EXPECT_EQ(NodeState("node-a"), "suspect");
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(cp_->GetJob(id)->record.restarts, 0);

  clock_.Advance(milliseconds(1));
  Beat("node-b");
  EXPECT_EQ(NodeState("node-a"), "down");
  EXPECT_EQ(cp_->Node("node-a")->heartbeat_age, milliseconds(3001));
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_TRUE(job->allocation->released);  // its only member was on the lost node: presumed stopped
  EXPECT_TRUE(AnyEventSays(id, "node node-a stopped heartbeating"));

  // Back: ready, and both jobs are placed there (the requeued one at a new epoch).
  Beat("node-a");
  EXPECT_EQ(NodeState("node-a"), "ready");
  job = cp_->GetJob(id);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(NodeOf(id), "node-a");
  EXPECT_EQ(State(waits), JobState::kScheduled);
  EXPECT_EQ(NodeOf(waits), "node-a");
}

// A 2-node gang loses a node: the job is PENDING at once, the survivor is told to stop, and the gang
// is placed again only when the survivor has reported its exit, although two free nodes would take
// it before; until then the survivor's GPUs stay held.
TEST_F(FencingTest, GangIsPlacedAgainOnlyOnceItsSurvivingMemberHasExited) {
  for (const std::string& node : kFour) Register(node, "8xH100-SXM-80GB");
  const std::string gang = Submit(kGang);
  cp_->Reconcile();
  ASSERT_EQ(State(gang), JobState::kScheduled);
  const std::string survivor = NodeOf(gang, 0);
  const std::string lost = NodeOf(gang, 1);
  Beat(survivor, {{gang, 1, WorkloadPhase::kRunning, {}, 0, "", 0}});
  Beat(lost, {{gang, 1, WorkloadPhase::kRunning, {}, 0, "", 1}});
  ASSERT_EQ(State(gang), JobState::kRunning);

  // `lost` falls silent past the fencing deadline; the other three keep beating.
  for (int i = 0; i < 7; ++i) {
    clock_.Advance(seconds(1));
    for (const std::string& node : kFour) {
      if (node != lost) Heartbeat(node);
    }
    cp_->Reconcile();
  }
  ASSERT_EQ(NodeState(lost), "down");
  auto job = cp_->GetJob(gang);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_EQ(job->record.epoch, 1);
  EXPECT_THAT(job->record.reason, HasSubstr("placed again once its members have stopped"));
  EXPECT_FALSE(job->allocation->released);
  const std::vector<api::Assignment> stop = Assignments(survivor);
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].job_id, gang);
  EXPECT_EQ(stop[0].epoch, 1);
  EXPECT_EQ(stop[0].node_rank, 0);
  EXPECT_TRUE(stop[0].cancel);

  // More passes and heartbeats: still not placed, the survivor's GPUs still held.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(1));
    for (const std::string& node : kFour) {
      if (node != lost) Beat(node);
    }
  }
  EXPECT_EQ(State(gang), JobState::kPending);
  EXPECT_EQ(cp_->GetJob(gang)->record.epoch, 1);
  EXPECT_EQ(cp_->Node(survivor)->gpu_milli_allocated, 8000);
  EXPECT_EQ(cp_->Pool().gpu_milli_allocated, 8000);
  EXPECT_TRUE(Assignments(survivor)[0].cancel);

  // The survivor reports its exit (SIGTERM): the allocation is released and the gang placed again in
  // the same pass, at a new epoch, away from the lost node.
  Beat(survivor, {{gang, 1, WorkloadPhase::kExited, std::nullopt, 15, "", 0}});
  job = cp_->GetJob(gang);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->record.restarts, 1);
  ASSERT_EQ(job->allocation->members.size(), 2u);
  EXPECT_NE(job->allocation->members[0].node, lost);
  EXPECT_NE(job->allocation->members[1].node, lost);
  for (const std::string& node : kFour) {
    for (const api::Assignment& a : Assignments(node)) EXPECT_EQ(a.epoch, 2) << node;
  }
  // The lost node comes back and reports its member of the old placement: fenced out (stale epoch).
  Beat(lost, {{gang, 1, WorkloadPhase::kExited, std::nullopt, 9, "", 1}});
  EXPECT_EQ(State(gang), JobState::kScheduled);
  EXPECT_TRUE(Assignments(lost).empty());
}

// Without an exit report, the survivor's GPUs are held until the gang's drain deadline (its grace plus
// the fencing timeline from the requeue): another job that needs them waits until then, not a moment
// less.
TEST_F(FencingTest, SurvivorsGpusAreHeldUntilTheDrainDeadline) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "8xH100-SXM-80GB");
  const std::string gang = Submit(
      "name: gang\nnum_nodes: 2\nresources: {accelerators: H100-SXM-80GB:8}\ncheckpoint: {grace: 10s}\nrun: x\n");
  cp_->Reconcile();
  ASSERT_EQ(State(gang), JobState::kScheduled);
  const std::string survivor = NodeOf(gang, 0);
  const std::string lost = NodeOf(gang, 1);
  Beat(survivor, {{gang, 1, WorkloadPhase::kRunning, {}, 0, "", 0}});
  Beat(lost, {{gang, 1, WorkloadPhase::kRunning, {}, 0, "", 1}});
  ASSERT_EQ(State(gang), JobState::kRunning);

  // `lost` is down at t = 7 s (the first pass past 6 s): requeued, drain deadline 7 + 10 + 6 = 23 s.
  for (int t = 1; t <= 7; ++t) {
    clock_.Advance(seconds(1));
    Beat(survivor);
  }
  ASSERT_EQ(NodeState(lost), "down");
  ASSERT_EQ(State(gang), JobState::kPending);
  const std::string other = Submit(Spec("other", 8));
  cp_->Reconcile();
  for (int t = 8; t <= 22; ++t) {
    clock_.Advance(seconds(1));
    Beat(survivor);
    ASSERT_EQ(State(other), JobState::kPending) << "t = " << t;
    ASSERT_EQ(cp_->Node(survivor)->gpu_milli_allocated, 8000) << "t = " << t;
    ASSERT_TRUE(Assignments(survivor).at(0).cancel) << "t = " << t;
  }
  EXPECT_THAT(cp_->GetJob(other)->pending_reason, HasSubstr("insufficient GPU"));

  // t = 23 s: the survivor is presumed stopped. The gang cannot be placed (one node is left), so the
  // other job gets the GPUs.
  clock_.Advance(seconds(1));
  Beat(survivor);
  EXPECT_EQ(State(gang), JobState::kPending);
  EXPECT_TRUE(cp_->GetJob(gang)->allocation->released);
  ASSERT_EQ(State(other), JobState::kScheduled);
  EXPECT_EQ(NodeOf(other), survivor);
  const std::vector<api::Assignment> now = Assignments(survivor);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].job_id, other);
}

// A requeued gang whose surviving member's node goes down too is released then (every member is
// presumed stopped at its node's fencing deadline), not at the later drain deadline, and counts one
// restart, not two.
TEST_F(FencingTest, DrainingGangIsReleasedWhenItsLastMembersNodeIsDown) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "8xH100-SXM-80GB");
  const std::string gang = Submit(kGang);  // the default grace: drain deadline 7 + 30 + 6 = 43 s
  cp_->Reconcile();
  const std::string survivor = NodeOf(gang, 0);
  const std::string lost = NodeOf(gang, 1);
  Beat(survivor, {{gang, 1, WorkloadPhase::kRunning, {}, 0, "", 0}});
  Beat(lost, {{gang, 1, WorkloadPhase::kRunning, {}, 0, "", 1}});
  for (int t = 1; t <= 7; ++t) {
    clock_.Advance(seconds(1));
    Beat(survivor);
  }
  ASSERT_EQ(NodeState(lost), "down");
  ASSERT_EQ(State(gang), JobState::kPending);
  ASSERT_FALSE(cp_->GetJob(gang)->allocation->released);
  // The survivor falls silent at t = 7 s: down past 13 s.
  clock_.Advance(seconds(6));
  cp_->Reconcile();
  EXPECT_FALSE(cp_->GetJob(gang)->allocation->released);
  clock_.Advance(milliseconds(1));
  cp_->Reconcile();
  ASSERT_EQ(NodeState(survivor), "down");
  auto job = cp_->GetJob(gang);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_TRUE(job->allocation->released);
  // Two fresh nodes take it at once.
  Register("node-c", "8xH100-SXM-80GB");
  Register("node-d", "8xH100-SXM-80GB");
  cp_->Reconcile();
  job = cp_->GetJob(gang);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(std::set<std::string>({NodeOf(gang, 0), NodeOf(gang, 1)}), std::set<std::string>({"node-c", "node-d"}));
}

// An agent that restarts (the same node, a new instance id) ended what its predecessor ran: its jobs
// restart (restarts + 1, an event naming the restart) and are placed again. A reconnecting agent (the
// same instance) changes nothing; a heartbeat from another instance than the lease's is told to
// register.
TEST_F(FencingTest, AgentRestartRequeuesItsJobsWithAnEvent) {
  Register("node-a", "8xH100-SXM-80GB", "on-demand", "", "agent-1");
  const std::string id = Submit(Spec("train", 4));
  cp_->Reconcile();
  Beat("node-a", {{id, 1, WorkloadPhase::kRunning}}, {}, "agent-1");
  ASSERT_EQ(State(id), JobState::kRunning);

  Register("node-a", "8xH100-SXM-80GB", "on-demand", "", "agent-1");  // reconnect
  cp_->Reconcile();
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(cp_->GetJob(id)->record.restarts, 0);
  EXPECT_TRUE(Heartbeat("node-a", {}, {}, "agent-2").reregister);
  EXPECT_EQ(State(id), JobState::kRunning);

  Register("node-a", "8xH100-SXM-80GB", "on-demand", "", "agent-2");  // restarted
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_TRUE(job->allocation->released);
  EXPECT_THAT(EventReasons(id).back(), HasSubstr("the agent on node-a restarted and ended the member there"));
  EXPECT_TRUE(Heartbeat("node-a", {}, {}, "agent-1").reregister);  // the old process's lease is gone

  Beat("node-a", {}, {}, "agent-2");
  job = cp_->GetJob(id);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  const std::vector<api::Assignment> assigned = Assignments("node-a");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].epoch, 2);
  EXPECT_EQ(assigned[0].restart_count, 1);
  EXPECT_FALSE(assigned[0].cancel);
}

// An agent frozen past its lease but back before its node is down fenced its member (SIGTERM, then
// SIGKILL): the exit it reports says so ("fenced: "), and the job is retried as a node failure, not
// failed as its own error; nor does a fenced member that exited 0 count as finished.
TEST_F(FencingTest, AFencedMembersExitIsANodeFailureNotTheJobsError) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string killed = Submit(Spec("killed", 4));
  const std::string clean = Submit(Spec("clean", 4));
  cp_->Reconcile();
  Beat("node-a", {{killed, 1, WorkloadPhase::kRunning}, {clean, 1, WorkloadPhase::kRunning}});
  ASSERT_EQ(State(killed), JobState::kRunning);
  ASSERT_EQ(State(clean), JobState::kRunning);
  api::WorkloadReport by_kill{.job_id = killed, .epoch = 1, .phase = WorkloadPhase::kExited, .term_signal = 9};
  by_kill.message = std::string(api::kFencedPrefix) + "the agent lost contact with the server for its 3000 ms lease";
  api::WorkloadReport by_exit{.job_id = clean, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0};
  by_exit.message = by_kill.message;
  Beat("node-a", {by_kill, by_exit});
  for (const std::string& id : {killed, clean}) {
    const JobView job = *cp_->GetJob(id);
    EXPECT_NE(job.record.state, JobState::kFailed) << id;
    EXPECT_NE(job.record.state, JobState::kSucceeded) << id;
    EXPECT_EQ(job.record.restarts, 1) << id;
    EXPECT_THAT(EventReasons(id), ::testing::Contains(HasSubstr("fenced: the agent lost contact"))) << id;
  }
}

// A node that registers again listing its GPUs in another order (a driver re-enumeration) keeps the
// running job on the same GPUs: allocations hold UUIDs, so the pool counts the right GPUs allocated
// and the next job gets the others.
TEST_F(FencingTest, AReorderedRegistrationKeepsTheAllocationOnTheSameGpuUuids) {
  const api::Registration first = Registration("node-a", "4xA100-SXM-80GB");
  ASSERT_TRUE(cp_->Register(first).ok());
  const std::string held = Submit("name: held\nresources: {accelerators: A100-SXM-80GB:2}\nrun: x\n");
  cp_->Reconcile();
  Beat("node-a", {{held, 1, WorkloadPhase::kRunning}});
  ASSERT_EQ(State(held), JobState::kRunning);
  const std::vector<std::string> uuids = cp_->GetJob(held)->allocation->members.at(0).gpu_uuids;
  ASSERT_EQ(uuids.size(), 2u);

  // The same agent registers again with its GPUs rotated by one: new device i is old device i + 1.
  // Whatever two indices `held` got, they now name other GPUs, so counting by index would be wrong.
  api::Registration rotated = first;
  const size_t n = first.inventory.gpus.size();
  ASSERT_EQ(n, 4u);
  ASSERT_EQ(first.inventory.links.size(), n);
  for (size_t i = 0; i < n; ++i) {
    rotated.inventory.gpus[i] = first.inventory.gpus[(i + 1) % n];
    rotated.inventory.gpus[i].index = static_cast<int>(i);
    for (size_t j = 0; j < n; ++j) rotated.inventory.links[i][j] = first.inventory.links[(i + 1) % n][(j + 1) % n];
  }
  ASSERT_NE(rotated.inventory.gpus[0].uuid, first.inventory.gpus[0].uuid);
  ASSERT_TRUE(cp_->Register(rotated).ok());
  cp_->Reconcile();
  EXPECT_EQ(State(held), JobState::kRunning);
  std::vector<api::Assignment> assigned = Assignments("node-a");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].gpu_uuids, uuids);

  const std::string next = Submit("name: next\nresources: {accelerators: A100-SXM-80GB:2}\nrun: x\n");
  cp_->Reconcile();
  ASSERT_EQ(State(next), JobState::kScheduled);
  const std::vector<std::string> next_uuids = cp_->GetJob(next)->allocation->members.at(0).gpu_uuids;
  ASSERT_EQ(next_uuids.size(), 2u);
  for (const std::string& u : next_uuids) EXPECT_EQ(std::count(uuids.begin(), uuids.end(), u), 0) << u;
  const PoolView pool = cp_->Pool();
  ASSERT_EQ(pool.rows.size(), 1u);
  EXPECT_EQ(pool.rows[0].gpus_allocated, 4);
  EXPECT_EQ(pool.rows[0].gpus_fully_free, 0);
  EXPECT_EQ(pool.gpu_milli_allocated, 4000);
  const std::string waits = Submit("name: waits\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  cp_->Reconcile();
  EXPECT_EQ(State(waits), JobState::kPending);
}

// Rendezvous ports: two jobs whose rank 0 is on one address never share one; another node has its own
// range unless it shares the address; a port comes back when its allocation is released, and a restarted
// control plane knows which are in use.
TEST_F(FencingTest, RendezvousPortsArePerNodeAndReleasedWithTheAllocation) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string first = Submit(Spec("first", 1));
  const std::string second = Submit(Spec("second", 1));
  cp_->Reconcile();
  EXPECT_EQ(cp_->GetJob(first)->allocation->master_port, kFirstRendezvousPort);
  EXPECT_EQ(cp_->GetJob(second)->allocation->master_port, kFirstRendezvousPort + 1);
  std::map<std::string, int> ports;
  for (const api::Assignment& a : Assignments("node-a")) ports[a.job_id] = a.master_port;
  EXPECT_EQ(ports, (std::map<std::string, int>{{first, kFirstRendezvousPort}, {second, kFirstRendezvousPort + 1}}));

  Beat("node-a", {{first, 1, WorkloadPhase::kExited, 0}});
  ASSERT_EQ(State(first), JobState::kSucceeded);
  const std::string third = Submit(Spec("third", 1));
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(third), "node-a");
  EXPECT_EQ(cp_->GetJob(third)->allocation->master_port, kFirstRendezvousPort);  // first's, released

  // Another node: its own range.
  Register("node-b", "8xH100-SXM-80GB");
  ASSERT_TRUE(cp_->SetCordoned("node-a", true).ok());
  const std::string elsewhere = Submit(Spec("elsewhere", 1));
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(elsewhere), "node-b");
  EXPECT_EQ(cp_->GetJob(elsewhere)->allocation->master_port, kFirstRendezvousPort);

  // After a restart the ports in use come back from the stored allocations.
  Restart();
  ASSERT_TRUE(cp_->SetCordoned("node-a", false).ok());
  ASSERT_TRUE(cp_->SetCordoned("node-b", true).ok());
  const std::string after = Submit(Spec("after", 1));
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(after), "node-a");
  EXPECT_EQ(cp_->GetJob(after)->allocation->master_port, kFirstRendezvousPort + 2);

  // A node at node-a's address (10.0.0.1: two agents behind one host) shares its range, not just its name's.
  Register("host2-a", "8xH100-SXM-80GB");
  ASSERT_TRUE(cp_->SetCordoned("node-a", true).ok());
  const std::string shared = Submit(Spec("shared", 1));
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(shared), "host2-a");
  EXPECT_EQ(cp_->GetJob(shared)->allocation->master_addr, "10.0.0.1");
  EXPECT_EQ(cp_->GetJob(shared)->allocation->master_port, kFirstRendezvousPort + 3);
}

// Only the node that runs a member, at that member's epoch, may write its log; the bytes travel
// base64 on the wire and every value 0x00..0xFF comes back exactly.
TEST_F(FencingTest, LogBytesComeOnlyFromTheMembersNodeAndRoundTripExactly) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(Spec("logs", 1));
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(id), "node-a");
  Register("node-b", "8xH100-SXM-80GB");

  Heartbeat("node-b", {}, {{id, 0, 0, "forged by node-b\n", 1}});  // not its member
  Heartbeat("node-a", {}, {{id, 1, 0, "no rank 1\n", 1}});         // no such member
  Heartbeat("node-a", {}, {{id, 0, 0, "epoch 2 is not placed\n", 2}});
  EXPECT_EQ(Log(id, 0, 1), "");
  EXPECT_EQ(Log(id, 1, 1), "");
  EXPECT_EQ(Log(id, 0, 2), "");

  std::string bytes(256, '\0');
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<char>(i);
  api::Heartbeat hb;
  hb.node = "node-a";
  hb.logs = {{.job_id = id, .node_rank = 0, .offset = 0, .data = bytes, .epoch = 1}};
  // Through the wire format, as an agent sends it.
  auto decoded = api::HeartbeatFromJson(nlohmann::json::parse(api::ToJson(hb).dump()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(cp_->Heartbeat(*decoded).ok());
  Heartbeat("node-b", {}, {{id, 0, 256, "appended by node-b\n", 1}});
  const std::string log = Log(id, 0, 1);
  ASSERT_EQ(log.size(), 256u);
  EXPECT_EQ(log, bytes);
  auto tail = cp_->logs().Read(cp_->GetJob(id)->record.tenant, id, 0, 1, 250, 100);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(tail->data, bytes.substr(250));
  EXPECT_EQ(tail->next_offset, 256u);
  EXPECT_EQ(tail->size, 256u);
}

// The control plane runs the same queue code as the simulator: driven through a real ControlPlane
// (submissions at their arrival times, exits reported when their runtime ends, one heartbeat and pass
// a second), the scenario of sched/testing/queue_scenario.h places its jobs in the expected order at
// the expected times, as sim/simulator_test.cc and sched/queue_scenario_test.cc check for theirs.
//
// The scenario's node ("node-0": 4 x "A100", 64 cores, 256 GiB) is an emulated node of 4 x
// A100-SXM-80GB with 64 cores and 512 GiB here (the emulation needs a catalog model; only GPUs ever
// run short, so the extra memory changes nothing), and each job asks for its whole GPUs, 1 core and
// 1 GiB, as ScenarioShape does. BestFit places, as in the simulator's test.
class QueueScenarioTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override { return {.policy = "BestFit"}; }
};

TEST_F(QueueScenarioTest, ControlPlanePlacesTheSharedScenarioInTheExpectedOrder) {
  using sched::testing::ScenarioJob;
  using sched::testing::ScenarioPlacement;
  const sched::testing::QueueScenario scenario = sched::testing::SmallQueueScenario();
  Register("node-a", fmt::format("{}xA100-SXM-80GB", scenario.node_gpus));
  std::vector<const ScenarioJob*> by_arrival;
  for (const ScenarioJob& job : scenario.jobs) by_arrival.push_back(&job);
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [](const ScenarioJob* x, const ScenarioJob* y) { return x->arrival < y->arrival; });

  std::map<std::string, const ScenarioJob*> job_of;  // control-plane id -> scenario job
  std::multimap<seconds, std::string> ends;          // end time -> control-plane id
  std::vector<std::string> placed;                   // "id@t"
  int64_t seen_seq = 0;
  size_t next = 0;
  for (seconds t{0}; t <= seconds(60) && placed.size() < scenario.jobs.size(); t += seconds(1)) {
    if (t > seconds(0)) clock_.Advance(seconds(1));
    std::vector<api::WorkloadReport> exits;
    for (auto it = ends.begin(); it != ends.end() && it->first == t; it = ends.erase(it)) {
      exits.push_back({it->second, 1, WorkloadPhase::kExited, 0});
    }
    for (; next < by_arrival.size() && by_arrival[next]->arrival == t; ++next) {
      const ScenarioJob& job = *by_arrival[next];
      const std::string id = Submit(fmt::format(
          "name: {}\npriority: {}\nresources: {{accelerators: A100-SXM-80GB:{}, cpus: 1, memory: 1Gi}}\nrun: x\n",
          job.id, job.priority, job.gpus));
      ASSERT_FALSE(id.empty());
      job_of[id] = &job;
    }
    Beat("node-a", exits);  // the node stays alive; the pass applies the exits and places
    auto events = store_->ListEvents({.job_id = "", .after_seq = seen_seq, .limit = 1000});
    ASSERT_TRUE(events.ok()) << events.status();
    for (const store::EventRecord& e : *events) {  // in commit order: the placement order
      seen_seq = e.seq;
      if (e.to != JobState::kScheduled) continue;
      const ScenarioJob& job = *job_of.at(e.job_id);
      placed.push_back(fmt::format("{}@{}", job.id, t.count()));
      ends.emplace(t + job.runtime, e.job_id);
    }
  }
  std::vector<std::string> expected;
  for (const ScenarioPlacement& p : scenario.expected) expected.push_back(fmt::format("{}@{}", p.id, p.at.count()));
  EXPECT_EQ(placed, expected);
}

// A node lost (down) three times within an hour is blocked from placements for 30 min (the defaults): it
// is "blocked", a job waits rather than go there, and once the block runs out the job is placed on it.
TEST_F(FencingTest, ANodeLostThreeTimesWithinAnHourIsBlockedForAWhile) {
  Register("node-a", "1xH100-SXM-80GB");
  for (int loss = 1; loss <= 3; ++loss) {
    clock_.Advance(seconds(7));  // silent past lease + fence grace + margin (6 s)
    cp_->Reconcile();
    ASSERT_EQ(NodeState("node-a"), "down") << "loss " << loss;
    Beat("node-a");
    EXPECT_EQ(NodeState("node-a"), loss < 3 ? "ready" : "blocked") << "loss " << loss;
  }
  const std::string id = Submit(Spec("waits", 1));
  cp_->Reconcile();
  EXPECT_EQ(State(id), JobState::kPending);
  for (int i = 0; i < 899; ++i) {
    clock_.Advance(seconds(2));
    Beat("node-a");
  }
  EXPECT_EQ(State(id), JobState::kPending) << "29 min 58 s into the block";
  clock_.Advance(seconds(2));
  Beat("node-a");
  cp_->Reconcile();
  EXPECT_EQ(NodeState("node-a"), "ready");
  EXPECT_EQ(State(id), JobState::kScheduled);
}

}  // namespace
}  // namespace gpugeek::controlplane
