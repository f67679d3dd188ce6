#pragma once
// ServingMeterController: serverless metering. A service's replicas are jobs, so their GPU time is metered and
// charged per second like any job's (metering.h); this controller adds what a service answers: the requests
// its gateways pass to each version and the tokens its replicas report (the Gpugeek-Tokens answer header,
// docs/gateway.md), stored per gateway instance and charged at the operator's per-million prices
// (BillingOptions::price_per_million_requests_micros, ..._tokens_micros; 0 = counted, not charged).
//
// The problem: gateways report cumulative counters since they started (POST /v1/services/load, about once a
// second each), reports can repeat or arrive late, the control plane can restart between a report and its
// charge, and a gateway can restart and count from zero again. So:
//   - a report names its gateway instance (the gateway's id and a nonce drawn at its start), and the store keeps
//     one row of counters per (service, version, instance) that only ever rises (store::ServiceUsageRecord);
//   - each pass (the writer's, so the row and its charge commit in one store transaction) raises the rows to
//     the latest reports and charges each row's rise: cost(after) - cost(before), each floor(count x price /
//     10^6), so no remainder is lost or charged twice; the charge's id names the row's counters after it
//     ("serve/SERVICE_ID/VERSION/INSTANCE/REQUESTS-TOKENS"), so a pass redone after a failed commit, or a
//     report applied twice, posts nothing new;
//   - a restarted gateway reports under a new instance: its counts start a new row.
// Requests a gateway answered between its last report and its exit are not counted (at most one report
// period's worth).
//
// Thread-safety: Report from any thread; Reconcile and Forget on the writer's pass only.

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/mutex.h"
#include "controlplane/controllers/context.h"
#include "store/service_records.h"

namespace gpugeek::controlplane {

// One version's counters in a gateway's report.
struct ServingReport {
  std::string service_id;
  std::string tenant;  // the service's tenant ("" = the default tenant)
  std::string user;    // who submitted the service
  std::string version;
  std::string instance;  // "GATEWAY_ID/NONCE" (gateway/endpoint_sync.h)
  int64_t requests = 0;  // answered since the instance started
  int64_t tokens = 0;    // reported by its replicas since then
};

class ServingMeterController {
 public:
  // Keeps the report (the highest counters per service, version and instance) for the next pass. At most
  // kMaxPending rows wait; beyond, the report is dropped (the gateway's next one carries the same counts).
  void Report(const ServingReport& report);
  // Stores and charges what the reports since the last pass add. Store and ledger errors are logged; the rows
  // are then read again from the store and the reports retried by the gateways' next ones.
  void Reconcile(ControllerContext& ctx);
  // After a pass whose commit failed: the stored counters are read again.
  void Forget();

  static constexpr size_t kMaxPending = 100'000;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // service id, version, instance

  Mutex mu_;
  std::map<Key, ServingReport> pending_ ABSL_GUARDED_BY(mu_);

  // The writer's pass only: the stored counters of every service met so far (read once per service).
  std::map<std::string, std::map<Key, store::ServiceUsageRecord>> stored_;
};

}  // namespace gpugeek::controlplane
