// The server metrics of docs/metrics.md from a control plane driven with a FakeClock: every value
// below is computed by hand from the scenario.
#include "controlplane/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "common/fake_clock.h"
#include "controlplane/control_plane.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kA100[] = "{model=\"A100-SXM-80GB\",capacity_type=\"on-demand\"}";

class ControlPlaneMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpugeek_cp_metrics_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Restart();
  }
  void TearDown() override {
    cp_.reset();
    registry_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A restarted server: a fresh control plane and registry over the same store.
  void Restart() {
    cp_.reset();
    registry_.reset();
    store_.reset();
    auto store = store::SqliteStore::Open({.path = (dir_ / "gpugeek.db").string(), .clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    registry_ = std::make_unique<metrics::Registry>();
    auto cp = ControlPlane::Create(
        {.store = store_.get(), .clock = &clock_, .data_dir = (dir_ / "data").string(), .metrics = registry_.get()});
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = std::move(*cp);
  }
  void Register(const std::string& node, const std::string& spec) {
    api::Registration r;
    r.node = node;
    r.address = "10.0.0.1";
    r.region = "cn-east-1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec(spec), node, {node, 64, uint64_t{512} << 30, 2, ""});
    ASSERT_TRUE(cp_->Register(r).ok());
  }
  std::string Submit(const std::string& yaml) {
    auto job = cp_->Submit({.spec_yaml = yaml});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->record.id : "";
  }
  // A heartbeat, then the controller pass that applies its reports (as the server's loop does).
  void Beat(const std::string& node, std::vector<api::WorkloadReport> reports = {}) {
    api::Heartbeat hb;
    hb.node = node;
    hb.workloads = std::move(reports);
    ASSERT_TRUE(cp_->Heartbeat(hb).ok());
    cp_->Reconcile();
  }
  std::string NodeOf(const std::string& id) { return cp_->GetJob(id)->allocation->members.at(0).node; }
  std::string Render() { return registry_->Render(); }

  FakeClock clock_{TimePoint(seconds(1'800'000'000))};
  std::filesystem::path dir_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<ControlPlane> cp_;
};

constexpr char kFour[] = "name: four\nresources: {accelerators: A100-SXM-80GB:4, cpus: 4}\nrun: x\n";
constexpr char kEight[] = "name: eight\nresources: {accelerators: A100-SXM-80GB:8, cpus: 4}\nrun: x\n";

TEST_F(ControlPlaneMetricsTest, PoolJobsNodesAndCountersFromAScenario) {
  Register("node-a", "8xA100-SXM-80GB");
  const std::string four = Submit(kFour);
  Submit(kEight);  // cannot fit next to `four`: stays PENDING
  EXPECT_FALSE(cp_->Submit({.spec_yaml = "name: bad\n"}).ok());
  cp_->Reconcile();
  ASSERT_EQ(cp_->GetJob(four)->record.state, JobState::kScheduled);
  Beat("node-a", {{four, 1, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(cp_->GetJob(four)->record.state, JobState::kRunning);
  clock_.Advance(seconds(3));

  const std::string text = Render();
  const std::string a100 = kA100;
  // Pool: 8 GPUs, `four` holds 4 of them whole.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_gpus" + a100 + " 8\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_gpus_allocated" + a100 + " 4\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_gpus_free" + a100 + " 4\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_capacity_milligpus" + a100 + " 8000\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_allocated_milligpus" + a100 + " 4000\n"));
  // Typical pods: 4 x 1000 and 8 x 1000, p = .5 each. The 4-GPU pod fits the 4 free GPUs (nothing
  // stranded); the 8-GPU pod does not (all 4000 free milli stranded): F = .5 x 4000 = 2000, over 4000
  // idle = .5. Every free GPU serves the 4-GPU pod, so none is unallocatable.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_fragmentation_milligpus" + a100 + " 2000\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_unallocatable_gpus" + a100 + " 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_fragmentation_ratio 0.5\n"));
  // Jobs: every state has its priority-0 series.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_jobs{state=\"PENDING\",priority=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_jobs{state=\"SCHEDULED\",priority=\"0\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_jobs{state=\"RUNNING\",priority=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_jobs{state=\"CANCELLED\",priority=\"0\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_jobs_oldest_pending_age_seconds 3\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_transitions_total{from=\"PENDING\",to=\"SCHEDULED\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_transitions_total{from=\"SCHEDULED\",to=\"RUNNING\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_submissions_total{result=\"accepted\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_submissions_total{result=\"rejected\"} 1\n"));
  // FGDFit places once it has typical pods, which it had from the first scheduling pass.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_scheduling_placements_total{policy=\"FGDFit\"} 1\n"));
  // Two passes (one placed, one applied the heartbeat's report), timed with the FakeClock: 0 s each,
  // in the first bucket.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_scheduling_cycle_duration_seconds_bucket{le=\"0.0001\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_scheduling_cycle_duration_seconds_count 2\n"));
  // Nodes: the heartbeat was 3 s ago.
  EXPECT_THAT(text,
              HasSubstr("\ngpugeek_node_up{node=\"node-a\",capacity_type=\"on-demand\",region=\"cn-east-1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_node_cordoned{node=\"node-a\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_node_heartbeat_age_seconds{node=\"node-a\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_build_info{version=\"0.1.0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE gpugeek_job_recovery_duration_seconds histogram\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpugeek_job_recovery_duration_seconds_count")));  // nothing recovered yet
}

// The marketplace's money (docs/billing.md): one hour of 4 GPUs at 2.50 per GPU-hour on provider p1's node
// is 10.00 spent by the default tenant, 10.00 owed to p1 (no fee), -10.00 of its cash; the ledger balances.
TEST_F(ControlPlaneMetricsTest, SpendBalancesAndPayablesFromTheLedger) {
  api::Registration r;
  r.node = "node-a";
  r.address = "10.0.0.1";
  r.price_micros_per_gpu_hour = 2'500'000;
  r.labels["provider"] = "p1";
  r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("8xA100-SXM-80GB"), "node-a",
                                           {"node-a", 64, uint64_t{512} << 30, 2, ""});
  ASSERT_TRUE(cp_->Register(r).ok());
  const std::string four = Submit(kFour);
  cp_->Reconcile();
  Beat("node-a", {{four, 1, api::WorkloadPhase::kRunning}});
  clock_.Advance(std::chrono::hours(1));
  Beat("node-a", {{four, 1, api::WorkloadPhase::kExited, 0}});
  ASSERT_EQ(cp_->GetJob(four)->record.state, JobState::kSucceeded);
  const std::string text = Render();
  EXPECT_THAT(text, HasSubstr("# TYPE gpugeek_spend_micros_total counter\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_spend_micros_total{tenant=\"default\",model=\"A100-SXM-80GB\","
                              "capacity_type=\"on-demand\"} 10000000\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_tenant_balance_micros{tenant=\"default\",account=\"cash\"} -10000000\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_provider_payable_micros{provider=\"p1\"} 10000000\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_ledger_imbalance_micros 0\n"));
  Restart();  // rebuilt from the stored ledger
  EXPECT_THAT(Render(), HasSubstr("\ngpugeek_spend_micros_total{tenant=\"default\",model=\"A100-SXM-80GB\","
                                  "capacity_type=\"on-demand\"} 10000000\n"));
}

// A reservation of the node's 8 GPUs for the default tenant at 1.00: after an hour, 8 GPU-hours held (28800 s)
// and the one-GPU job that ran on it for 30 min used 1800 s of them.
TEST_F(ControlPlaneMetricsTest, ReservedGpuTimeHeldAndUsed) {
  Register("node-a", "8xA100-SXM-80GB");
  const TimePoint t0 = clock_.Now();
  ASSERT_TRUE(cp_->billing()
                  .reservations()
                  .Create({.tenant = "default",
                           .gpu_model = "A100-SXM-80GB",
                           .gpus = 8,
                           .price_micros = 1'000'000,
                           .start = t0,
                           .end = t0 + std::chrono::hours(24)})
                  .ok());
  cp_->Reconcile();
  const std::string one = Submit("name: one\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  cp_->Reconcile();
  Beat("node-a", {{one, 1, api::WorkloadPhase::kRunning}});
  clock_.Advance(std::chrono::minutes(30));
  Beat("node-a", {{one, 1, api::WorkloadPhase::kExited, 0}});
  clock_.Advance(std::chrono::minutes(30));
  Beat("node-a");
  const std::string text = Render();
  EXPECT_THAT(text, HasSubstr("\ngpugeek_reservation_gpu_seconds{reservation=\"rsv-00000001\",tenant=\"default\","
                              "model=\"A100-SXM-80GB\",kind=\"held\"} 28800\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_reservation_gpu_seconds{reservation=\"rsv-00000001\",tenant=\"default\","
                              "model=\"A100-SXM-80GB\",kind=\"used\"} 1800\n"));
}

TEST_F(ControlPlaneMetricsTest, SharedGpuLeavesAStrandedRemainder) {
  Register("node-a", "8xA100-SXM-80GB");
  const std::string share = Submit("name: share\nresources: {accelerators: A100-SXM-80GB:0.7, cpus: 1}\nrun: x\n");
  Submit("name: eight\nresources: {accelerators: A100-SXM-80GB:8, cpus: 1}\nrun: x\n");
  cp_->Reconcile();
  ASSERT_EQ(cp_->GetJob(share)->record.state, JobState::kScheduled);
  const std::string text = Render();
  const std::string a100 = kA100;
  // One GPU holds 700 milli: it is allocated, 7 are free; 7300 milli idle.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_gpus_allocated" + a100 + " 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_gpus_free" + a100 + " 7\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_allocated_milligpus" + a100 + " 700\n"));
  // Typical pods 1 x 700 and 8 x 1000, p = .5 each. The 700 share fits a free GPU and strands the
  // 300 left on the shared one; the 8-GPU pod fits nowhere (7 whole GPUs) and strands all 7300:
  // F = .5 x 300 + .5 x 7300 = 3800. The shared GPU's 300 serves neither pod: 1 unallocatable GPU.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_fragmentation_milligpus" + a100 + " 3800\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_pool_unallocatable_gpus" + a100 + " 1\n"));
  EXPECT_THAT(text, HasSubstr(fmt::format("\ngpugeek_pool_fragmentation_ratio {}\n", 3800.0 / 7300.0)));
}

TEST_F(ControlPlaneMetricsTest, RecoveryIsTimedFromTheNodesLastHeartbeatToRunningAgainInPhases) {
  Register("node-a", "8xA100-SXM-80GB");
  Register("node-b", "8xA100-SXM-80GB");
  const std::string id = Submit(kFour);
  cp_->Reconcile();
  const std::string first = NodeOf(id);
  const std::string other = first == "node-a" ? "node-b" : "node-a";
  Beat(first, {{id, 1, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(cp_->GetJob(id)->record.state, JobState::kRunning);

  // `first` falls silent; past the 3 s fencing deadline it is down, the job is requeued (its only
  // member presumed stopped) and placed on `other`.
  clock_.Advance(milliseconds(2500));
  Beat(other);
  // Suspect (silent past the 2 s lease): still up, not lost.
  ASSERT_EQ(cp_->Node(first)->state, "suspect");
  std::string text = Render();
  EXPECT_THAT(text,
              HasSubstr(fmt::format(
                  "\ngpugeek_node_up{{node=\"{}\",capacity_type=\"on-demand\",region=\"cn-east-1\"}} 1\n", first)));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_nodes_lost_total 0\n"));
  clock_.Advance(seconds(1));
  Beat(other);
  ASSERT_EQ(cp_->GetJob(id)->record.state, JobState::kScheduled);
  ASSERT_EQ(NodeOf(id), other);
  clock_.Advance(seconds(1));
  Beat(other, {{id, 2, api::WorkloadPhase::kRunning}});
  ASSERT_EQ(cp_->GetJob(id)->record.state, JobState::kRunning);

  // Failed at t = 0 (its last heartbeat), detected (down, requeued) and placed at 3.5 s, running at 4.5 s.
  EXPECT_EQ(cp_->GetJob(id)->record.reason,
            "all 1 members started; recovered in 4.5 s: detected 3.5 s after the failure, stopped +0.0 s, placed "
            "+0.0 s, running +1.0 s");
  text = Render();
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_duration_seconds_bucket{le=\"4\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_duration_seconds_bucket{le=\"5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_duration_seconds_sum 4.5\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_duration_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_phase_seconds_sum{phase=\"detect\"} 3.5\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_phase_seconds_sum{phase=\"stop\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_phase_seconds_sum{phase=\"place\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_phase_seconds_sum{phase=\"start\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_transitions_total{from=\"RUNNING\",to=\"PENDING\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_transitions_total{from=\"PENDING\",to=\"SCHEDULED\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_transitions_total{from=\"SCHEDULED\",to=\"RUNNING\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr(fmt::format(
                  "\ngpugeek_node_up{{node=\"{}\",capacity_type=\"on-demand\",region=\"cn-east-1\"}} 0\n", first)));
  EXPECT_THAT(text, HasSubstr(fmt::format("\ngpugeek_node_heartbeat_age_seconds{{node=\"{}\"}} 4.5\n", first)));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_nodes_lost_total 1\n"));
  EXPECT_THAT(text, HasSubstr(fmt::format("\ngpugeek_node_heartbeat_age_seconds{{node=\"{}\"}} 0\n", other)));
}

TEST_F(ControlPlaneMetricsTest, RecoveryPendingAcrossARestartIsStillTimed) {
  Register("node-a", "8xA100-SXM-80GB");
  const std::string id = Submit(kFour);
  cp_->Reconcile();
  Beat("node-a", {{id, 1, api::WorkloadPhase::kRunning}});
  ASSERT_TRUE(cp_->Drain("node-a").ok());  // requeued at t0; nowhere else to go
  ASSERT_EQ(cp_->GetJob(id)->record.state, JobState::kPending);
  clock_.Advance(seconds(10));
  Restart();  // the requeue time comes back from the PENDING job's record
  EXPECT_THAT(Render(), HasSubstr("\ngpugeek_jobs_oldest_pending_age_seconds 10\n"));
  clock_.Advance(seconds(20));
  Register("node-b", "8xA100-SXM-80GB");
  // The drained member reports its exit (its agent stopped it): only now is the job placed again.
  Beat("node-a");
  ASSERT_EQ(cp_->GetJob(id)->record.state, JobState::kPending);
  Beat("node-a", {{id, 1, api::WorkloadPhase::kExited, std::nullopt, 15}});
  ASSERT_EQ(cp_->GetJob(id)->record.state, JobState::kScheduled);
  ASSERT_EQ(NodeOf(id), "node-b");
  Beat("node-b", {{id, 2, api::WorkloadPhase::kRunning}});
  const std::string text = Render();
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_duration_seconds_sum 30\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_duration_seconds_count 1\n"));
  // Requeued at t = 0 (the drain), its member's exit reported at 30 s: then placed and running at once.
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_phase_seconds_sum{phase=\"detect\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_job_recovery_phase_seconds_sum{phase=\"stop\"} 30\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_node_cordoned{node=\"node-a\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ngpugeek_jobs_oldest_pending_age_seconds 0\n"));
}

}  // namespace
}  // namespace gpugeek::controlplane
