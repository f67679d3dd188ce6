#include "controlplane/control_plane.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "controlplane/controllers/scheduling.h"
#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using std::chrono::seconds;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class ControlPlaneTest : public testing::ControlPlaneFixture {};

constexpr char kFourH100[] = "name: train\nresources: {accelerators: H100-SXM-80GB:4}\nrun: python train.py\n";

TEST_F(ControlPlaneTest, JobRunsThroughTheWholeLifecycle) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(kFourH100);
  EXPECT_EQ(id, "j-00000001");
  EXPECT_EQ(State(id), JobState::kPending);

  cp_->Reconcile();
  auto job = cp_->GetJob(id);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 1);
  ASSERT_TRUE(job->allocation.has_value());
  ASSERT_EQ(job->allocation->members.size(), 1u);
  EXPECT_EQ(job->allocation->members[0].node, "node-a");
  EXPECT_EQ(job->allocation->members[0].gpus.size(), 4u);
  EXPECT_EQ(job->allocation->members[0].gpu_uuids.size(), 4u);
  EXPECT_EQ(job->allocation->gpu_model, "H100-SXM-80GB");
  EXPECT_EQ(job->allocation->master_port, kFirstRendezvousPort);

  api::HeartbeatReply reply = Beat("node-a");
  ASSERT_EQ(reply.assignments.size(), 1u);
  const api::Assignment& a = reply.assignments[0];
  EXPECT_EQ(a.job_id, id);
  EXPECT_EQ(a.epoch, 1);
  EXPECT_EQ(a.run, "python train.py");
  EXPECT_EQ(a.gpu_uuids, job->allocation->members[0].gpu_uuids);
  EXPECT_FALSE(a.cancel);

  // A report takes effect on the next controller pass, not in the heartbeat.
  Heartbeat("node-a", {{id, 1, api::WorkloadPhase::kRunning}});
  EXPECT_EQ(State(id), JobState::kScheduled);
  cp_->Reconcile();
  EXPECT_EQ(State(id), JobState::kRunning);
  reply = Beat("node-a", {{id, 1, api::WorkloadPhase::kExited, 0}}, {{id, 0, 0, "step 1\n", 1}});
  EXPECT_EQ(reply.assignments.size(), 1u);          // answered before the pass that saw the exit
  EXPECT_TRUE(Beat("node-a").assignments.empty());  // exit recorded: the agent may forget it
  job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kSucceeded);
  EXPECT_EQ(job->record.exit_code, 0);
  EXPECT_TRUE(job->allocation->released);
  EXPECT_EQ(Log(id, 0, 1), "step 1\n");
  auto log_state = cp_->LogState(id);
  ASSERT_TRUE(log_state.ok()) << log_state.status();
  EXPECT_TRUE(log_state->logs_complete);
  EXPECT_EQ(log_state->state, "SUCCEEDED");
  EXPECT_EQ(log_state->num_ranks, 1);
  EXPECT_EQ(log_state->latest_epoch, (std::map<int, int64_t>{{0, 1}}));

  // Events: created, SCHEDULED, RUNNING, SUCCEEDED — each with time and reason.
  auto events = cp_->Events({.job_id = id, .limit = 100});
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[1].to, JobState::kScheduled);
  EXPECT_TRUE(absl::StartsWith((*events)[1].reason, "placed on node-a[")) << (*events)[1].reason;
  EXPECT_EQ((*events)[3].to, JobState::kSucceeded);
}

TEST_F(ControlPlaneTest, EventsOfJobsEndedPastTheRetentionAreDeletedAndTheJobStays) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(kFourH100);
  cp_->Reconcile();
  ASSERT_TRUE(cp_->Cancel(id, "not needed").ok());
  Beat("node-a", {{id, 1, api::WorkloadPhase::kExited, std::nullopt, 15}});
  ASSERT_EQ(cp_->Events({.job_id = id, .limit = 100})->size(), 3u);  // created, SCHEDULED, CANCELLED
  // The default retention is 30 days (ControlPlaneOptions::event_retention).
  clock_.Advance(std::chrono::hours(24 * 30) - std::chrono::minutes(2));
  Register("node-a", "8xH100-SXM-80GB");  // a fresh lease: the node stays up across the jump
  cp_->Reconcile();
  EXPECT_EQ(cp_->Events({.job_id = id, .limit = 100})->size(), 3u);
  clock_.Advance(std::chrono::minutes(3));
  Register("node-a", "8xH100-SXM-80GB");
  cp_->Reconcile();
  EXPECT_TRUE(cp_->Events({.job_id = id, .limit = 100})->empty());
  EXPECT_EQ(State(id), JobState::kCancelled);
}

TEST_F(ControlPlaneTest, TwoNodeGangStartsTogetherWithConsistentRanks) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "8xH100-SXM-80GB");
  const std::string id =
      Submit("name: gang\nnum_nodes: 2\nresources: {accelerators: H100-SXM-80GB:8}\nrun: torchrun train.py\n");
  cp_->Reconcile();
  auto job = cp_->GetJob(id);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  ASSERT_EQ(job->allocation->members.size(), 2u);
  const auto ra = Beat("node-a").assignments;
  const auto rb = Beat("node-b").assignments;
  ASSERT_EQ(ra.size(), 1u);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_NE(ra[0].node_rank, rb[0].node_rank);
  EXPECT_EQ(ra[0].num_nodes, 2);
  EXPECT_EQ(ra[0].master_addr, rb[0].master_addr);
  EXPECT_EQ(ra[0].master_port, rb[0].master_port);
  const std::string rank0_node = ra[0].node_rank == 0 ? "node-a" : "node-b";
  EXPECT_EQ(ra[0].master_addr, rank0_node == "node-a" ? "10.0.0.1" : "10.0.0.2");

  // RUNNING only once both members run.
  Beat("node-a", {{id, 1, api::WorkloadPhase::kRunning, {}, 0, "", ra[0].node_rank}});
  EXPECT_EQ(State(id), JobState::kScheduled);
  Beat("node-b", {{id, 1, api::WorkloadPhase::kRunning, {}, 0, "", rb[0].node_rank}});
  EXPECT_EQ(State(id), JobState::kRunning);

  // One member fails: held a lease (2 s) for the gang's nodes (retry_test.cc, GangFailureTest), then the
  // job fails and the survivor is told to stop.
  Beat("node-b", {{id, 1, api::WorkloadPhase::kExited, 3, 0, "", rb[0].node_rank}});
  EXPECT_EQ(State(id), JobState::kRunning);
  clock_.Advance(std::chrono::milliseconds(2001));
  Heartbeat("node-a");
  Beat("node-b");
  job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.exit_code, 3);
  const auto stop = Beat("node-a").assignments;
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_TRUE(stop[0].cancel);
  EXPECT_FALSE(cp_->GetJob(id)->allocation->released);  // held until the survivor confirms
  Beat("node-a", {{id, 1, api::WorkloadPhase::kExited, std::nullopt, 15, "", ra[0].node_rank}});
  EXPECT_TRUE(cp_->GetJob(id)->allocation->released);
}

TEST_F(ControlPlaneTest, CancelPendingAndRunningJobs) {
  const std::string pending = Submit(kFourH100);  // no nodes yet
  auto cancelled = cp_->Cancel(pending, "user asked");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->record.state, JobState::kCancelled);
  EXPECT_EQ(cp_->Cancel(pending, "").status().code(), absl::StatusCode::kFailedPrecondition);

  Register("node-a", "8xH100-SXM-80GB");
  const std::string running = Submit(kFourH100);
  cp_->Reconcile();
  Beat("node-a", {{running, 1, api::WorkloadPhase::kRunning}});
  ASSERT_TRUE(cp_->Cancel(running, "").ok());
  auto reply = Beat("node-a");
  ASSERT_EQ(reply.assignments.size(), 1u);
  EXPECT_TRUE(reply.assignments[0].cancel);
  EXPECT_EQ(reply.assignments[0].grace_ms, 30000);  // the spec's default grace
  Beat("node-a", {{running, 1, api::WorkloadPhase::kExited, std::nullopt, 15}});
  EXPECT_EQ(State(running), JobState::kCancelled);  // stays CANCELLED, not FAILED
  EXPECT_TRUE(Beat("node-a").assignments.empty());
}

TEST_F(ControlPlaneTest, LostNodeRequeuesAndFencesTheOldPlacement) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(kFourH100);
  cp_->Reconcile();
  Beat("node-a", {{id, 1, api::WorkloadPhase::kRunning}});
  Register("node-b", "8xH100-SXM-80GB");
  for (int i = 0; i < 7; ++i) {  // node-b keeps beating, node-a falls silent past the 6 s fencing deadline
    clock_.Advance(seconds(1));
    Beat("node-b");
  }
  cp_->Reconcile();  // node-a is down: requeue, then place on node-b
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.restarts, 1);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->allocation->members[0].node, "node-b");
  // node-a comes back and reports the old placement exiting: fenced out, the job is untouched.
  Beat("node-a", {{id, 1, api::WorkloadPhase::kExited, 1}});
  EXPECT_EQ(State(id), JobState::kScheduled);
  EXPECT_TRUE(Beat("node-a").assignments.empty());
  auto events = cp_->Events({.job_id = id, .limit = 100});
  bool requeued = false;
  for (const auto& e : *events) requeued |= absl::StrContains(e.reason, "node-a stopped heartbeating");
  EXPECT_TRUE(requeued);
}

TEST_F(ControlPlaneTest, RestartedServerKeepsEveryJobAndRunningOnesFinish) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string done = Submit(kFourH100);
  const std::string running = Submit(kFourH100);
  const std::string waiting = Submit("name: big\nresources: {accelerators: H100-SXM-80GB:8}\nrun: python big.py\n");
  cp_->Reconcile();
  Beat("node-a", {{done, 1, api::WorkloadPhase::kExited, 0}, {running, 1, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(State(done), JobState::kSucceeded);

  Restart();
  EXPECT_EQ(State(done), JobState::kSucceeded);
  EXPECT_EQ(State(running), JobState::kRunning);
  EXPECT_EQ(State(waiting), JobState::kPending);
  auto reply = Beat("node-a", {{running, 1, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(reply.assignments.size(), 1u);  // the same placement, same epoch: the agent does nothing
  EXPECT_EQ(reply.assignments[0].job_id, running);
  EXPECT_EQ(reply.assignments[0].epoch, 1);
  cp_->Reconcile();
  EXPECT_EQ(State(waiting), JobState::kPending);  // 4 of 8 GPUs still held by `running`
  Beat("node-a", {{running, 1, api::WorkloadPhase::kExited, 0}});
  EXPECT_EQ(State(running), JobState::kSucceeded);
  cp_->Reconcile();
  EXPECT_EQ(State(waiting), JobState::kScheduled);
  EXPECT_EQ(Submit(kFourH100), "j-00000004");  // ids continue after a restart
}

// A job no registered node could ever host is refused at submission, naming why (admission_fit.h); one
// that fits the pool but not its free capacity waits, and its pending reason says why.
TEST_F(ControlPlaneTest, UnschedulableJobSaysWhy) {
  Register("node-a", "4xA100-PCIe-80GB");
  auto refused = [&](const std::string& yaml) {
    auto job = cp_->Submit({.spec_yaml = yaml, .tenant = "team-a"});
    EXPECT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
    return std::string(job.status().message());
  };
  EXPECT_EQ(refused("name: huge\nresources: {accelerators: A100-PCIe-80GB:8}\nrun: x\n"),
            "resources: no registered node could ever host this job (1 nodes, at full capacity); 1: insufficient "
            "GPU: fewer than 8 GPUs with 1000 milli free; add such a node or change resources");
  EXPECT_EQ(refused("name: wrong\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n"),
            "resources: no registered node could ever host this job (1 nodes, at full capacity); 1: has "
            "A100-PCIe-80GB; no node has the requested GPU model; add such a node or change resources");
  EXPECT_EQ(refused("name: fat\nresources: {accelerators: A100-PCIe-80GB:1, cpus: 65}\nrun: x\n"),
            "resources: no registered node could ever host this job (1 nodes, at full capacity); 1: insufficient "
            "cpu: 64000 milli free, 65000 requested; add such a node or change resources");

  // A gang of two 8-GPU members on one 8-GPU node: refused, saying how much of the gang could be placed.
  Register("node-b", "8xH100-SXM-80GB");
  EXPECT_EQ(refused("name: gang\nnum_nodes: 2\nresources: {accelerators: H100-SXM-80GB:8}\nrun: x\n"),
            "resources: no registered node could ever host this job (2 nodes, at full capacity); only 1 of the "
            "gang's 2 nodes could; 1: has A100-PCIe-80GB, not the requested H100-SXM-80GB; 1: insufficient GPU: "
            "fewer than 8 GPUs with 1000 milli free; add such a node or change resources");

  // With a second H100 node the gang is admitted; while a job holds that node, the gang waits, saying why.
  Register("node-c", "8xH100-SXM-80GB");
  const std::string holder = Submit("name: holder\nresources: {accelerators: H100-SXM-80GB:8}\nrun: x\n");
  cp_->Reconcile();
  ASSERT_EQ(State(holder), JobState::kScheduled);
  const std::string gang = Submit("name: gang\nnum_nodes: 2\nresources: {accelerators: H100-SXM-80GB:8}\nrun: x\n");
  cp_->Reconcile();
  EXPECT_EQ(cp_->GetJob(gang)->pending_reason,
            "no node fits member 2 of the gang of 2 (3 nodes); 1: has A100-PCIe-80GB, not the requested "
            "H100-SXM-80GB; 2: insufficient GPU: fewer than 8 GPUs with 1000 milli free");
}

// A job that did not fit waits until capacity comes back (here: the running job ends), then places.
TEST_F(ControlPlaneTest, WaitingJobPlacesWhenCapacityComesBack) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string first = Submit("name: a\nresources: {accelerators: H100-SXM-80GB:8}\nrun: x\n");
  const std::string second = Submit("name: b\nresources: {accelerators: H100-SXM-80GB:8}\nrun: x\n");
  for (int pass = 0; pass < 3; ++pass) cp_->Reconcile();
  ASSERT_EQ(State(first), JobState::kScheduled);
  EXPECT_EQ(State(second), JobState::kPending);
  EXPECT_THAT(cp_->GetJob(second)->pending_reason, HasSubstr("insufficient GPU"));
  Beat("node-a", {{first, 1, api::WorkloadPhase::kRunning}});
  Beat("node-a", {{first, 1, api::WorkloadPhase::kExited, 0}});
  ASSERT_EQ(State(first), JobState::kSucceeded);
  cp_->Reconcile();
  EXPECT_EQ(State(second), JobState::kScheduled);
}

// Capacity type and regions are constraints: a job waits rather than run on a node it excluded.
TEST_F(ControlPlaneTest, CapacityTypeAndRegionsAreConstraints) {
  Register("node-a", "8xA100-SXM-80GB", "on-demand", "us-east");
  const std::string spot_yaml = "name: cheap\nresources: {accelerators: A100-SXM-80GB:1, spot: true}\nrun: x\n";
  const std::string eu_yaml =
      "name: resident\nresources: {accelerators: A100-SXM-80GB:1, regions: [eu-west, eu-north]}\nrun: x\n";
  // No registered node is spot, none is in the EU: refused at submission, naming the constraint.
  auto spot = cp_->Submit({.spec_yaml = spot_yaml, .tenant = "team-a"});
  ASSERT_FALSE(spot.ok());
  EXPECT_THAT(spot.status().message(), HasSubstr("1: capacity type on-demand is not the requested spot"));
  auto eu = cp_->Submit({.spec_yaml = eu_yaml, .tenant = "team-a"});
  ASSERT_FALSE(eu.ok());
  EXPECT_THAT(eu.status().message(), HasSubstr("1: region=us-east is not one of [eu-west, eu-north]"));
  const std::string any = Submit("name: any\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  cp_->Reconcile();
  EXPECT_EQ(State(any), JobState::kScheduled);

  // A one-GPU spot node in eu-west: both are admitted and go there, never to node-a; the second waits
  // for its one GPU, saying why node-a does not count.
  Register("node-b", "1xA100-SXM-80GB", "spot", "eu-west");
  const std::string cheap = Submit(spot_yaml);
  cp_->Reconcile();
  ASSERT_EQ(State(cheap), JobState::kScheduled);
  EXPECT_EQ(cp_->GetJob(cheap)->allocation->members[0].node, "node-b");
  const std::string resident = Submit(eu_yaml);
  cp_->Reconcile();
  EXPECT_EQ(State(resident), JobState::kPending);
  EXPECT_THAT(cp_->GetJob(resident)->pending_reason, HasSubstr("region=us-east is not one of [eu-west, eu-north]"));
  EXPECT_THAT(cp_->GetJob(resident)->pending_reason, HasSubstr("insufficient GPU"));
  Beat("node-b", {{cheap, 1, api::WorkloadPhase::kRunning}});
  Beat("node-b", {{cheap, 1, api::WorkloadPhase::kExited, 0}});
  ASSERT_EQ(State(cheap), JobState::kSucceeded);
  cp_->Reconcile();
  ASSERT_EQ(State(resident), JobState::kScheduled);
  EXPECT_EQ(cp_->GetJob(resident)->allocation->members[0].node, "node-b");
}

// image: only nodes that report the image qualify; the pending reason names it; a node that registers
// again with the image (its agent's refreshed `podman images`) takes the job, and the assignment names it.
TEST_F(ControlPlaneTest, ImageIsAConstraint) {
  api::Registration bare = Registration("node-a", "8xA100-SXM-80GB");
  bare.images = {"localhost/pytorch:bookworm"};
  ASSERT_TRUE(cp_->Register(bare).ok());
  // No registered node has the image: refused at submission, naming it.
  auto refused =
      cp_->Submit({.spec_yaml = "name: boxed\nimage: busybox\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n",
                   .tenant = "team-a"});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("1: image localhost/busybox:latest is not on this node (it has 1 other image)"));

  api::Registration with = Registration("node-b", "8xA100-SXM-80GB");
  with.images = {"localhost/busybox:latest"};
  ASSERT_TRUE(cp_->Register(with).ok());
  const std::string boxed = Submit("name: boxed\nimage: busybox\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  cp_->Reconcile();
  ASSERT_EQ(State(boxed), JobState::kScheduled);
  EXPECT_EQ(cp_->GetJob(boxed)->allocation->members[0].node, "node-b");
  const std::vector<api::Assignment> assigned = Assignments("node-b");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].image, "localhost/busybox:latest");

  // Eight GPUs with the image: node-b has seven free, node-a lacks the image, so the job waits, saying so.
  const std::string both = Submit("name: both\nimage: busybox\nresources: {accelerators: A100-SXM-80GB:8}\nrun: x\n");
  cp_->Reconcile();
  EXPECT_EQ(State(both), JobState::kPending);
  EXPECT_THAT(cp_->GetJob(both)->pending_reason,
              HasSubstr("image localhost/busybox:latest is not on this node (it has 1 other image)"));
  // node-a gains the image by registering again: the job goes there.
  bare.images = {"localhost/busybox:latest", "localhost/pytorch:bookworm"};
  ASSERT_TRUE(cp_->Register(bare).ok());
  cp_->Reconcile();
  ASSERT_EQ(State(both), JobState::kScheduled);
  EXPECT_EQ(cp_->GetJob(both)->allocation->members[0].node, "node-a");
}

TEST_F(ControlPlaneTest, PlannerSizesALlama70bLoraOnA100s) {
  Register("node-a", "8xA100-SXM-80GB");
  const std::string config = ReadFile(std::string(GPUGEEK_SHARED_DIR) + "/models/llama/Llama-2-70b-hf.json");
  ASSERT_FALSE(config.empty());
  auto job = cp_->Submit({.spec_yaml = "name: llama2-70b-lora\nmodel: Llama-2-70b-hf.json\n"
                                       "task: {kind: lora, seq_len: 4096, micro_batch: 1}\nrun: python train.py\n",
                          .model_config_json = config});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_NE(job->record.plan_json.find("A100-SXM-80GB"), std::string::npos) << job->record.plan_json;
  cp_->Reconcile();
  job = cp_->GetJob(job->record.id);
  ASSERT_EQ(job->record.state, JobState::kScheduled) << job->pending_reason;
  EXPECT_EQ(job->allocation->gpu_model, "A100-SXM-80GB");
  // A LoRA fine-tune of Llama-2-70B fits 4 x A100-80GB (anchors/planner.md); the planner may pick
  // more GPUs for speed, never fewer than that.
  EXPECT_GE(job->allocation->members[0].gpus.size(), 4u);
  // The plan's layout on the placed model reaches the member (GPUGEEK_TP/_PP/_DP on the node): its
  // degrees multiply to the GPUs placed.
  const std::vector<api::Assignment> held = Assignments("node-a");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_GE(held[0].tp, 1);
  EXPECT_EQ(held[0].tp * held[0].pp * held[0].dp, static_cast<int>(job->allocation->members[0].gpus.size()));
  EXPECT_EQ(held[0].micro_batch, 1);  // the task's micro_batch: 1 (GPUGEEK_MICRO_BATCH)
  EXPECT_GE(held[0].zero_stage, 0);
  EXPECT_LE(held[0].zero_stage, 3);

  // Full fine-tuning needs more than this 8-GPU pool: refused at admission, saying why.
  auto full = cp_->Submit({.spec_yaml = "name: full\nmodel: Llama-2-70b-hf.json\ntask: {kind: full, seq_len: 4096}\n"
                                        "run: python train.py\n",
                           .model_config_json = config});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(full.status().message(), "no GPU in the pool fits")) << full.status();
}

TEST_F(ControlPlaneTest, BadInputIsRefusedNamingTheField) {
  auto bad = cp_->Submit({.spec_yaml = "name: x\nrun: y\nresources: {accelerators: Z80:1}\n"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "resources.accelerators:")) << bad.status();
  auto no_config = cp_->Submit({.spec_yaml = "name: x\nrun: y\nmodel: m.json\ntask: {kind: lora}\n"});
  ASSERT_FALSE(no_config.ok());
  EXPECT_TRUE(absl::StartsWith(no_config.status().message(), "model_config:")) << no_config.status();
  EXPECT_EQ(cp_->GetJob("j-404").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Beat("ghost").reregister);
}

TEST_F(ControlPlaneTest, LogsDeduplicateResentChunks) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(kFourH100);
  cp_->Reconcile();
  Beat("node-a", {{id, 1, api::WorkloadPhase::kRunning}}, {{id, 0, 0, "hello ", 1}});
  Beat("node-a", {}, {{id, 0, 0, "hello ", 1}, {id, 0, 6, "world\n", 1}});  // a resend, then new bytes
  Beat("node-a", {}, {{id, 0, 3, "lo world\nbye\n", 1}});                   // overlapping
  EXPECT_EQ(Log(id, 0, 1), "hello world\nbye\n");
}

TEST_F(ControlPlaneTest, DrainMovesJobsAndPoolCountsGpus) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "4xA100-PCIe-80GB", "spot");
  const std::string id = Submit(kFourH100);
  cp_->Reconcile();
  PoolView pool = cp_->Pool();
  ASSERT_EQ(pool.rows.size(), 2u);
  EXPECT_EQ(pool.gpu_milli_total, 12000);
  EXPECT_EQ(pool.gpu_milli_allocated, 4000);
  EXPECT_EQ(pool.rows[0].gpu_model, "A100-PCIe-80GB");
  EXPECT_EQ(pool.rows[0].capacity_type, "spot");
  ASSERT_TRUE(cp_->Drain("node-a").ok());
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(cp_->GetJob(id)->record.restarts, 1);
  EXPECT_EQ(cp_->Node("node-a")->state, "cordoned");
  // Its member is told to stop; the job is placed again once it has (nowhere else fits 4 H100s anyway).
  const std::vector<api::Assignment> stop = Assignments("node-a");
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].job_id, id);
  EXPECT_TRUE(stop[0].cancel);
  EXPECT_EQ(cp_->SetCordoned("nope", true).code(), absl::StatusCode::kNotFound);
}

TEST_F(ControlPlaneTest, RemoveNodeTakesADecommissionedNodeOutAndItsAgentCanComeBack) {
  Register("node-a", "8xH100-SXM-80GB");
  Register("node-b", "4xA100-PCIe-80GB", "spot");
  const std::string id = Submit(kFourH100);
  cp_->Reconcile();
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(cp_->Pool().gpu_milli_total, 12000);

  // Up and serving: refused, saying what to do.
  auto up = cp_->RemoveNode("node-a");
  EXPECT_EQ(up.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(up.status().message(),
            "node node-a is up: drain it and stop its agent first (gpugeek drain node-a), then remove it once it is "
            "down");
  EXPECT_EQ(cp_->RemoveNode("ghost").status().code(), absl::StatusCode::kNotFound);
  // Cordoned but still holding a job: refused, naming the job.
  ASSERT_TRUE(cp_->SetCordoned("node-a", true).ok());
  auto busy = cp_->RemoveNode("node-a");
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(busy.status().message(), HasSubstr("node node-a still holds jobs: j-00000001;"));
  ASSERT_EQ(cp_->Nodes().size(), 2u);

  // node-a falls silent past the 6 s fencing deadline while node-b keeps beating. No pass ran in
  // between: RemoveNode sees it down itself and its job is requeued first.
  for (int i = 0; i < 7; ++i) {
    clock_.Advance(seconds(1));
    Heartbeat("node-b");
  }
  auto removed = cp_->RemoveNode("node-a");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->registration.node, "node-a");
  EXPECT_EQ(removed->state, "down");
  EXPECT_TRUE(removed->cordoned);
  EXPECT_TRUE(removed->jobs.empty());
  auto job = cp_->GetJob(id);
  EXPECT_EQ(job->record.state, JobState::kPending);
  EXPECT_EQ(job->record.restarts, 1);
  std::vector<NodeView> nodes = cp_->Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].registration.node, "node-b");
  PoolView pool = cp_->Pool();
  ASSERT_EQ(pool.rows.size(), 1u);
  EXPECT_EQ(pool.rows[0].gpu_model, "A100-PCIe-80GB");
  EXPECT_EQ(pool.gpu_milli_total, 4000);
  EXPECT_EQ(cp_->Node("node-a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetNode("node-a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cp_->RemoveNode("node-a").status().code(), absl::StatusCode::kNotFound);
  cp_->Reconcile();
  EXPECT_EQ(State(id), JobState::kPending);  // no H100 left

  // Durable: a restarted server does not bring it back.
  Restart();
  ASSERT_EQ(cp_->Nodes().size(), 1u);
  EXPECT_EQ(cp_->Nodes()[0].registration.node, "node-b");

  // Its agent comes back: told to register again, it is a new node (ready, not cordoned) and the job runs there.
  EXPECT_TRUE(Beat("node-a").reregister);
  Register("node-a", "8xH100-SXM-80GB");
  auto back = cp_->Node("node-a");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->state, "ready");
  EXPECT_FALSE(back->cordoned);
  EXPECT_EQ(cp_->Pool().gpu_milli_total, 12000);
  cp_->Reconcile();
  job = cp_->GetJob(id);
  ASSERT_EQ(job->record.state, JobState::kScheduled);
  EXPECT_EQ(job->record.epoch, 2);
  EXPECT_EQ(job->allocation->members[0].node, "node-a");
  EXPECT_EQ(Beat("node-a").assignments.size(), 1u);

  // A cordoned node with no job on it may go at once (node-b: its agent is stopped first, in practice).
  ASSERT_TRUE(cp_->SetCordoned("node-b", true).ok());
  removed = cp_->RemoveNode("node-b");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->state, "cordoned");
  ASSERT_EQ(cp_->Nodes().size(), 1u);
  EXPECT_EQ(cp_->Pool().gpu_milli_total, 8000);
}

}  // namespace
}  // namespace gpugeek::controlplane
