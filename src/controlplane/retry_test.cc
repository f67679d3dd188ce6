// Retries per cause with backoff, max_duration and idle_timeout, through a real ControlPlane (fake clock,
// SQLite).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controlplane/retry_policy.h"
#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using std::chrono::seconds;

class RetryTest : public testing::ControlPlaneFixture {
 protected:
  // `d` of time in one-second steps, each with a heartbeat of every node in `alive` and a pass: the
  // nodes stay up while the controllers see the time go by.
  void Pass(Duration d, const std::vector<std::string>& alive = {"node-a"}) {
    for (Duration t{}; t < d; t += seconds(1)) {
      clock_.Advance(seconds(1));
      for (const std::string& node : alive) Heartbeat(node);
      cp_->Reconcile();
    }
  }
  // The job's current epoch once placed (SCHEDULED), after a pass.
  int64_t Epoch(const std::string& id) { return cp_->GetJob(id)->record.epoch; }
  // The reasons of the job's transitions into `to`, oldest first.
  std::vector<std::string> ReasonsInto(const std::string& id, JobState to) {
    std::vector<std::string> out;
    auto events = cp_->Events({.job_id = id, .after_seq = 0, .limit = 1000});
    EXPECT_TRUE(events.ok()) << events.status();
    for (const store::EventRecord& e : *events) {
      if (e.to == to && e.from != to) out.push_back(e.reason);
    }
    return out;
  }
  // Rank 0 of `id` at its current epoch exits with `code` on node-a; then one pass.
  void Fail(const std::string& id, int code) {
    const int64_t epoch = Epoch(id);
    Beat("node-a", {{id, epoch, api::WorkloadPhase::kRunning}});
    Beat("node-a", {{id, epoch, api::WorkloadPhase::kExited, code}});
  }
};

TEST(RetryPolicy, BudgetsPerCauseAndDoublingBackoff) {
  api::JobSpec spec;
  spec.retry = api::RetrySpec{
      .on = {api::RetryCause::kError}, .limit = 4, .backoff_min = seconds(10), .backoff_max = seconds(60)};
  // 10 s, 20 s, 40 s, then the cap of 60 s.
  const std::vector<Duration> waits = {seconds(10), seconds(20), seconds(40), seconds(60)};
  for (int used = 0; used < 4; ++used) {
    const RetryDecision d = DecideRetry(spec, api::RetryCause::kError, used, "rank 0 on a: exit code 1");
    ASSERT_TRUE(d.retry) << used;
    EXPECT_EQ(d.attempt, used + 1);
    EXPECT_EQ(d.backoff, waits[used]) << used;
  }
  RetryDecision d = DecideRetry(spec, api::RetryCause::kError, 1, "rank 0 on a: exit code 1");
  EXPECT_EQ(d.reason, "error: rank 0 on a: exit code 1; retry 2 of 4 in 20s");
  d = DecideRetry(spec, api::RetryCause::kError, 4, "rank 0 on a: exit code 1");
  EXPECT_FALSE(d.retry);
  EXPECT_EQ(d.reason, "error: rank 0 on a: exit code 1; retries exhausted (4 of 4)");
  d = DecideRetry(spec, api::RetryCause::kNodeFailure, 0, "node b stopped heartbeating");
  EXPECT_FALSE(d.retry);
  EXPECT_EQ(d.reason, "node-failure: node b stopped heartbeating; retry.on does not list node-failure");
  // The default policy: node failures at once and without limit, errors never.
  api::JobSpec plain;
  d = DecideRetry(plain, api::RetryCause::kNodeFailure, 1000, "node b stopped heartbeating");
  EXPECT_TRUE(d.retry);
  EXPECT_EQ(d.backoff, Duration::zero());
  EXPECT_EQ(d.reason, "node b stopped heartbeating; requeued");
  EXPECT_FALSE(DecideRetry(plain, api::RetryCause::kError, 0, "x").retry);
  EXPECT_EQ(RetriesUsed({{"error", 2}}, api::RetryCause::kError), 2);
  EXPECT_EQ(RetriesUsed({{"error", 2}}, api::RetryCause::kPreemption), 0);
}

// A job error is retried after its backoff (10 s, then 20 s) until the budget of 2 is spent; the third
// error ends the job FAILED with the exit code; every retry is an event naming cause and attempt.
TEST_F(RetryTest, ErrorsAreRetriedAfterTheirBackoffUntilTheBudgetIsSpent) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(
      "name: flaky\nresources: {accelerators: H100-SXM-80GB:1}\nretry: {on: [error], limit: 2, backoff: 10s..1m}\n"
      "run: python train.py\n");
  cp_->Reconcile();
  ASSERT_EQ(State(id), JobState::kScheduled);
  ASSERT_EQ(Epoch(id), 1);

  Fail(id, 1);
  EXPECT_EQ(State(id), JobState::kPending);
  // Not placed again before its 10 s backoff, though the node is free.
  Pass(seconds(9));
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(cp_->snapshot()->pending_reasons.at(id), "waiting out its retry backoff");
  Pass(seconds(2));
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(Epoch(id), 2);

  Fail(id, 1);
  Pass(seconds(19));
  EXPECT_EQ(State(id), JobState::kPending);  // the second wait is 20 s
  Pass(seconds(2));
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(Epoch(id), 3);

  Fail(id, 7);
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.exit_code, 7);
  EXPECT_EQ(job->record.reason, "error: rank 0 on node-a: exit code 7; retries exhausted (2 of 2)");
  EXPECT_EQ(job->record.retries, (std::map<std::string, int>{{"error", 2}}));
  EXPECT_EQ(job->record.restarts, 2);
  EXPECT_EQ(ReasonsInto(id, JobState::kPending),
            (std::vector<std::string>{"error: rank 0 on node-a: exit code 1; retry 1 of 2 in 10s",
                                      "error: rank 0 on node-a: exit code 1; retry 2 of 2 in 20s"}));
}

// Each cause has its own budget: an error retry does not use up the node failure's, and a cause the
// policy does not list ends the job at once.
TEST_F(RetryTest, EachCauseHasItsOwnBudgetAndAnUnlistedCauseFails) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(
      "name: budgets\nresources: {accelerators: H100-SXM-80GB:1}\n"
      "retry: {on: [error, node-failure], limit: 1, backoff: 0s}\nrun: python train.py\n");
  cp_->Reconcile();
  Fail(id, 1);  // error 1 of 1
  Pass(seconds(1));
  ASSERT_EQ(State(id), JobState::kScheduled);
  // node-a goes silent: the node failure is retried from its own budget.
  clock_.Advance(seconds(7));
  cp_->Reconcile();
  EXPECT_EQ(NodeState("node-a"), "down");
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.retries, (std::map<std::string, int>{{"error", 1}, {"node-failure", 1}}));
  EXPECT_EQ(job->record.reason, "node-failure: node node-a stopped heartbeating; retry 1 of 1 at once");

  // Without node-failure in retry.on, a lost node ends the job.
  Register("node-b", "8xH100-SXM-80GB");
  const std::string strict =
      Submit("name: strict\nresources: {accelerators: H100-SXM-80GB:1}\nretry: {on: [error]}\nrun: python train.py\n");
  Pass(seconds(1), {"node-b"});
  ASSERT_EQ(State(strict), JobState::kScheduled);
  clock_.Advance(seconds(7));
  cp_->Reconcile();
  job = cp_->GetJob(strict);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.reason, "node-failure: node node-b stopped heartbeating; retry.on does not list node-failure");
}

// A gang member's failure waits a lease (2 s) for its gang's nodes before it is the job's error: an agent
// SIGKILLed ends its node's members at once (the shim), the peer's collectives break and it exits 1 before
// that node misses a beat. The chaos test (tests/integration/chaos_test.cc) saw such a gang FAILED.
class GangFailureTest : public RetryTest {
 protected:
  static constexpr char kGang[] =
      "name: gang\nnum_nodes: 2\nresources: {accelerators: H100-SXM-80GB:8}\nrun: python train.py\n";
  // Every member of `id` reports running at epoch 1 from its node's agent `instance[node]`.
  void AllRunning(const std::string& id, const std::map<std::string, std::string>& instance = {}) {
    const Allocation placed = *cp_->GetJob(id)->allocation;
    for (const AllocationMember& m : placed.members) {
      Beat(m.node, {{.job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kRunning, .node_rank = m.rank}}, {},
           instance.contains(m.node) ? instance.at(m.node) : "");
    }
  }
};

// The peer's agent comes back (a new process) within the lease: the failure is its node's, not the job's.
TEST_F(GangFailureTest, AMemberFailedBesideARestartedAgentIsANodeFailure) {
  Register("node-a", "8xH100-SXM-80GB", "on-demand", "", "a-1");
  Register("node-b", "8xH100-SXM-80GB", "on-demand", "", "b-1");
  const std::string id = Submit(kGang);
  cp_->Reconcile();
  AllRunning(id, {{"node-a", "a-1"}, {"node-b", "b-1"}});
  ASSERT_EQ(State(id), JobState::kRunning);
  const Allocation placed = *cp_->GetJob(id)->allocation;
  const std::string failed = placed.members[0].node, peer = placed.members[1].node;
  const std::string failed_instance = failed == "node-a" ? "a-1" : "b-1";
  clock_.Advance(std::chrono::milliseconds(300));
  Beat(failed, {{.job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kExited, .exit_code = 1, .node_rank = 0}}, {},
       failed_instance);
  EXPECT_EQ(State(id), JobState::kRunning) << "held for the gang's nodes";
  EXPECT_FALSE(cp_->GetJob(id)->allocation->released) << "its GPUs kept while held";
  Register(peer, "8xH100-SXM-80GB", "on-demand", "", "restarted");
  cp_->Reconcile();
  auto job = cp_->GetJob(id);
  EXPECT_NE(job->record.state, JobState::kFailed) << job->record.reason;
  EXPECT_EQ(job->record.retries.count("error"), 0u);
  EXPECT_EQ(job->record.restarts, 1);
  EXPECT_EQ(ReasonsInto(id, JobState::kPending),
            (std::vector<std::string>{
                fmt::format("the agent on {} restarted and ended the member there; restarting", peer)}));
}

// The peer's node stops heartbeating at the failure: suspect, then down at 3 s; the gang is requeued as a node
// failure (restarted on node-c), not failed, though the lease after the failure ran out while the peer was
// only suspect.
TEST_F(GangFailureTest, AMemberFailedBesideASilentPeerIsRequeuedWhenThePeerIsDown) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) Register(node, "8xH100-SXM-80GB");
  const std::string id = Submit(kGang);
  cp_->Reconcile();
  AllRunning(id);
  const Allocation placed = *cp_->GetJob(id)->allocation;
  const std::string failed = placed.members[0].node, peer = placed.members[1].node;
  Beat(failed, {{.job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kExited, .exit_code = 1, .node_rank = 0}});
  std::vector<std::string> alive = {"node-a", "node-b", "node-c"};
  std::erase(alive, peer);
  for (int step = 0; step < 7; ++step) {  // 3.5 s in 500 ms steps
    clock_.Advance(std::chrono::milliseconds(500));
    for (const std::string& node : alive) Heartbeat(node);
    cp_->Reconcile();
    if (NodeState(peer) != "down") {
      EXPECT_EQ(State(id), JobState::kRunning) << "held at step " << step;
    }
  }
  ASSERT_EQ(NodeState(peer), "down");
  auto job = cp_->GetJob(id);
  EXPECT_NE(job->record.state, JobState::kFailed) << job->record.reason;
  EXPECT_EQ(job->record.retries.count("error"), 0u);
  EXPECT_EQ(job->record.retries.at("node-failure"), 1);
  EXPECT_EQ(ReasonsInto(id, JobState::kPending),
            (std::vector<std::string>{fmt::format("node {} stopped heartbeating; requeued", peer)}));
}

// Nothing happens to the gang's nodes: the failure is the job's own, judged a lease after it was reported,
// with the member's exit code.
TEST_F(GangFailureTest, AMembersOwnFailureEndsTheJobALeaseLater) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "8xH100-SXM-80GB");
  const std::string id = Submit(kGang);
  cp_->Reconcile();
  AllRunning(id);
  const std::string failed = cp_->GetJob(id)->allocation->members[1].node;
  Beat(failed, {{.job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kExited, .exit_code = 3, .node_rank = 1}});
  EXPECT_EQ(State(id), JobState::kRunning);
  Pass(seconds(2), {"node-a", "node-b"});
  EXPECT_EQ(State(id), JobState::kRunning) << "2 s: not more than the lease yet";
  Pass(seconds(1), {"node-a", "node-b"});
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.exit_code, 3);
  EXPECT_EQ(job->record.reason, fmt::format("rank 1 on {}: exit code 3", failed));
}

// max_duration ends a placement that ran too long: FAILED with the reason, its member told to stop.
TEST_F(RetryTest, MaxDurationEndsTheJobWithItsReason) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id =
      Submit("name: bounded\nresources: {accelerators: H100-SXM-80GB:1}\nmax_duration: 5s\nrun: sleep 1000\n");
  cp_->Reconcile();
  Beat("node-a", {{id, 1, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(State(id), JobState::kRunning);
  Pass(seconds(4));
  EXPECT_EQ(State(id), JobState::kRunning);
  Pass(seconds(1));
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.reason, "max_duration 5s reached");
  const std::vector<api::Assignment> held = Assignments("node-a");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].cancel);
  // The member's exit releases the GPUs.
  Beat("node-a", {{id, 1, api::WorkloadPhase::kExited, std::nullopt, 15}});
  EXPECT_TRUE(cp_->GetJob(id)->allocation->released);
}

// idle_timeout ends a RUNNING job whose GPUs all read below 1% for that long: FAILED with the reason. A
// busy sample starts the count again; a GPU that reports no utilisation is never idle.
TEST_F(RetryTest, IdleTimeoutEndsAJobWhoseGpusStayIdle) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id =
      Submit("name: notebook\nresources: {accelerators: H100-SXM-80GB:2}\nidle_timeout: 5s\nrun: sleep 1000\n");
  cp_->Reconcile();
  Beat("node-a", {{id, 1, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(State(id), JobState::kRunning);
  const std::vector<int> gpus = cp_->GetJob(id)->allocation->members[0].gpus;
  ASSERT_EQ(gpus.size(), 2u);
  // One second of time, then a heartbeat whose samples give the job's two GPUs `first` and `second`
  // percent (nullopt: not reported) and every other GPU 90%, then a pass.
  auto second_with = [&](std::optional<uint32_t> first, std::optional<uint32_t> second) {
    clock_.Advance(seconds(1));
    api::Heartbeat hb;
    hb.node = "node-a";
    hb.samples.resize(8);
    for (auto& sample : hb.samples) sample.telemetry.utilization_percent = 90;
    hb.samples[gpus[0]].telemetry.utilization_percent = first;
    hb.samples[gpus[1]].telemetry.utilization_percent = second;
    ASSERT_TRUE(cp_->Heartbeat(hb).ok());
    cp_->Reconcile();
  };
  for (int i = 0; i < 4; ++i) second_with(0, 0);
  EXPECT_EQ(State(id), JobState::kRunning);  // idle for 4 s of 5
  second_with(0, 40);                        // one GPU busy: the count starts again
  for (int i = 0; i < 4; ++i) second_with(0, 0);
  EXPECT_EQ(State(id), JobState::kRunning);
  for (int i = 0; i < 6; ++i) second_with(0, std::nullopt);  // no figure: busy, as far as anyone knows
  EXPECT_EQ(State(id), JobState::kRunning);
  for (int i = 0; i < 4; ++i) second_with(0, 0);
  EXPECT_EQ(State(id), JobState::kRunning);
  second_with(0, 0);
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.reason, "idle_timeout 5s: its GPUs were idle (utilisation below 1%) for 5s");
  const std::vector<api::Assignment> held = Assignments("node-a");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].cancel);
}

}  // namespace
}  // namespace gpugeek::controlplane
