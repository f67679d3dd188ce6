#pragma once
// What the store keeps of model services (controlplane/controllers/deployment.h, docs/service-spec.md): the
// service as last submitted (its spec, the desired replicas per version) and one row per replica job it
// started, so a restarted control plane adopts every replica and keeps each service where it was.

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace gpugeek::store {

struct ServiceRecord {
  std::string id;         // unique, chosen by the caller ("s-000003")
  std::string tenant;     // owning tenant; "" = default tenant
  std::string user;       // who submitted it (its replicas are submitted as that user)
  std::string name;       // api::ServiceSpec::name; unique among ACTIVE services (every tenant's)
  std::string spec_yaml;  // as accepted, with the traffic weights last set; sealed at rest like a job's spec
  // Bumped when the spec or the traffic weights change (a new POST of the same name, POST .../traffic).
  int64_t generation = 1;
  // Desired replicas per version, "v1=2,v2=1" (a version absent: 0). Set by the controller from
  // replicas.initial, then by POST .../scale and the autoscaler.
  std::string desired;
  std::string state = "ACTIVE";  // ACTIVE | DELETED (its replicas are cancelled)
  std::string reason;            // why it is in that state / the last scaling decision
  TimePoint created_at;
  TimePoint updated_at;
  int64_t version = 0;  // set by the store; bumped on every write (compare-and-set)
};

struct ReplicaRecord {
  std::string service_id;
  std::string version_name;  // the service version it runs ("v1")
  int64_t ordinal = 0;       // 0, 1, 2, ... per (service, version), never reused
  std::string job_id;        // its job; "" until the job is stored
  int port = 0;              // $PORT, allocated by the controller (20000-29999), unique among live replicas
  // A digest of the version's job spec it was started from: a rolling update replaces replicas whose
  // digest differs from the version's current one.
  std::string spec_digest;
  std::string state = "ACTIVE";  // ACTIVE | ENDED (its job ended or was cancelled by the controller)
  std::string reason;            // why it ended
  TimePoint created_at;
  TimePoint updated_at;
};

// What one gateway instance answered for one version of a service since it started (serverless metering,
// controlplane/controllers/serving_meter.h): cumulative counters, only ever raised, so a report stored twice
// or out of order changes nothing, and the charge for a report is what its counters add to the row's.
struct ServiceUsageRecord {
  std::string service_id;
  std::string version_name;
  std::string instance;  // the reporting gateway's instance: its id and a nonce drawn at its start
  int64_t requests = 0;  // requests answered (any status)
  int64_t tokens = 0;    // tokens its replicas reported (the Gpugeek-Tokens answer header)
  TimePoint updated_at;  // set by the store
};

// Store::ListServices: ids strictly after `after_id`, ascending, at most `limit` (1..10000).
struct ServiceFilter {
  std::string tenant;  // "" = every tenant's
  std::string name;    // "" = any name
  std::string state;   // "" = any state
  std::string after_id;
  int limit = 100;
};

}  // namespace gpugeek::store
