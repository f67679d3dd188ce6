#include "controlplane/controllers/serving_meter.h"

#include <gtest/gtest.h>

#include "controlplane/billing.h"
#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using ledger::Money;

// Prices of the serverless meter: 0.30 per million requests (0.3 micro-units each), 2.00 per million tokens.
class ServingMeterTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    o.billing.price_per_million_requests_micros = 300'000;
    o.billing.price_per_million_tokens_micros = 2'000'000;
    return o;
  }
  void Report(const std::string& instance, int64_t requests, int64_t tokens, const std::string& version = "v1") {
    cp_->serving_meter().Report({.service_id = "s-000001",
                                 .tenant = "team-a",
                                 .user = "alice",
                                 .version = version,
                                 .instance = instance,
                                 .requests = requests,
                                 .tokens = tokens});
  }
  // The serverless charges: id -> what the tenant paid (micro-units).
  std::map<std::string, int64_t> Charges() {
    std::map<std::string, int64_t> out;
    for (const ledger::Transaction& t : cp_->billing().Entries("team-a", 0, 1000).entries) {
      if (t.capacity_type == "serverless") out[t.id] = -ledger::TenantChange(t).micros;
    }
    return out;
  }
};

TEST_F(ServingMeterTest, ChargesEachRiseOfTheCountersOnceAcrossRepeatsLateReportsAndRestarts) {
  // 7 requests (floor(2.1) = 2 micro-units) and 5,000 tokens (10,000).
  Report("gw-1/aaaa", 7, 5'000);
  cp_->Reconcile();
  EXPECT_EQ(Charges(), (std::map<std::string, int64_t>{{"serve/s-000001/v1/gw-1/aaaa/7-5000", 10'002}}));
  // The same report again, and a late lower one: nothing new.
  Report("gw-1/aaaa", 7, 5'000);
  cp_->Reconcile();
  Report("gw-1/aaaa", 5, 100);
  cp_->Reconcile();
  EXPECT_EQ(Charges().size(), 1u);
  // 3 more requests: floor(3.0) - floor(2.1) = 1; the remainder was never lost.
  Report("gw-1/aaaa", 10, 5'000);
  cp_->Reconcile();
  EXPECT_EQ(Charges().at("serve/s-000001/v1/gw-1/aaaa/10-5000"), 1);

  // The control plane restarts: the rows are read back, the gateway's next (same) report charges nothing.
  Restart();
  Report("gw-1/aaaa", 10, 5'000);
  cp_->Reconcile();
  EXPECT_EQ(Charges().size(), 2u);
  // The gateway restarts: a new instance counts from zero in a row of its own; v2 has its own row.
  Report("gw-1/bbbb", 4, 0);
  Report("gw-1/bbbb", 1'000'000, 0, "v2");
  cp_->Reconcile();
  const std::map<std::string, int64_t> charges = Charges();
  EXPECT_EQ(charges.at("serve/s-000001/v1/gw-1/bbbb/4-0"), 1);
  EXPECT_EQ(charges.at("serve/s-000001/v2/gw-1/bbbb/1000000-0"), 300'000);
  int64_t total = 0;
  for (const auto& [id, paid] : charges) total += paid;
  EXPECT_EQ(total, 10'002 + 1 + 1 + 300'000);
  // The store holds every row's counters (what GET /v1/services shows as metered).
  std::vector<store::ServiceUsageRecord> rows = store_->ListServiceUsage("s-000001").value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].instance, "gw-1/aaaa");
  EXPECT_EQ(rows[0].requests, 10);
  EXPECT_EQ(rows[0].tokens, 5'000);
  EXPECT_EQ(rows[1].requests, 4);
  EXPECT_EQ(rows[2].version_name, "v2");
}

}  // namespace
}  // namespace gpugeek::controlplane
