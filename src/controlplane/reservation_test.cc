// Reserved capacity on the server (reservations.h, controllers/reservation.h), on a FakeClock with the test
// playing the agents: a reservation holds whole nodes for its tenant, whose jobs take them first and pay
// nothing more on them; other tenants are kept off; each hour of the term is charged once at its close for
// the GPUs held, used or not; a segment running across the end of the term is priced under each side; a
// restart neither drops a hold nor repeats a charge.
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using ledger::Money;
using std::chrono::hours;
using std::chrono::minutes;

constexpr char kModel[] = "H100-SXM-80GB";
constexpr char kOneGpu[] = "name: r\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1000\n";

class ReservationTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    o.billing = {.platform_fee_bps = 1000};
    o.lease = hours(10);  // the clock jumps hours at a time; agents beat when the test says
    return o;
  }
  void SetUp() override {
    ControlPlaneFixture::SetUp();
    // Three 1-GPU H100 nodes of provider p1 at 2.50 per GPU-hour.
    for (const char* node : {"node-a", "node-b", "node-c"}) {
      api::Registration r = Registration(node, "1xH100-SXM-80GB");
      r.price_micros_per_gpu_hour = 2'500'000;
      r.labels["provider"] = "p1";
      ASSERT_TRUE(cp_->Register(r).ok());
    }
    cp_->Reconcile();
  }
  std::string SubmitAs(const std::string& tenant) {
    auto job = cp_->Submit({.spec_yaml = kOneGpu, .tenant = tenant});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->record.id : "";
  }
  std::string NodeOf(const std::string& id) { return cp_->GetJob(id)->allocation->members.at(0).node; }
  api::WorkloadReport Running(const std::string& id) {
    return {.job_id = id, .epoch = cp_->GetJob(id)->record.epoch, .phase = WorkloadPhase::kRunning};
  }
  api::WorkloadReport Exited(const std::string& id) {
    return {.job_id = id, .epoch = cp_->GetJob(id)->record.epoch, .phase = WorkloadPhase::kExited, .exit_code = 0};
  }
  store::ReservationRecord Reserved(const std::string& id) {
    return cp_->billing().reservations().Find(id).value_or(store::ReservationRecord{});
  }
  // A reservation of `gpus` H100s for team-a at 1.00 per GPU-hour over [start, end); its id.
  std::string Reserve(int gpus, TimePoint start, TimePoint end) {
    auto r = cp_->billing().reservations().Create(
        {.tenant = "team-a", .gpu_model = kModel, .gpus = gpus, .price_micros = 1'000'000, .start = start, .end = end});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->id : "";
  }
  // Every agent beats (nothing to report), then one pass.
  void BeatAll() {
    for (const char* node : {"node-a", "node-b", "node-c"}) Heartbeat(node);
    cp_->Reconcile();
  }
  // The ledger's reservation charges, by id.
  std::vector<ledger::Transaction> ReservationCharges() {
    std::vector<ledger::Transaction> out;
    for (const ledger::Transaction& t : cp_->billing().Entries("", 0, 100000).entries) {
      if (absl::StartsWith(t.id, "reservation/")) out.push_back(t);
    }
    return out;
  }
};

TEST_F(ReservationTest, HoldsNodesForItsTenantChargesEachHourAndReportsWhatWentUnused) {
  const TimePoint t0 = clock_.Now();
  // node-a is out of the pool while the reservation takes its nodes, then back: free and unreserved.
  ASSERT_TRUE(cp_->SetCordoned("node-a", true).ok());
  const std::string rsv = Reserve(2, t0, t0 + hours(3));
  EXPECT_EQ(rsv, "rsv-00000001");
  cp_->Reconcile();
  EXPECT_EQ(Reserved(rsv).nodes, (std::vector<std::string>{"node-b", "node-c"}));
  ASSERT_TRUE(cp_->SetCordoned("node-a", false).ok());
  cp_->Reconcile();
  EXPECT_EQ(Reserved(rsv).nodes, (std::vector<std::string>{"node-b", "node-c"}));

  // team-a's job takes its reservation though node-a is free too, and runs there at no price.
  const std::string a1 = SubmitAs("team-a");
  cp_->Reconcile();
  ASSERT_EQ(State(a1), JobState::kScheduled);
  const std::string a1_node = NodeOf(a1);
  EXPECT_NE(a1_node, "node-a");
  Beat(a1_node, {Running(a1)});
  ASSERT_EQ(State(a1), JobState::kRunning);
  // team-b is kept off the held nodes: its first job gets node-a, its second waits.
  const std::string b1 = SubmitAs("team-b");
  cp_->Reconcile();
  EXPECT_EQ(NodeOf(b1), "node-a");
  const std::string b2 = SubmitAs("team-b");
  cp_->Reconcile();
  EXPECT_EQ(State(b2), JobState::kPending);
  EXPECT_TRUE(absl::StrContains(cp_->GetJob(b2)->pending_reason, "reserved for team-a"))
      << cp_->GetJob(b2)->pending_reason;

  // Hour 1 closes: each held node charged 1 GPU-hour at 1.00; provider p1 gets it less the 10% fee.
  clock_.Advance(hours(1));
  Beat(a1_node, {Running(a1)});
  std::vector<ledger::Transaction> charges = ReservationCharges();
  ASSERT_EQ(charges.size(), 2u);
  EXPECT_EQ(charges[0].id, "reservation/rsv-00000001/h0/node-b");
  EXPECT_EQ(charges[1].id, "reservation/rsv-00000001/h0/node-c");
  EXPECT_EQ(charges[0].capacity_type, "reserved");
  EXPECT_EQ(charges[0].gpu_milli_seconds, 3'600'000);
  EXPECT_EQ(charges[0].postings, (std::vector<ledger::Posting>{{"tenant:team-a:cash", Money::Micros(-1'000'000)},
                                                               {"provider:p1:payable", Money::Micros(900'000)},
                                                               {"platform:fees", Money::Micros(100'000)}}));
  EXPECT_EQ(Reserved(rsv).charged_hours, 1);
  EXPECT_EQ(Reserved(rsv).held_gpu_milli_seconds, 2 * 3'600'000);

  // A restart keeps the hold and charges nothing twice.
  Restart();
  cp_->Reconcile();
  EXPECT_EQ(Reserved(rsv).nodes, (std::vector<std::string>{"node-b", "node-c"}));
  EXPECT_EQ(ReservationCharges().size(), 2u);
  EXPECT_EQ(State(b2), JobState::kPending);

  // a1 ends after 1.5 h: 1.5 GPU-hours used, nothing charged for them (its on-demand worth kept: 2.50/h).
  clock_.Advance(minutes(30));
  Beat(a1_node, {Exited(a1)});
  ASSERT_EQ(State(a1), JobState::kSucceeded);
  EXPECT_EQ(cp_->GetJob(a1)->usage, (Usage{{"reserved", kModel, 5'400'000, 0, 3'750'000}}));
  EXPECT_EQ(Reserved(rsv).used_gpu_milli_seconds, 5'400'000);
  EXPECT_EQ(cp_->billing().Entries("team-a", 0, 100).entries.size(), 2u) << "no usage charge on a held node";

  // a2 runs from 2.5 h across the end of the term (3 h) to 4 h: half an hour reserved, an hour at 2.50.
  clock_.Advance(hours(1));
  const std::string a2 = SubmitAs("team-a");
  cp_->Reconcile();
  const std::string a2_node = NodeOf(a2);
  ASSERT_NE(a2_node, "node-a");
  Beat(a2_node, {Running(a2)});
  clock_.Advance(minutes(30));
  Beat(a2_node, {Running(a2)});
  // The term is over: its last two hours are charged, its nodes given back (b2 gets the free one).
  EXPECT_EQ(ReservationCharges().size(), 6u);
  EXPECT_TRUE(Reserved(rsv).nodes.empty());
  EXPECT_EQ(Reserved(rsv).charged_hours, 3);
  EXPECT_EQ(Reserved(rsv).held_gpu_milli_seconds, 6 * 3'600'000);
  EXPECT_EQ(Reserved(rsv).used_gpu_milli_seconds, 5'400'000 + 1'800'000);
  EXPECT_EQ(State(b2), JobState::kScheduled);
  EXPECT_EQ(NodeOf(b2), a2_node == "node-b" ? "node-c" : "node-b");
  clock_.Advance(hours(1));
  Beat(a2_node, {Exited(a2)});
  ASSERT_EQ(State(a2), JobState::kSucceeded);
  EXPECT_EQ(cp_->GetJob(a2)->usage, (Usage{{"on-demand", kModel, 3'600'000, 2'500'000, 2'500'000},
                                           {"reserved", kModel, 1'800'000, 0, 1'250'000}}));
  // team-a paid 6 GPU-hours of term at 1.00 and a2's on-demand hour at 2.50.
  EXPECT_EQ(cp_->billing().Balance("team-a").cash, Money::Micros(-8'500'000));
  EXPECT_EQ(cp_->billing().Total(), Money{});
}

TEST_F(ReservationTest, ALostNodeIsReplacedAndNotChargedAndACancelEndsTheTermNow) {
  const TimePoint t0 = clock_.Now();
  const std::string rsv = Reserve(1, t0, t0 + hours(24));
  cp_->Reconcile();
  ASSERT_EQ(Reserved(rsv).nodes, (std::vector<std::string>{"node-a"}));
  // node-a is cordoned by the operator: the hold moves to node-b; the hour is charged for node-b alone.
  ASSERT_TRUE(cp_->SetCordoned("node-a", true).ok());
  cp_->Reconcile();
  EXPECT_EQ(Reserved(rsv).nodes, (std::vector<std::string>{"node-b"}));
  clock_.Advance(hours(1));
  BeatAll();
  std::vector<ledger::Transaction> charges = ReservationCharges();
  ASSERT_EQ(charges.size(), 1u);
  EXPECT_EQ(charges[0].id, "reservation/rsv-00000001/h0/node-b");
  // Cancelled 30 min into hour 2: that half hour is charged, prorated; the node is given back.
  clock_.Advance(minutes(30));
  ASSERT_TRUE(cp_->billing().reservations().Cancel(rsv).ok());
  BeatAll();
  charges = ReservationCharges();
  ASSERT_EQ(charges.size(), 2u);
  EXPECT_EQ(charges[1].id, "reservation/rsv-00000001/h1/node-b");
  EXPECT_EQ(charges[1].gpu_milli_seconds, 1'800'000);
  EXPECT_EQ(cp_->billing().Balance("team-a").cash, Money::Micros(-1'500'000));
  EXPECT_TRUE(Reserved(rsv).nodes.empty());
  EXPECT_EQ(Reserved(rsv).charged_hours, 2);
}

TEST_F(ReservationTest, BadReservationsNameTheField) {
  const TimePoint t0 = clock_.Now();
  const store::ReservationRecord good{
      .tenant = "team-a", .gpu_model = kModel, .gpus = 1, .price_micros = 1, .start = t0, .end = t0 + hours(1)};
  Reservations& book = cp_->billing().reservations();
  auto field = [&](store::ReservationRecord r) { return std::string(book.Create(std::move(r)).status().message()); };
  store::ReservationRecord r = good;
  r.tenant = "";
  EXPECT_TRUE(absl::StartsWith(field(r), "tenant:")) << field(r);
  r = good;
  r.gpus = 0;
  EXPECT_TRUE(absl::StartsWith(field(r), "gpus:")) << field(r);
  r = good;
  r.price_micros = 0;
  EXPECT_TRUE(absl::StartsWith(field(r), "price:")) << field(r);
  r = good;
  r.end = t0 + minutes(59);
  EXPECT_TRUE(absl::StartsWith(field(r), "term:")) << field(r);
  r = good;
  r.end = t0 + hours(24 * 3 * 366);
  EXPECT_TRUE(absl::StartsWith(field(r), "term:")) << field(r);
  r = good;
  r.start = t0 + hours(24 * 3 * 366);
  r.end = r.start + hours(1);
  EXPECT_TRUE(absl::StartsWith(field(r), "start:")) << field(r);
  r = good;
  r.start = t0 - hours(1);
  EXPECT_TRUE(absl::StartsWith(field(r), "start:")) << field(r);
  // The whole term's cost must be one amount the ledger can post: 10^15 micro-units.
  r = good;
  r.price_micros = 1'000'000'000'000'000;
  ASSERT_TRUE(book.Create(r).ok());
  r.gpus = 2;
  EXPECT_TRUE(absl::StartsWith(field(r), "price:")) << field(r);
  EXPECT_EQ(book.List("").size(), 1u);
  EXPECT_EQ(book.Cancel("rsv-9").status().code(), absl::StatusCode::kNotFound);
}

// Charged hours whose progress was not stored (a pass whose charges committed but whose progress write failed)
// are not charged again: each hour's charge is posted once by id.
TEST_F(ReservationTest, AnHourWhoseProgressWasLostIsNotChargedTwice) {
  const TimePoint t0 = clock_.Now();
  const std::string rsv = Reserve(1, t0, t0 + hours(5));
  cp_->Reconcile();
  clock_.Advance(hours(2));
  BeatAll();
  ASSERT_EQ(ReservationCharges().size(), 2u);
  store::ReservationRecord lost = Reserved(rsv);
  lost.charged_hours = 0;
  lost.held_gpu_milli_seconds = 0;
  ASSERT_TRUE(cp_->billing().reservations().SetProgress(lost).ok());
  cp_->Reconcile();
  EXPECT_EQ(ReservationCharges().size(), 2u);
  EXPECT_EQ(Reserved(rsv).charged_hours, 2);
  EXPECT_EQ(cp_->billing().Balance("team-a").cash, Money::Micros(-2'000'000));
}

// A reservation cancelled before its term begins ends at its start: it holds nothing and costs nothing.
TEST_F(ReservationTest, ACancelBeforeTheStartCostsNothing) {
  const TimePoint t0 = clock_.Now();
  const std::string rsv = Reserve(1, t0 + hours(1), t0 + hours(3));
  auto cancelled = cp_->billing().reservations().Cancel(rsv);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->end, t0 + hours(1));
  Restart();
  EXPECT_EQ(Reserved(rsv).end, t0 + hours(1));
  for (int h = 0; h < 4; ++h) {
    clock_.Advance(hours(1));
    BeatAll();
    EXPECT_TRUE(Reserved(rsv).nodes.empty());
  }
  EXPECT_TRUE(ReservationCharges().empty());
}

}  // namespace
}  // namespace gpugeek::controlplane
