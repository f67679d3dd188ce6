#pragma once
// EndpointSync: keeps a Gateway's routes in step with the control plane's deployments and reports the gateway's
// load back for autoscaling. Every `period` it reads GET /v1/endpoints (the READY replicas of every service, JSON
// below) and applies it when it changed, and posts POST /v1/services/load with each service's requests in flight
// and waiting in the activator (the autoscaler's concurrency signal, sched/autoscaler.h), and the requests answered
// and tokens reported per version since this gateway instance started ("instance": GATEWAY_ID/Gateway::instance(),
// the serverless meter's counters, controlplane/controllers/serving_meter.h). A failed poll keeps the
// last routes (replicas keep serving while the control plane is away) and is retried at the next period.
//
//   {"routes": [{"service": "gpt", "hosts": ["gpt"], "path_prefix": "/", "sticky": {"header": "X-User"},
//                "retries": 2, "activator": {"queue": 10000, "timeout_ms": 60000}, "auth": {"tenant": "acme"},
//                "versions": [{"name": "v1", "weight": 90,
//                              "replicas": [{"id": "job-7", "address": "10.0.0.5:20001", "capacity_milli": 1000}]}]}]}
//
// Thread-safety: one thread of its own; Stop() from any thread.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "gateway/gateway.h"
#include "http/client.h"

namespace gpugeek::gateway {

// The route table of a GET /v1/endpoints answer; InvalidArgument naming the field ("routes[0].versions[1].weight:
// ...") for a malformed one, and ValidateRouteTable's errors.
absl::StatusOr<RouteTable> RouteTableFromJson(const nlohmann::json& j);

struct EndpointSyncOptions {
  http::ClientOptions client;  // the control plane's URL(s), CA, an admin token
  Duration period = std::chrono::seconds(1);
  // Names this gateway in load reports (several gateways may report): 1-64 printable characters, no spaces.
  std::string gateway_id;
};

class EndpointSync {
 public:
  // Starts the thread; `gateway` is borrowed and must outlive Stop(). InvalidArgument for bad client options.
  static absl::StatusOr<std::unique_ptr<EndpointSync>> Start(EndpointSyncOptions options, Gateway* gateway);
  ~EndpointSync();  // stops
  void Stop();
  // Polls that applied a route table, and polls that failed, since start.
  uint64_t applied() const { return applied_.load(); }
  uint64_t failures() const { return failures_.load(); }

 private:
  EndpointSync(EndpointSyncOptions options, Gateway* gateway, std::unique_ptr<http::Client> client);
  void Run();
  void Poll();

  EndpointSyncOptions options_;
  Gateway* gateway_;
  std::unique_ptr<http::Client> client_;
  RouteTable last_;
  bool have_last_ = false;
  std::atomic<uint64_t> applied_{0}, failures_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpugeek::gateway
