// Billing on the server (billing.h), on a FakeClock with the test playing the agents: each metered
// segment is charged once at its node's price, credit first, the provider paid less the platform's fee;
// restarts neither lose nor repeat a charge; budgets refuse (402) and stop work; credit expires.
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "absl/numeric/int128.h"
#include "absl/strings/match.h"

#include "controlplane/testing/control_plane_fixture.h"
#include "http/status_http.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using ledger::Money;
using std::chrono::minutes;
using std::chrono::seconds;

class BillingTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    o.billing = billing_;
    return o;
  }
  // A 1-GPU node of provider p1 at `price` micro-units per GPU-hour.
  void RegisterPriced(const std::string& node, int64_t price) {
    api::Registration r = Registration(node, "1xH100-SXM-80GB");
    r.price_micros_per_gpu_hour = price;
    r.labels["provider"] = "p1";
    ASSERT_TRUE(cp_->Register(r).ok());
  }
  std::string Run(const std::string& node) {
    const std::string id = Submit("name: paid\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1000\n");
    cp_->Reconcile();
    EXPECT_EQ(State(id), JobState::kScheduled);
    Beat(node, {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
    return id;
  }
  Money Balance(const std::string& account) {
    Money total;
    for (const ledger::Transaction& t : cp_->billing().Entries("", 0, 100000).entries) {
      for (const ledger::Posting& p : t.postings) {
        if (p.account == account) total += p.amount;
      }
    }
    return total;
  }
  BillingOptions billing_{
      .trial_credit_micros = 1'000'000, .trial_credit_ttl = std::chrono::hours(24), .platform_fee_bps = 1000};
};

// One hour of one GPU at 2.50 = 2.50: the 1.00 trial credit first, then 1.50 of cash (below zero: the
// time was used); provider p1 is owed 2.50 less 10% = 2.25, the platform's fee is 0.25. The job's own
// usage says the same 2.50.
TEST_F(BillingTest, AMeteredHourIsChargedOnceCreditFirstAndSurvivesRestarts) {
  ASSERT_TRUE(cp_->billing().GrantTrial("team-a").ok());
  RegisterPriced("node-a", 2'500'000);
  const std::string id = Run("node-a");
  clock_.Advance(std::chrono::hours(1));
  const api::WorkloadReport exited{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0};
  Beat("node-a", {exited});
  ASSERT_EQ(State(id), JobState::kSucceeded);
  EXPECT_EQ(UsageToJson(cp_->GetJob(id)->usage)["cost_micros"], 2'500'000);

  const Billing::Page page = cp_->billing().Entries("team-a", 0, 100);
  ASSERT_EQ(page.entries.size(), 2u);
  const ledger::Transaction& charge = page.entries[1];
  EXPECT_EQ(charge.id, "usage/" + id + "/e1/r0");
  EXPECT_EQ(charge.kind, ledger::Kind::kCharge);
  EXPECT_EQ(charge.gpu_milli_seconds, 3'600'000);
  EXPECT_EQ(charge.gpu_model, "H100-SXM-80GB");
  EXPECT_EQ(charge.postings, (std::vector<ledger::Posting>{{"tenant:team-a:credit:trial", Money::Units(-1)},
                                                           {"tenant:team-a:cash", Money::Micros(-1'500'000)},
                                                           {"provider:p1:payable", Money::Micros(2'250'000)},
                                                           {"platform:fees", Money::Micros(250'000)}}));
  EXPECT_EQ(cp_->billing().Balance("team-a").available(), Money::Micros(-1'500'000));
  EXPECT_EQ(cp_->billing().Owed("p1"), Money::Micros(2'250'000));

  // A restart replays the ledger; the agent, unsure its exit was heard, reports it again: nothing more.
  Restart();
  Beat("node-a", {exited});
  EXPECT_EQ(cp_->billing().Entries("", 0, 100).entries.size(), 2u);
  EXPECT_EQ(cp_->billing().Balance("team-a").available(), Money::Micros(-1'500'000));
  EXPECT_EQ(cp_->billing().Total(), Money{});
  // The trial credit is granted once.
  ASSERT_TRUE(cp_->billing().GrantTrial("team-a").ok());
  EXPECT_EQ(cp_->billing().Entries("", 0, 100).entries.size(), 2u);
  // The provider is paid out, not beyond what it is owed.
  EXPECT_EQ(cp_->billing().PayOut("payout/p1/1", "p1", Money::Units(3)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cp_->billing().PayOut("payout/p1/1", "p1", Money::Micros(2'250'000)).ok());
  EXPECT_EQ(cp_->billing().Owed("p1"), Money{});
}

// Server restarts in the middle of a segment, each shorter than the agents' lease (so the workload runs on:
// a lease of 2 h here, where the clock jumps 20 min at a time): the whole hour is metered and charged, once
// (the open segment is stored with the job, usage.h OpenSegment).
class LongLeaseBillingTest : public BillingTest {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o = BillingTest::Options();
    o.lease = std::chrono::hours(2);
    return o;
  }
};

TEST_F(LongLeaseBillingTest, AServerRestartMidSegmentMetersAndChargesTheWholeSegmentOnce) {
  RegisterPriced("node-a", 2'500'000);
  const std::string id = Run("node-a");
  clock_.Advance(minutes(20));
  Restart();
  clock_.Advance(minutes(20));
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  Restart();
  clock_.Advance(minutes(20));
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  ASSERT_EQ(State(id), JobState::kSucceeded) << cp_->GetJob(id)->record.reason;
  EXPECT_EQ(cp_->GetJob(id)->usage, (Usage{{"on-demand", "H100-SXM-80GB", 3'600'000, 2'500'000, 2'500'000}}));
  const Billing::Page page = cp_->billing().Entries("team-a", 0, 100);
  ASSERT_EQ(page.entries.size(), 1u);
  EXPECT_EQ(page.entries[0].gpu_milli_seconds, 3'600'000);
  EXPECT_EQ(cp_->billing().Balance("team-a").cash, Money::Micros(-2'500'000));
  EXPECT_TRUE(OpenSegmentsFromText(cp_->GetJob(id)->record.usage_json)->empty());
}

// Metering is exact against the committed events: 12 one-GPU jobs on A100 nodes at 1.70 and H100 nodes
// at 2.90 per GPU-hour start, fail (retried), succeed and sit through server restarts at random moments;
// each job's metered GPU time equals the time its events say it was RUNNING, and the tenant was charged
// exactly floor(sum of milli-GPU x ms x price / 3.6e9) - one exact quotient of all of it (the carry).
TEST_F(BillingTest, ChargesEqualARecomputationFromTheEventLog) {
  billing_.trial_credit_micros = 0;
  Restart();
  for (const auto& [node, spec, price] :
       {std::tuple{"a100-a", "2xA100-SXM-80GB", 1'700'000}, std::tuple{"h100-b", "2xH100-SXM-80GB", 2'900'000},
        std::tuple{"h100-c", "1xH100-SXM-80GB", 2'900'000}}) {
    api::Registration r = Registration(node, spec);
    r.price_micros_per_gpu_hour = price;
    ASSERT_TRUE(cp_->Register(r).ok());
  }
  std::mt19937 rng(20261204);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::map<std::string, int64_t> price_of;  // job -> price of its model's nodes
  for (int i = 0; i < 12; ++i) {
    const bool a100 = pick(0, 1) == 0;
    const std::string id = Submit(fmt::format(
        "name: j{}\nresources: {{accelerators: {}:1}}\nretry: {{on: [error], limit: 2, backoff: 1s}}\nrun: x\n", i,
        a100 ? "A100-SXM-80GB" : "H100-SXM-80GB"));
    price_of[id] = a100 ? 1'700'000 : 2'900'000;
  }
  std::set<std::pair<std::string, int64_t>> running;  // (job, epoch) reported running
  for (int step = 0; step < 400; ++step) {
    clock_.Advance(seconds(pick(1, 90)));
    if (pick(0, 19) == 0) Restart();
    bool all_ended = true;
    for (const char* node : {"a100-a", "h100-b", "h100-c"}) {
      std::vector<api::WorkloadReport> reports;
      for (const api::Assignment& a : Assignments(node)) {
        if (running.insert({a.job_id, a.epoch}).second) {
          reports.push_back({.job_id = a.job_id, .epoch = a.epoch, .phase = WorkloadPhase::kRunning});
        } else if (a.cancel || pick(0, 3) == 0) {
          reports.push_back({.job_id = a.job_id,
                             .epoch = a.epoch,
                             .phase = WorkloadPhase::kExited,
                             .exit_code = pick(0, 2) == 0 ? 1 : 0});
        } else {
          reports.push_back({.job_id = a.job_id, .epoch = a.epoch, .phase = WorkloadPhase::kRunning});
        }
      }
      Heartbeat(node, reports);
    }
    cp_->Reconcile();
    for (const auto& [id, price] : price_of) all_ended = all_ended && api::IsTerminal(State(id));
    if (all_ended) break;
  }
  absl::int128 numerator = 0;
  int64_t restarts = 0;
  for (const auto& [id, price] : price_of) {
    ASSERT_TRUE(api::IsTerminal(State(id))) << id;
    auto events = store_->ListEvents({.job_id = id, .limit = 10000});
    ASSERT_TRUE(events.ok());
    int64_t ms = 0;
    for (size_t e = 0; e + 1 < events->size(); ++e) {
      if ((*events)[e].to != JobState::kRunning) continue;
      ms += std::chrono::duration_cast<std::chrono::milliseconds>((*events)[e + 1].time - (*events)[e].time).count();
    }
    numerator += absl::int128(1000) * ms * price;
    const Usage usage = cp_->GetJob(id)->usage;
    int64_t metered = 0;
    for (const UsageLine& l : usage) metered += l.gpu_milli_seconds;
    EXPECT_EQ(metered, ms) << id;  // 1000 milli-GPU x seconds = ms
    restarts += cp_->GetJob(id)->record.restarts;
  }
  Money charged;
  for (const ledger::Transaction& t : cp_->billing().Entries("team-a", 0, 100000).entries) {
    ASSERT_EQ(t.kind, ledger::Kind::kCharge);
    for (const ledger::Posting& p : t.postings) {
      if (p.account.starts_with("tenant:team-a:")) charged -= p.amount;
    }
  }
  EXPECT_EQ(charged.micros, static_cast<int64_t>(numerator / ledger::kProrateDenominator));
  EXPECT_GT(charged.micros, 0);
  EXPECT_GT(restarts, 0) << "some jobs failed and were retried";
  EXPECT_EQ(cp_->billing().Total(), Money{});
}

// A charge carries what the same GPU time costs on-demand (the pool's on-demand reference price of the
// model, usage.h), so the cost report can say what spot saved: an hour on a 0.80 spot node beside a 2.50
// on-demand one is 0.80 charged, 2.50 on-demand.
TEST_F(BillingTest, AChargeCarriesItsOnDemandEquivalent) {
  api::Registration spot = Registration("spot-a", "1xH100-SXM-80GB", "spot");
  spot.price_micros_per_gpu_hour = 800'000;
  ASSERT_TRUE(cp_->Register(spot).ok());
  RegisterPriced("od-b", 2'500'000);
  const std::string id = Submit("name: s\nresources: {accelerators: H100-SXM-80GB:1, spot: true}\nrun: x\n");
  cp_->Reconcile();
  Beat("spot-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  clock_.Advance(std::chrono::hours(1));
  Heartbeat("od-b");
  Beat("spot-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  const Billing::Page page = cp_->billing().Entries("team-a", 0, 10);
  ASSERT_EQ(page.entries.size(), 1u);
  EXPECT_EQ(page.entries[0].capacity_type, "spot");
  EXPECT_EQ(page.entries[0].postings[0].amount, Money::Micros(-800'000));
  EXPECT_EQ(page.entries[0].on_demand_micros, 2'500'000);
  EXPECT_EQ(ledger::FromText(ledger::ToText(page.entries[0]))->on_demand_micros, 2'500'000);
}

// A job's own budget (api::JobSpec max_cost, max_price): max_price 2.00 keeps it off the 4.10 node; max_cost
// 0.50 at 1.50 per GPU-hour stops it after 20 min, whether or not the tenant's budgets are enforced.
TEST_F(BillingTest, AJobsMaxPriceChoosesItsNodesAndItsMaxCostStopsIt) {
  RegisterPriced("dear-a", 4'100'000);
  RegisterPriced("cheap-b", 1'500'000);
  const std::string capped = "resources: {accelerators: H100-SXM-80GB:1}\nmax_price: 2.00\nrun: x\n";
  const std::string id = Submit("name: one\nmax_cost: 0.50\n" + capped);
  const std::string second = Submit("name: two\n" + capped);
  cp_->Reconcile();
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(cp_->GetJob(id)->allocation->members.at(0).node, "cheap-b");
  EXPECT_EQ(State(second), JobState::kPending) << "the free node is above its max_price";
  EXPECT_TRUE(absl::StrContains(cp_->GetJob(second)->pending_reason, "above the job's max_price 2.00"))
      << cp_->GetJob(second)->pending_reason;
  Beat("cheap-b", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  clock_.Advance(minutes(19));
  Heartbeat("dear-a");
  Beat("cheap-b", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  EXPECT_EQ(State(id), JobState::kRunning);
  clock_.Advance(minutes(1));
  Heartbeat("dear-a");
  Beat("cheap-b", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  ASSERT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(cp_->GetJob(id)->record.reason, "budget: the job's max_cost 0.5000 is reached (0.5000 metered)");
}

// A dry run (Quote): the offers a job would take in its capacity preference order, each with the price of an
// hour of its GPUs and, from max_duration, the most it would cost; max_price drops the dearer one; nothing is
// stored. A planned job is priced from the planner's time on each GPU model.
TEST_F(BillingTest, AQuoteListsTheOffersAJobWouldTakeWithTheirCostAndStoresNothing) {
  RegisterPriced("dear-a", 4'100'000);
  api::Registration spot = Registration("cheap-b", "2xH100-SXM-80GB", "spot", "r1");
  spot.price_micros_per_gpu_hour = 1'500'000;
  ASSERT_TRUE(cp_->Register(spot).ok());
  cp_->Reconcile();
  const std::string spec =
      "name: q\nresources: {accelerators: H100-SXM-80GB:1, capacity: [spot, on-demand]}\nmax_duration: 2h\nrun: x\n";
  absl::StatusOr<JobQuote> q = cp_->Quote({.spec_yaml = spec, .tenant = "team-a"});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->lines.size(), 2u);
  EXPECT_EQ(q->lines[0].offer.capacity_type, "spot");
  EXPECT_EQ(q->lines[0].offer.region, "r1");
  EXPECT_EQ(q->lines[0].price_per_hour_micros, 1'500'000);
  EXPECT_TRUE(q->lines[0].fits_now);
  EXPECT_EQ(q->lines[0].estimate, "max_duration");
  EXPECT_EQ(q->lines[0].est_seconds, 7200);
  EXPECT_EQ(q->lines[0].est_cost_micros, 3'000'000);
  EXPECT_EQ(q->lines[1].offer.capacity_type, "on-demand");
  EXPECT_EQ(q->lines[1].offer.provider, "p1");
  EXPECT_EQ(q->lines[1].est_cost_micros, 8'200'000);
  EXPECT_EQ(q->available_micros, 0);
  EXPECT_TRUE(cp_->ListJobs({})->empty()) << "a quote stores nothing";
  // A 2-GPU job fits only the spot node now; with max_price 2.00 the 4.10 node is no offer at all.
  q = cp_->Quote({.spec_yaml = "name: q\nresources: {accelerators: H100-SXM-80GB:2}\nmax_price: 2.00\nrun: x\n",
                  .tenant = "team-a"});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->lines.size(), 1u);
  EXPECT_EQ(q->lines[0].offer.capacity_type, "spot");
  EXPECT_EQ(q->lines[0].price_per_hour_micros, 3'000'000);
  EXPECT_FALSE(q->lines[0].est_cost_micros.has_value()) << "no estimate without a plan or max_duration";
  // A bad spec is the same error as a submission's.
  EXPECT_EQ(cp_->Quote({.spec_yaml = "name: q\n", .tenant = "team-a"}).status().code(),
            absl::StatusCode::kInvalidArgument);

  // The planner's time for a LoRA of a small Llama on H100s prices the whole job.
  const std::string config = R"({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
      "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 1000, "num_key_value_heads": 8,
      "max_position_embeddings": 1024, "torch_dtype": "bfloat16"})";
  q = cp_->Quote({.spec_yaml = "name: tune\nmodel: tiny.json\ntask: {kind: lora, seq_len: 512, tokens: 2e8}\nrun: x\n",
                  .model_config_json = config,
                  .tenant = "team-a"});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_FALSE(q->lines.empty());
  EXPECT_FALSE(q->plan_json.empty());
  for (const QuoteLine& l : q->lines) {
    EXPECT_EQ(l.estimate, "planner");
    ASSERT_TRUE(l.est_seconds.has_value());
    EXPECT_GT(*l.est_seconds, 0);
    EXPECT_EQ(*l.est_cost_micros, int64_t{l.members} * l.gpus_per_member * l.gpu_milli * *l.est_seconds *
                                      l.offer.price_micros_per_gpu_hour / 3'600'000);
  }
}

class EnforcedBillingTest : public BillingTest {
 protected:
  void SetUp() override {
    billing_.enforce = true;
    BillingTest::SetUp();
  }
};

// A tenant with nothing to spend is refused with 402; with 1.00 of credit its job at 2.50/GPU-hour is
// stopped once its open segment has cost the 1.00 (24 min), and charged up to the member's exit.
TEST_F(EnforcedBillingTest, NoMoneyIsA402AndASpentBudgetStopsTheRunningJob) {
  RegisterPriced("node-a", 2'500'000);
  absl::StatusOr<JobView> refused =
      cp_->Submit({.spec_yaml = "name: x\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n", .tenant = "team-a"});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(http::IsPaymentRequired(refused.status()));
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 402);
  EXPECT_EQ(refused.status().message(),
            "tenant 'team-a' has 0.0000 to spend (credit 0.0000, cash 0.0000); an operator tops it up with `gpugeek "
            "top-up team-a AMOUNT`");

  ASSERT_TRUE(cp_->billing().GrantTrial("team-a").ok());
  const std::string id = Run("node-a");
  clock_.Advance(minutes(23));
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  EXPECT_EQ(State(id), JobState::kRunning) << "0.958 of 1.00 used";
  clock_.Advance(minutes(1));
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  ASSERT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(cp_->GetJob(id)->record.reason,
            "budget: tenant 'team-a' has spent its credit and cash (1.00 left, 1.00 running unbilled); top up to run "
            "again");
  ASSERT_EQ(Assignments("node-a").size(), 1u);
  EXPECT_TRUE(Assignments("node-a")[0].cancel) << "the member is told to stop: SIGTERM, its checkpoint moment";
  clock_.Advance(seconds(10));
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 143}});
  // 24 min 10 s at 2.50 = 1.006944: the credit's 1.00, then 0.006944 of cash.
  EXPECT_EQ(cp_->billing().Balance("team-a").credit, Money{});
  EXPECT_EQ(cp_->billing().Balance("team-a").cash, Money::Micros(-6'944));
  // A top-up lets it run again.
  ASSERT_TRUE(cp_->billing().Post(ledger::TopUp("top-up/team-a/1", "team-a", Money::Units(5), clock_.Now(), "")).ok());
  EXPECT_TRUE(
      cp_->Submit({.spec_yaml = "name: y\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n", .tenant = "team-a"})
          .ok());
}

// Unused trial credit is taken back at its expiry (posted by the writer's pass) and no longer spendable.
TEST_F(BillingTest, UnusedCreditExpires) {
  ASSERT_TRUE(cp_->billing().GrantTrial("team-a").ok());
  EXPECT_EQ(cp_->billing().Balance("team-a").credit, Money::Units(1));
  clock_.Advance(std::chrono::hours(25));
  cp_->Reconcile();
  EXPECT_EQ(cp_->billing().Balance("team-a").available(), Money{});
  const Billing::Page page = cp_->billing().Entries("team-a", 0, 100);
  ASSERT_EQ(page.entries.size(), 2u);
  EXPECT_EQ(page.entries[1].id, "expire/tenant:team-a:credit:trial");
  EXPECT_EQ(Balance("platform:grants"), Money{});
  EXPECT_EQ(cp_->billing().Total(), Money{});
}

// A node lost is the platform's failure: the member's segment is charged up to the loss being detected,
// and what it ran since the job's last checkpoint (which the next placement redoes) is refunded at once.
// 3.60 per GPU-hour is 1,000 micro-units a GPU-second: 100 s to the checkpoint, 50 s more, then silence
// until the node is down 7 s later (lease + fence grace + margin, 6 s): 157 s charged, 57 s refunded.
TEST_F(BillingTest, TimeLostWithANodeSinceTheLastCheckpointIsRefunded) {
  billing_.trial_credit_micros = 0;
  Restart();
  RegisterPriced("node-a", 3'600'000);
  const std::string id = Run("node-a");
  for (int s = 1; s <= 150; ++s) {
    clock_.Advance(seconds(1));
    std::optional<int64_t> step;
    if (s == 100) step = 10;
    Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning, .checkpoint_step = step}});
  }
  ASSERT_EQ(cp_->GetJob(id)->record.checkpoint_step, 10);
  clock_.Advance(seconds(7));
  cp_->Reconcile();
  ASSERT_EQ(NodeState("node-a"), "down");
  const std::vector<ledger::Transaction> entries = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].id, "usage/" + id + "/e1/r0");
  EXPECT_EQ(ledger::TenantChange(entries[0]), Money::Micros(-157'000));
  EXPECT_EQ(entries[1].id, "refund/" + id + "/e1/r0");
  EXPECT_EQ(entries[1].kind, ledger::Kind::kRefund);
  EXPECT_EQ(entries[1].job, id);
  // The charge reversed in proportion: the provider gives back its 90%, the platform its 10% fee.
  EXPECT_EQ(entries[1].postings, (std::vector<ledger::Posting>{{"tenant:team-a:cash", Money::Micros(57'000)},
                                                               {"provider:p1:payable", Money::Micros(-51'300)},
                                                               {"platform:fees", Money::Micros(-5'700)}}));
  EXPECT_EQ(entries[1].memo, "node-a lost: the 57 s run since checkpoint step 10");
  EXPECT_EQ(cp_->billing().Balance("team-a").cash, Money::Micros(-100'000));
  EXPECT_EQ(cp_->billing().Owed("p1"), Money::Micros(141'300 - 51'300));
  // Once: a restart and the node's agent coming back change nothing.
  Restart();
  Beat("node-a");
  EXPECT_EQ(cp_->billing().Entries("team-a", 0, 100).entries.size(), 2u);
  EXPECT_EQ(cp_->billing().Total(), Money{});
}

// A spot reclaim is the platform's doing too: the member is told to stop (SIGTERM: its checkpoint moment)
// and what it ran after its last checkpoint is refunded. It checkpoints 2 s after the notice and exits 1 s
// later: 1 s back of its 63 s. A member that exits on its own is not refunded (the node of the first test).
TEST_F(BillingTest, AReclaimRefundsOnlyTheTimeAfterTheCheckpointTakenAtItsNotice) {
  billing_.trial_credit_micros = 0;
  Restart();
  RegisterPriced("node-a", 3'600'000);
  RegisterPriced("node-b", 3'600'000);
  const std::string id = Run("node-a");
  for (int s = 1; s <= 60; ++s) {
    clock_.Advance(seconds(1));
    Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
    Beat("node-b");
  }
  ASSERT_TRUE(cp_->Reclaim("node-a", seconds(30)).ok());
  clock_.Advance(seconds(2));
  Beat("node-b");
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning, .checkpoint_step = 60}});
  clock_.Advance(seconds(1));
  Beat("node-b");
  Beat("node-a",
       {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .term_signal = 15, .checkpoint_step = 60}});
  const std::vector<ledger::Transaction> entries = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(ledger::TenantChange(entries[0]), Money::Micros(-63'000));
  EXPECT_EQ(entries[1].id, "refund/" + id + "/e1/r0");
  EXPECT_EQ(ledger::TenantChange(entries[1]), Money::Micros(1'000));
  EXPECT_EQ(entries[1].memo, "node-a reclaimed: the 1 s run since checkpoint step 60");
  // Its next placement, on node-b, ends on its own: charged, nothing refunded.
  ASSERT_EQ(State(id), JobState::kScheduled);
  Beat("node-b", {{.job_id = id, .epoch = 2, .phase = WorkloadPhase::kRunning}});
  clock_.Advance(seconds(1));
  Beat("node-b", {{.job_id = id, .epoch = 2, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  ASSERT_EQ(State(id), JobState::kSucceeded);
  const std::vector<ledger::Transaction> after = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[2].id, "usage/" + id + "/e2/r0");
  EXPECT_EQ(cp_->billing().Total(), Money{});
}

// Idle-but-allocated GPU time (controllers/metering.h): each pass adds the time since the pass before to a
// member whose GPUs all read below 1%. 10 s busy (50%), 20 s idle (0%), 5 s without a reading (busy, as
// far as anyone knows): 20 s of its 35 s idle, kept with the job's usage and its charge.
TEST_F(BillingTest, IdleButAllocatedTimeIsMeteredWithTheUsageAndTheCharge) {
  billing_.trial_credit_micros = 0;
  Restart();
  RegisterPriced("node-a", 3'600'000);
  const std::string id = Run("node-a");
  auto second_at = [&](std::optional<uint32_t> percent) {
    clock_.Advance(seconds(1));
    api::Heartbeat hb;
    hb.node = "node-a";
    hb.workloads = {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}};
    hb.samples.resize(1);
    hb.samples[0].telemetry.utilization_percent = percent;
    ASSERT_TRUE(cp_->Heartbeat(hb).ok());
    cp_->Reconcile();
  };
  for (int s = 0; s < 10; ++s) second_at(50);
  for (int s = 0; s < 20; ++s) second_at(0);
  for (int s = 0; s < 5; ++s) second_at(std::nullopt);
  // The open segment's view counts its time up to now, its idle time as of the last published snapshot.
  EXPECT_EQ(cp_->GetJob(id)->usage[0].gpu_milli_seconds, 35'000) << "open, up to now";
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  ASSERT_EQ(State(id), JobState::kSucceeded);
  EXPECT_EQ(cp_->GetJob(id)->usage, (Usage{{"on-demand", "H100-SXM-80GB", 35'000, 35'000, 35'000, 20'000}}));
  EXPECT_DOUBLE_EQ(UsageToJson(cp_->GetJob(id)->usage)["idle_gpu_hours"].get<double>(), 20.0 / 3600);
  const std::vector<ledger::Transaction> entries = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].gpu_milli_seconds, 35'000);
  EXPECT_EQ(entries[0].idle_gpu_milli_seconds, 20'000);
  Restart();
  EXPECT_EQ(cp_->GetJob(id)->usage[0].idle_gpu_milli_seconds, 20'000) << "stored with the job";
}

// An exit the server hears of late (it was down; the agent could not reach it) is metered to the exit, not
// to the report: the agent says how long ago its workload ended (api::WorkloadReport::ended_ms_ago, by its
// monotonic clock). 10 minutes run, the exit reported 3 minutes after it: 10 minutes charged. A claim of an
// end before the segment began meters nothing, never less than zero.
TEST_F(LongLeaseBillingTest, AnExitReportedLateIsMeteredToTheExit) {
  billing_.trial_credit_micros = 0;
  Restart();
  RegisterPriced("node-a", 3'600'000);
  const std::string id = Run("node-a");
  clock_.Advance(minutes(13));
  Beat("node-a",
       {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0, .ended_ms_ago = 3 * 60'000}});
  ASSERT_EQ(State(id), JobState::kSucceeded);
  EXPECT_EQ(cp_->GetJob(id)->usage[0].gpu_milli_seconds, 600'000);
  std::vector<ledger::Transaction> entries = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(ledger::TenantChange(entries[0]), Money::Micros(-600'000));

  const std::string other = Run("node-a");
  clock_.Advance(minutes(1));
  Beat("node-a", {{.job_id = other,
                   .epoch = 1,
                   .phase = WorkloadPhase::kExited,
                   .exit_code = 0,
                   .ended_ms_ago = api::kMaxEndedAgoMs}});
  ASSERT_EQ(State(other), JobState::kSucceeded);
  EXPECT_EQ(cp_->GetJob(other)->usage, (Usage{{"on-demand", "H100-SXM-80GB", 0, 0, 0}}));
  EXPECT_EQ(cp_->billing().Entries("team-a", 0, 100).entries.size(), 1u) << "nothing to charge";
}

// Monthly budgets (budgets.h): team-a may spend 1.00 a month, its user alice 0.30 (alerts at 50, 80 and 100
// percent). At 1,000 micro-units a GPU-second, alice's job alerts at 150 s and 240 s, is stopped at 300 s
// (its open segment's cost counts), then alice is refused (402, with the numbers) while bob of the same
// tenant is not; each alert fires once, and the next month starts over. The clock starts on 2027-01-15.
TEST_F(BillingTest, MonthlyBudgetsOfATenantAndAUserAlertRefuseAndStop) {
  billing_.trial_credit_micros = 0;
  Restart();
  RegisterPriced("node-a", 3'600'000);
  ASSERT_TRUE(cp_->billing()
                  .budgets()
                  .Set({.tenant = "team-a", .monthly_limit_micros = 1'000'000, .alert_percents = {100, 50}})
                  .ok());
  ASSERT_TRUE(
      cp_->billing().budgets().Set({.tenant = "team-a", .user = "alice", .monthly_limit_micros = 300'000}).ok());
  EXPECT_EQ(cp_->billing().budgets().Find("team-a", "alice")->alert_percents, (std::vector<int>{50, 80, 100}));
  EXPECT_EQ(cp_->billing().budgets().Find("team-a", "")->alert_percents, (std::vector<int>{50, 100}));
  const char* spec = "name: paid\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1000\n";
  auto job = cp_->Submit({.spec_yaml = spec, .tenant = "team-a", .user = "alice"});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = job->record.id;
  EXPECT_EQ(cp_->GetJob(id)->record.submitted_by, "alice");
  cp_->Reconcile();
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  auto alerted = [&] { return cp_->billing().budgets().Find("team-a", "alice")->alerted_percent; };
  std::map<int, int> alerted_at;  // percent -> second
  for (int s = 1; s <= 300 && !api::IsTerminal(State(id)); ++s) {
    clock_.Advance(seconds(1));
    Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
    alerted_at.try_emplace(alerted(), s);
  }
  EXPECT_EQ(alerted_at, (std::map<int, int>{{0, 1}, {50, 150}, {80, 240}, {100, 300}}));
  ASSERT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(cp_->GetJob(id)->record.reason,
            "budget: user 'alice' of tenant 'team-a' reached its monthly budget of 0.3000 in 2027-01 (0.3000 spent); "
            "an "
            "operator raises it with `gpugeek budget set`");
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .term_signal = 15}});
  EXPECT_EQ(cp_->billing().MonthSpend("team-a", "alice", "2027-01"), Money::Micros(300'000));
  EXPECT_EQ(cp_->billing().MonthSpend("team-a", "", "2027-01"), Money::Micros(300'000));
  EXPECT_EQ(cp_->billing().budgets().Find("team-a", "")->alerted_percent, 0) << "30% of the tenant's";

  // alice is refused, with the numbers; bob of the same tenant is not.
  auto refused = cp_->Submit({.spec_yaml = spec, .tenant = "team-a", .user = "alice"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 402);
  EXPECT_EQ(std::string(refused.status().message()),
            "budget: user 'alice' has spent 0.3000 of its monthly budget of 0.3000 in 2027-01; an operator raises it "
            "with `gpugeek budget set --user alice --monthly AMOUNT`, or wait for next month");
  EXPECT_TRUE(cp_->Submit({.spec_yaml = spec, .tenant = "team-a", .user = "bob"}).ok());
  // The alerts fired are kept: a restart fires none again.
  Restart();
  EXPECT_EQ(alerted(), 100);
  EXPECT_EQ(cp_->billing().budgets().Find("team-a", "alice")->alerted_period, "2027-01");
  // Next month, alice spends again.
  clock_.Advance(std::chrono::hours(24 * 20));
  EXPECT_TRUE(cp_->Submit({.spec_yaml = spec, .tenant = "team-a", .user = "alice"}).ok());
}

// A provider's minimum rental (api::Registration::min_rental_s, `gpugeek agent --min-rental 10m`): a member
// that runs 60 s on a node renting for at least 10 minutes is charged 10 minutes, its usage says the same. A
// node lost after 60 s is the provider's failure: the whole charge comes back (no checkpoint: the 60 s run, and
// the 540 s of its minimum rental it never used).
TEST_F(BillingTest, AMinimumRentalIsChargedAndRefundedWhenTheNodeIsLost) {
  billing_.trial_credit_micros = 0;
  Restart();
  api::Registration r = Registration("node-a", "1xH100-SXM-80GB");
  r.price_micros_per_gpu_hour = 3'600'000;
  r.min_rental_s = 600;
  ASSERT_TRUE(cp_->Register(r).ok());
  const std::string id = Run("node-a");
  clock_.Advance(seconds(30));
  // The node registers again selling at ten times the price, for at least a week: the running segment keeps
  // the terms it began under (usage.h OpenSegment).
  api::Registration dearer = r;
  dearer.price_micros_per_gpu_hour = 36'000'000;
  dearer.min_rental_s = 7 * 24 * 3600;
  ASSERT_TRUE(cp_->Register(dearer).ok());
  clock_.Advance(seconds(30));
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  ASSERT_EQ(State(id), JobState::kSucceeded);
  // (The on-demand reference, a figure for the cost report, is the pool's when the segment ends: 36.00 now.)
  EXPECT_EQ(cp_->GetJob(id)->usage, (Usage{{"on-demand", "H100-SXM-80GB", 600'000, 600'000, 6'000'000}}));
  std::vector<ledger::Transaction> entries = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(ledger::TenantChange(entries[0]), Money::Micros(-600'000));

  ASSERT_TRUE(cp_->Register(r).ok());  // back to 3.60, 10 minutes
  const std::string lost = Run("node-a");
  for (int s = 0; s < 60; ++s) {
    clock_.Advance(seconds(1));
    Beat("node-a", {{.job_id = lost, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  }
  clock_.Advance(seconds(7));
  cp_->Reconcile();
  ASSERT_EQ(NodeState("node-a"), "down");
  entries = cp_->billing().Entries("team-a", 0, 100).entries;
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(ledger::TenantChange(entries[1]), Money::Micros(-600'000));
  EXPECT_EQ(ledger::TenantChange(entries[2]), Money::Micros(600'000));
  EXPECT_EQ(entries[2].memo, "node-a lost: the 67 s run since its start and 533 s of its minimum rental unused");
}

}  // namespace
}  // namespace gpugeek::controlplane
