#include "controlplane/controllers/deployment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include <fmt/format.h>

#include "controlplane/testing/control_plane_fixture.h"
#include "http/server.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using J = nlohmann::json;
using std::chrono::seconds;
using ::testing::HasSubstr;

// Two versions, 90/10, 3 replicas at first (2 + 1), at most 4.
constexpr char kTwoVersions[] = R"(kind: service
name: gpt
port: 8000
replicas: {min: 0, max: 4, initial: 3}
traffic: {sticky: {header: X-User}, retries: 3, activator: {queue: 50, timeout: 30s}}
versions:
  - name: v1
    weight: 90
    resources: {accelerators: H100-SXM-80GB:1}
    run: python3 serve.py --port $PORT
  - name: v2
    weight: 10
    resources: {accelerators: H100-SXM-80GB:1}
    run: python3 serve.py --port $PORT --checkpoint v2.pt
)";

std::string OneVersion(const std::string& run = "python3 serve.py --port $PORT") {
  return "kind: service\nname: gpt\nreplicas: {max: 2, initial: 1}\nreadiness: {path: /health, failure_threshold: "
         "2}\nstartup_budget: 30s\nresources: {accelerators: H100-SXM-80GB:1}\nrun: " +
         run + "\n";
}

// Replica servers answering GET /health on consecutive ports of 127.0.0.1 (the controller gives the
// lowest free port of its range first), with a switch per server.
class ReplicaServers {
 public:
  explicit ReplicaServers(int n) {
    std::mt19937 rng(std::random_device{}());
    for (int attempt = 0; attempt < 50 && static_cast<int>(servers_.size()) < n; ++attempt) {
      servers_.clear();
      first_port_ = 30000 + static_cast<int>(rng() % 20000);
      for (int i = 0; i < n; ++i) {
        auto server = http::Server::Create({.host = "127.0.0.1", .port = first_port_ + i, .name = "replica"});
        if (!server.ok()) break;
        const size_t index = servers_.size();
        healthy_[index] = true;
        (*server)->Route("GET", "/health", [this, index](const http::Request&) -> absl::StatusOr<http::Reply> {
          if (!healthy_[index]) return absl::UnavailableError("loading");
          return http::Reply::Json(J::object());
        });
        if (!(*server)->Start().ok()) break;
        servers_.push_back(std::move(*server));
      }
    }
    EXPECT_EQ(static_cast<int>(servers_.size()), n);
  }
  ~ReplicaServers() {
    for (auto& s : servers_) s->Stop();
  }
  int first_port() const { return first_port_; }
  void SetHealthy(int i, bool healthy) { healthy_[i] = healthy; }

 private:
  int first_port_ = 0;
  std::atomic<bool> healthy_[4];
  std::vector<std::unique_ptr<http::Server>> servers_;
};

class DeploymentTest : public testing::ControlPlaneFixture {
 protected:
  void SetUp() override {
    ControlPlaneFixture::SetUp();
    api::Registration r = Registration("node-a", "8xH100-SXM-80GB");
    r.address = "127.0.0.1";
    ASSERT_TRUE(cp_->Register(r).ok());
    NewController();
  }
  void NewController(DeploymentOptions options = {}) {
    options_ = options;
    deployments_ = std::make_unique<DeploymentController>(*cp_, *store_, clock_, options);
  }
  void TearDown() override {
    deployments_.reset();
    ControlPlaneFixture::TearDown();
  }
  store::ServiceRecord Apply(const std::string& yaml) {
    auto s = deployments_->Apply(yaml, "team-a", "alice");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : store::ServiceRecord{};
  }
  // The service's live replica jobs by name.
  std::map<std::string, JobView> Jobs(JobState state) {
    std::map<std::string, JobView> out;
    const std::vector<JobView> list = cp_->ListJobs({.state = state, .tenant = "team-a", .limit = 1000}).value();
    for (const JobView& j : list) {
      out.emplace(j.record.name, j);
    }
    return out;
  }
  std::vector<std::string> Names(JobState state) {
    std::vector<std::string> out;
    for (const auto& [name, j] : Jobs(state)) out.push_back(name);
    return out;
  }
  // Places the pending replicas and reports them RUNNING.
  void RunAll() {
    cp_->Reconcile();
    std::vector<api::WorkloadReport> reports;
    const std::vector<JobView> list = cp_->ListJobs({.state = JobState::kScheduled, .limit = 1000}).value();
    for (const JobView& j : list) {
      reports.push_back({j.record.id, j.record.epoch, api::WorkloadPhase::kRunning});
    }
    Beat("node-a", reports);
  }
  std::map<std::string, std::string> States(const std::string& name) {
    std::map<std::string, std::string> out;
    auto s = deployments_->Find(name);
    EXPECT_TRUE(s.ok()) << s.status();
    const std::vector<ReplicaView> replicas = deployments_->Replicas(*s).value();
    for (const ReplicaView& r : replicas) {
      out[r.version + "-" + std::to_string(r.ordinal)] = r.state;
    }
    return out;
  }

  DeploymentOptions options_;
  std::unique_ptr<DeploymentController> deployments_;
};

TEST_F(DeploymentTest, ReplicasAreJobsWithTheirNamesPortsAndVariables) {
  const store::ServiceRecord s = Apply(kTwoVersions);
  EXPECT_EQ(s.id, "s-000001");
  EXPECT_EQ(s.desired, "v1=2,v2=1");
  EXPECT_EQ(s.generation, 1);
  deployments_->Reconcile();
  const auto jobs = Jobs(JobState::kPending);
  ASSERT_EQ(Names(JobState::kPending), (std::vector<std::string>{"gpt-v1-0", "gpt-v1-1", "gpt-v2-0"}));
  EXPECT_EQ(jobs.at("gpt-v1-0").record.platform_env,
            (std::map<std::string, std::string>{
                {"PORT", "20000"}, {"GPUGEEK_SERVICE", "gpt"}, {"GPUGEEK_SERVICE_VERSION", "v1"}}));
  EXPECT_EQ(jobs.at("gpt-v1-1").record.platform_env.at("PORT"), "20001");
  EXPECT_EQ(jobs.at("gpt-v2-0").record.platform_env,
            (std::map<std::string, std::string>{
                {"PORT", "20002"}, {"GPUGEEK_SERVICE", "gpt"}, {"GPUGEEK_SERVICE_VERSION", "v2"}}));
  EXPECT_EQ(jobs.at("gpt-v1-0").record.submitted_by, "alice");
  EXPECT_THAT(jobs.at("gpt-v2-0").record.spec_yaml, HasSubstr("--checkpoint v2.pt"));
  // Another pass starts nothing more; the agent is told the variables.
  deployments_->Reconcile();
  EXPECT_EQ(Jobs(JobState::kPending).size(), 3u);
  RunAll();
  bool told = false;
  for (const api::Assignment& a : Assignments("node-a")) {
    if (a.job_id == jobs.at("gpt-v2-0").record.id) {
      told = true;
      EXPECT_EQ(a.platform_env.at("PORT"), "20002");
      EXPECT_EQ(a.platform_env.at("GPUGEEK_SERVICE_VERSION"), "v2");
    }
  }
  EXPECT_TRUE(told);
  EXPECT_EQ(States("gpt"),
            (std::map<std::string, std::string>{{"v1-0", "STARTING"}, {"v1-1", "STARTING"}, {"v2-0", "STARTING"}}));

  // Another tenant cannot take the name; a bad spec names its field.
  EXPECT_EQ(deployments_->Apply(kTwoVersions, "team-b", "bob").status().code(), absl::StatusCode::kAlreadyExists);
  auto bad = deployments_->Apply("kind: service\nname: x\nreplicas: {max: -1}\nrun: a\n", "team-a", "alice");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("replicas.max"));
}

TEST_F(DeploymentTest, SplitByWeightGivesEveryWeightedVersionOne) {
  EXPECT_EQ(SplitByWeight(3, {{"v1", 90}, {"v2", 10}}), (std::map<std::string, int>{{"v1", 2}, {"v2", 1}}));
  EXPECT_EQ(SplitByWeight(10, {{"v1", 90}, {"v2", 10}}), (std::map<std::string, int>{{"v1", 9}, {"v2", 1}}));
  EXPECT_EQ(SplitByWeight(4, {{"a", 50}, {"b", 25}, {"c", 25}}),
            (std::map<std::string, int>{{"a", 2}, {"b", 1}, {"c", 1}}));
  // Fewer than the versions taking traffic: each still has one (its requests would wait forever otherwise).
  EXPECT_EQ(SplitByWeight(1, {{"v1", 90}, {"v2", 10}}), (std::map<std::string, int>{{"v1", 1}, {"v2", 1}}));
  EXPECT_EQ(SplitByWeight(0, {{"v1", 100}}), (std::map<std::string, int>{{"v1", 0}}));
  EXPECT_EQ(SplitByWeight(5, {{"v1", 0}, {"v2", 100}}), (std::map<std::string, int>{{"v1", 0}, {"v2", 5}}));
  EXPECT_EQ(ParseDesired(FormatDesired({{"v1", 2}, {"v2", 0}})), (std::map<std::string, int>{{"v1", 2}, {"v2", 0}}));
}

TEST_F(DeploymentTest, AFailedReplicaIsReplacedAfterItsBackoff) {
  Apply(OneVersion());
  deployments_->Reconcile();
  RunAll();
  const JobView first = Jobs(JobState::kRunning).at("gpt-v1-0");
  Beat("node-a", {{first.record.id, first.record.epoch, api::WorkloadPhase::kExited, 1}});
  ASSERT_EQ(State(first.record.id), JobState::kFailed);
  deployments_->Reconcile();  // ended; the version backs off 1 s
  EXPECT_TRUE(Jobs(JobState::kPending).empty());
  EXPECT_EQ(States("gpt").at("v1-0"), "ENDED");
  clock_.Advance(seconds(1));
  deployments_->Reconcile();
  const auto pending = Jobs(JobState::kPending);
  ASSERT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-1"});
  EXPECT_EQ(pending.at("gpt-v1-1").record.platform_env.at("PORT"), "20000");  // the ended one's port is free

  // It fails too: now 2 s.
  RunAll();
  const JobView second = Jobs(JobState::kRunning).at("gpt-v1-1");
  Beat("node-a", {{second.record.id, second.record.epoch, api::WorkloadPhase::kExited, 1}});
  deployments_->Reconcile();
  clock_.Advance(seconds(1));
  deployments_->Reconcile();
  EXPECT_TRUE(Jobs(JobState::kPending).empty());
  clock_.Advance(seconds(1));
  deployments_->Reconcile();
  EXPECT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-2"});

  // Cancelled by someone else: replaced as well.
  RunAll();
  const JobView third = Jobs(JobState::kRunning).at("gpt-v1-2");
  ASSERT_TRUE(cp_->Cancel(third.record.id, "by hand").ok());
  deployments_->Reconcile();
  clock_.Advance(seconds(4));
  deployments_->Reconcile();
  EXPECT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-3"});
}

TEST_F(DeploymentTest, ScaleToNAndToZeroCancelsTheHighestOrdinals) {
  const store::ServiceRecord s = Apply(kTwoVersions);
  deployments_->Reconcile();
  auto scaled = deployments_->Scale(s.id, J{{"v1", 3}}, "scaled by alice");
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(*scaled, (std::map<std::string, int>{{"v1", 3}, {"v2", 1}}));
  deployments_->Reconcile();
  EXPECT_EQ(Names(JobState::kPending), (std::vector<std::string>{"gpt-v1-0", "gpt-v1-1", "gpt-v1-2", "gpt-v2-0"}));
  EXPECT_EQ(Jobs(JobState::kPending).at("gpt-v1-2").record.platform_env.at("PORT"), "20003");

  ASSERT_TRUE(deployments_->Scale(s.id, J{{"v1", 1}}, "down").ok());
  deployments_->Reconcile();
  EXPECT_EQ(Names(JobState::kPending), (std::vector<std::string>{"gpt-v1-0", "gpt-v2-0"}));
  EXPECT_EQ(Names(JobState::kCancelled), (std::vector<std::string>{"gpt-v1-1", "gpt-v1-2"}));

  ASSERT_TRUE(deployments_->Scale(s.id, J{{"v1", 0}, {"v2", 0}}, "zero").ok());
  deployments_->Reconcile();
  EXPECT_TRUE(Jobs(JobState::kPending).empty());
  EXPECT_EQ(deployments_->Find("gpt")->desired, "v1=0,v2=0");

  // Errors name the field.
  auto unknown = deployments_->Scale(s.id, J{{"v9", 1}}, "");
  EXPECT_EQ(unknown.status().message(), "replicas.v9: no such version; the versions are v1, v2");
  auto over = deployments_->Scale(s.id, J{{"v1", 4}, {"v2", 1}}, "");
  EXPECT_EQ(over.status().message(), "replicas: 5 in all; the spec allows 0..4 (replicas.min, replicas.max)");
  auto negative = deployments_->Scale(s.id, J{{"v1", -1}}, "");
  EXPECT_EQ(negative.status().message(), "replicas.v1: -1 is not a count 0..4");
}

TEST_F(DeploymentTest, TrafficWeightsAreValidatedAndRewriteTheSpec) {
  const store::ServiceRecord s = Apply(kTwoVersions);
  auto promoted = deployments_->SetTraffic(s.id, J{{"v2", 100}});
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  EXPECT_EQ(*promoted, (std::map<std::string, int>{{"v1", 0}, {"v2", 100}}));
  const store::ServiceRecord after = *deployments_->Find("gpt");
  EXPECT_EQ(after.generation, 2);
  EXPECT_EQ(after.desired, "v1=0,v2=3");  // the total, split by the new weights
  auto spec = api::ParseServiceSpec(after.spec_yaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->versions[0].weight_percent, 0);
  EXPECT_EQ(spec->versions[1].weight_percent, 100);
  EXPECT_EQ(spec->traffic.sticky->name, "X-User");  // the rest of the spec stays

  EXPECT_EQ(deployments_->SetTraffic(s.id, J{{"v1", 80}, {"v2", 10}}).status().message(),
            "weights: sum to 90; they must sum to 100");
  EXPECT_EQ(deployments_->SetTraffic(s.id, J{{"v3", 100}}).status().message(),
            "weights.v3: no such version; the versions are v1, v2");
  EXPECT_EQ(deployments_->SetTraffic(s.id, J{{"v1", 101}}).status().message(),
            "weights.v1: 101 is not a whole percent 0..100");
  EXPECT_EQ(deployments_->Find("gpt")->generation, 2);  // nothing changed
}

TEST_F(DeploymentTest, EndpointsListOnlyReadyReplicasInTheGatewayShape) {
  ReplicaServers replicas(2);
  NewController({.first_port = replicas.first_port(), .last_port = replicas.first_port() + 1});
  const store::ServiceRecord s = Apply(kTwoVersions);
  ASSERT_TRUE(deployments_->Scale(s.id, J{{"v1", 1}, {"v2", 1}}, "").ok());
  deployments_->Reconcile();
  RunAll();
  deployments_->Reconcile();  // probes begin
  const auto jobs = Jobs(JobState::kRunning);
  ASSERT_EQ(jobs.size(), 2u);
  const std::string v1 = jobs.at("gpt-v1-0").record.id;
  const std::string v2 = jobs.at("gpt-v2-0").record.id;
  replicas.SetHealthy(1, false);  // v2's server is loading
  J route = {{"service", "gpt"},
             {"hosts", {"gpt"}},
             {"path_prefix", "/"},
             {"sticky", {{"header", "X-User"}}},
             {"retries", 3},
             {"activator", {{"queue", 50}, {"timeout_ms", 30000}}},
             {"versions",
              {{{"name", "v1"}, {"weight", 90}, {"replicas", J::array()}},
               {{"name", "v2"}, {"weight", 10}, {"replicas", J::array()}}}}};
  EXPECT_EQ(*deployments_->Routes(), (J{{"routes", {route}}}));

  deployments_->Probe();
  route["versions"][0]["replicas"] = J::array(
      {J{{"id", v1}, {"address", fmt::format("127.0.0.1:{}", replicas.first_port())}, {"capacity_milli", 1000}}});
  EXPECT_EQ(*deployments_->Routes(), (J{{"routes", {route}}}));
  EXPECT_EQ(States("gpt"), (std::map<std::string, std::string>{{"v1-0", "READY"}, {"v2-0", "STARTING"}}));

  // v2 comes up; v1 fails 3 probes in a row (failure_threshold: 3 by default).
  replicas.SetHealthy(1, true);
  replicas.SetHealthy(0, false);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(1));
    deployments_->Probe();
  }
  EXPECT_EQ(States("gpt"), (std::map<std::string, std::string>{{"v1-0", "NOT_READY"}, {"v2-0", "READY"}}));
  route["versions"][0]["replicas"] = J::array();
  route["versions"][1]["replicas"] = J::array(
      {J{{"id", v2}, {"address", fmt::format("127.0.0.1:{}", replicas.first_port() + 1)}, {"capacity_milli", 1000}}});
  EXPECT_EQ(*deployments_->Routes(), (J{{"routes", {route}}}));
}

TEST_F(DeploymentTest, ARollingUpdateCancelsTheOldReplicaOnceTheNewOneIsReady) {
  ReplicaServers replicas(2);
  NewController({.first_port = replicas.first_port(), .last_port = replicas.first_port() + 1});
  Apply(OneVersion());
  deployments_->Reconcile();
  RunAll();
  deployments_->Reconcile();
  deployments_->Probe();
  ASSERT_EQ(States("gpt"), (std::map<std::string, std::string>{{"v1-0", "READY"}}));
  const std::string old_job = Jobs(JobState::kRunning).at("gpt-v1-0").record.id;

  // Same spec again: nothing changes.
  EXPECT_EQ(Apply(OneVersion()).generation, 1);
  const store::ServiceRecord updated = Apply(OneVersion("python3 serve.py --port $PORT --fast"));
  EXPECT_EQ(updated.generation, 2);
  deployments_->Reconcile();
  EXPECT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-1"});
  EXPECT_EQ(State(old_job), JobState::kRunning);  // serving until the new one is ready
  replicas.SetHealthy(1, false);
  RunAll();
  deployments_->Reconcile();
  clock_.Advance(seconds(1));
  deployments_->Probe();
  deployments_->Reconcile();
  EXPECT_EQ(State(old_job), JobState::kRunning);
  EXPECT_EQ(States("gpt"), (std::map<std::string, std::string>{{"v1-0", "READY"}, {"v1-1", "STARTING"}}));
  replicas.SetHealthy(1, true);
  clock_.Advance(seconds(1));
  deployments_->Probe();
  deployments_->Reconcile();
  EXPECT_EQ(State(old_job), JobState::kCancelled);
  EXPECT_EQ(States("gpt"), (std::map<std::string, std::string>{{"v1-0", "ENDED"}, {"v1-1", "READY"}}));
}

TEST_F(DeploymentTest, AReplicaNotReadyWithinItsStartupBudgetIsRestarted) {
  ReplicaServers replicas(1);
  NewController({.first_port = replicas.first_port(), .last_port = replicas.first_port()});
  replicas.SetHealthy(0, false);
  Apply(OneVersion());  // startup_budget: 30s
  deployments_->Reconcile();
  RunAll();
  deployments_->Reconcile();
  const std::string job = Jobs(JobState::kRunning).at("gpt-v1-0").record.id;
  clock_.Advance(seconds(30));
  deployments_->Probe();
  deployments_->Reconcile();
  EXPECT_EQ(State(job), JobState::kRunning);
  clock_.Advance(seconds(1));
  deployments_->Reconcile();
  EXPECT_EQ(State(job), JobState::kCancelled);
  clock_.Advance(seconds(1));
  deployments_->Reconcile();
  // Its one port stays taken while the cancelled job still holds its allocation (its server may listen).
  EXPECT_TRUE(Jobs(JobState::kPending).empty());
  Beat("node-a", {{job, 1, api::WorkloadPhase::kExited, std::nullopt, 15}});
  deployments_->Reconcile();
  EXPECT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-1"});
}

TEST_F(DeploymentTest, ARestartedServerAdoptsTheReplicasAndDeleteCancelsThem) {
  Apply(kTwoVersions);
  deployments_->Reconcile();
  RunAll();
  const auto before = Jobs(JobState::kRunning);
  ASSERT_EQ(before.size(), 3u);

  deployments_.reset();
  Restart();
  NewController();
  deployments_->Reconcile();
  deployments_->Reconcile();
  EXPECT_TRUE(Jobs(JobState::kPending).empty());
  const auto after = Jobs(JobState::kRunning);
  ASSERT_EQ(after.size(), 3u);
  for (const auto& [name, j] : before) EXPECT_EQ(after.at(name).record.id, j.record.id) << name;
  // A new replica takes a port none of them holds.
  const store::ServiceRecord s = *deployments_->Find("gpt");
  ASSERT_TRUE(deployments_->Scale(s.id, J{{"v1", 3}}, "up").ok());
  deployments_->Reconcile();
  ASSERT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-2"});
  EXPECT_EQ(Jobs(JobState::kPending).at("gpt-v1-2").record.platform_env.at("PORT"), "20003");

  auto deleted = deployments_->Delete(s.id, "deleted by alice");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->state, "DELETED");
  deployments_->Reconcile();
  EXPECT_EQ(Jobs(JobState::kCancelled).size(), 4u);
  EXPECT_EQ(deployments_->Find("gpt").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*deployments_->Routes(), (J{{"routes", J::array()}}));
}

TEST_F(DeploymentTest, AJobACrashLeftUnnamedInItsReplicaRowIsAdopted) {
  const store::ServiceRecord s = Apply(OneVersion());
  deployments_->Reconcile();
  const std::string job = Jobs(JobState::kPending).at("gpt-v1-0").record.id;
  // As if the server stopped between the job's submission and the row naming it.
  store::ReplicaRecord row = store_->ListReplicas(s.id, /*active_only=*/false).value().at(0);
  row.job_id.clear();
  ASSERT_TRUE(store_->PutReplica(row).ok());
  NewController();
  deployments_->Reconcile();
  EXPECT_EQ(Jobs(JobState::kPending).size(), 1u);
  EXPECT_EQ(store_->ListReplicas(s.id, /*active_only=*/false).value().at(0).job_id, job);
  // A row whose job was never stored ends, and a new replica takes its place.
  row.ordinal = 1;
  row.job_id.clear();
  ASSERT_TRUE(store_->PutReplica(row).ok());
  NewController();
  deployments_->Reconcile();
  const auto rows = store_->ListReplicas(s.id, /*active_only=*/false).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].state, "ENDED");
  EXPECT_EQ(rows[1].reason, "its job was never submitted");
  EXPECT_EQ(Names(JobState::kPending), std::vector<std::string>{"gpt-v1-0"});
}

TEST_F(DeploymentTest, TheAutoscalerScalesOnTheGatewaysLoadAndToZero) {
  const std::string spec =
      "kind: service\nname: gpt\nreplicas: {min: 0, max: 4, initial: 1}\nautoscaling: "
      "{target_concurrency: 10, stable_window: 6s, scale_to_zero_grace: 0s}\nresources: "
      "{accelerators: H100-SXM-80GB:1}\nrun: serve\n";
  Apply(spec);
  deployments_->Reconcile();
  EXPECT_EQ(Jobs(JobState::kPending).size(), 1u);
  // Two gateways: 25 + 15 in flight and queued = 40 -> 4 replicas of target 10.
  deployments_->ReportLoad("gw-1", {{"gpt", {20, 5}}});
  deployments_->ReportLoad("gw-2", {{"gpt", {15, 0}}});
  EXPECT_EQ(deployments_->Load("gpt"), 40);
  deployments_->Reconcile();
  const store::ServiceRecord s = *deployments_->Find("gpt");
  EXPECT_EQ(s.desired, "v1=4");
  EXPECT_THAT(s.reason, HasSubstr("autoscaler: 1 -> 4 replicas"));
  EXPECT_EQ(Jobs(JobState::kPending).size(), 4u);
  // A gateway silent for more than 5 s no longer counts; no load at all scales to zero.
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(seconds(1));
    deployments_->ReportLoad("gw-1", {{"gpt", {0, 0}}});
    deployments_->Reconcile();
  }
  EXPECT_EQ(deployments_->Load("gpt"), 0);
  EXPECT_EQ(deployments_->Find("gpt")->desired, "v1=0");
  EXPECT_TRUE(Jobs(JobState::kPending).empty());
}

// Two versions at one chosen replica run two (one each, SplitByWeight); idle, the autoscaler still reaches 0:
// it counts the replicas it chose, so its scale-down rate (half the ready per decision) does not hold it at 1.
TEST_F(DeploymentTest, TwoVersionsWithReadyReplicasScaleToZeroWhenIdle) {
  ReplicaServers replicas(2);
  NewController({.first_port = replicas.first_port(), .last_port = replicas.first_port() + 1});
  const std::string spec =
      "kind: service\nname: gpt\nreplicas: {min: 0, max: 4, initial: 1}\nautoscaling: {target_concurrency: 10, "
      "stable_window: 6s, scale_to_zero_grace: 2s}\nreadiness: {path: /health}\nversions:\n  - {name: v1, weight: "
      "90, resources: {accelerators: H100-SXM-80GB:1}, run: serve}\n  - {name: v2, weight: 10, resources: "
      "{accelerators: H100-SXM-80GB:1}, run: serve}\n";
  const store::ServiceRecord s = Apply(spec);
  EXPECT_EQ(s.desired, "v1=1,v2=1");
  deployments_->Reconcile();
  RunAll();
  deployments_->Reconcile();  // probes begin
  deployments_->Probe();
  EXPECT_EQ(States("gpt"), (std::map<std::string, std::string>{{"v1-0", "READY"}, {"v2-0", "READY"}}));
  std::vector<std::string> decisions;
  for (int i = 0; i < 15; ++i) {
    clock_.Advance(seconds(1));
    deployments_->ReportLoad("gw-1", {{"gpt", {0, 0}}});
    deployments_->Reconcile();
    const std::string desired = deployments_->Find("gpt")->desired;
    if (decisions.empty() || decisions.back() != desired) decisions.push_back(desired);
  }
  // Held for the stable window (6 s) and the grace (2 s), then both versions to 0.
  EXPECT_EQ(decisions, (std::vector<std::string>{"v1=1,v2=1", "v1=0,v2=0"}));
  EXPECT_THAT(deployments_->Find("gpt")->reason, HasSubstr("autoscaler: 1 -> 0 replicas: idle"));
}

}  // namespace
}  // namespace gpugeek::controlplane
