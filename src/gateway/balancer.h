#pragma once
// Balancer: which version, then which replica, serves a request to one service. Pure (no I/O, no threads, the
// caller's monotonic clock and seed), so its decisions are tested exactly and replayed.
//
// Version split: each version has an integer weight in percent (they sum to 100 over the versions that take
// traffic). Without stickiness requests go by smooth weighted round robin (nginx's ngx_http_upstream_round_robin.c):
// over any 100 consecutive requests each version gets exactly its weight. A sticky request (by a header's value or a
// cookie, traffic.sticky in the service spec) keeps its version: a header value is hashed (FNV-1a 64 with the
// splitmix64 finaliser) into 100 buckets laid out by weight; a cookie names its version, and a request without one
// (or naming a version that no longer takes traffic) is assigned by round robin and told to set the cookie.
//
// Replica choice: power of two choices (Mitzenmacher 2001; Envoy's LEAST_REQUEST and Ray Serve's router) on
// outstanding requests weighted by capacity: of two replicas drawn at random, the one with the lower
// (outstanding + 1) / capacity_milli.
//
// Outlier ejection, as Envoy's outlier detection with its defaults (envoy.config.cluster.v3.OutlierDetection):
// after `consecutive_failures` (5) 5xx answers or failed connections in a row a replica is ejected for
// base_ejection (30 s) x the times it has been ejected, at most max_ejection (300 s); at most
// max_ejection_percent (10 %) of a version's replicas are out at once, but always at least one may be. When every
// replica of a version is out the version uses them all (Envoy's panic routing).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace gpugeek::gateway {

struct OutlierPolicy {
  int consecutive_failures = 5;
  Duration base_ejection = std::chrono::seconds(30);
  Duration max_ejection = std::chrono::seconds(300);
  int max_ejection_percent = 10;
};

struct ReplicaEndpoint {
  std::string id;    // stable across updates: the replica's allocation ("job-12/0")
  std::string host;  // numeric IPv4 or IPv6 address
  uint16_t port = 0;
  int64_t capacity_milli = 1000;  // relative serving capacity (milli-GPU of the replica's allocation); > 0
  bool operator==(const ReplicaEndpoint&) const = default;
};

struct VersionEndpoints {
  std::string name;  // "v1"
  int weight_percent = 0;
  std::vector<ReplicaEndpoint> replicas;  // ready replicas only
  bool operator==(const VersionEndpoints&) const = default;
};

enum class StickyKind { kNone, kHeader, kCookie };

struct StickyPolicy {
  StickyKind kind = StickyKind::kNone;
  std::string name;  // header or cookie name
  bool operator==(const StickyPolicy&) const = default;
};

// Live state of one replica, kept across endpoint updates by id.
struct ReplicaState {
  ReplicaEndpoint endpoint;
  int64_t outstanding = 0;  // requests sent and not yet answered
  int consecutive_failures = 0;
  bool closes_connections = false;  // answered with Connection: close (or HTTP/1.0): no pipelining to it
  int times_ejected = 0;
  std::optional<MonoTime> ejected_until;
  uint64_t requests = 0;  // answered or failed, for stats
  bool retired = false;   // removed by Update(); freed once its last request finishes
};

enum class Outcome { kSuccess, kServerError /*5xx*/, kConnectFailure, kClientError /*4xx: not the replica's fault*/ };

// One service's balancer.
class Balancer {
 public:
  explicit Balancer(uint64_t seed, OutlierPolicy policy = {});

  // Replaces the versions and their replicas; a replica whose id stays keeps its counters and ejection. Weights are
  // taken as given (the caller validated them); a version with weight 0 takes no new traffic.
  void Update(std::vector<VersionEndpoints> versions, StickyPolicy sticky);

  // The version for a request: `sticky_value` is the header's value or the cookie's (nullopt: the request carries
  // none). nullopt when no version takes traffic. `set_cookie` (cookie stickiness only) tells the caller to send the
  // cookie naming the chosen version.
  struct VersionChoice {
    int version = -1;  // index into versions()
    bool set_cookie = false;
  };
  std::optional<VersionChoice> PickVersion(std::optional<std::string_view> sticky_value);

  // A replica of `version` for a request at `now`, other than those in `exclude` (retries), or nullptr when the
  // version has none. The caller must Begin() it.
  ReplicaState* PickReplica(int version, MonoTime now, const std::vector<const ReplicaState*>& exclude = {});

  void Begin(ReplicaState* r) { ++r->outstanding; }
  // The end of a request on `r` (Begin()'d before): counts failures and ejects when the policy says so.
  void Finish(ReplicaState* r, Outcome outcome, MonoTime now);

  const std::vector<VersionEndpoints>& versions() const { return versions_; }
  const StickyPolicy& sticky() const { return sticky_; }
  // Replicas of version `v` (state), in the order of versions()[v].replicas.
  const std::vector<ReplicaState*>& replicas(int v) const { return replica_states_[v]; }
  // A version's index by name, -1 when absent.
  int VersionIndex(std::string_view name) const;
  uint64_t ejections() const { return ejections_; }

 private:
  bool Ejected(const ReplicaState& r, MonoTime now) const;
  int RoundRobin();
  uint64_t Next();

  OutlierPolicy policy_;
  uint64_t rng_state_;
  std::vector<VersionEndpoints> versions_;
  StickyPolicy sticky_;
  std::vector<int64_t> current_weight_;  // smooth weighted round robin, per version
  std::vector<std::vector<ReplicaState*>> replica_states_;
  std::vector<std::unique_ptr<ReplicaState>> live_;     // by version order, flattened
  std::vector<std::unique_ptr<ReplicaState>> retired_;  // removed, with requests still outstanding
  uint64_t ejections_ = 0;
};

// FNV-1a 64 of `s`, finalised with splitmix64: the sticky hash (stable across processes and versions of gpugeek).
uint64_t StickyHash(std::string_view s);

}  // namespace gpugeek::gateway
