#pragma once
// Model services (controllers/deployment.h, docs/service-spec.md); access.h says who may call each:
//
//   POST   /v1/services {spec_yaml}                 -> 201 service                             member
//       The spec is checked whole (api::ParseServiceSpec: 400 naming the field). A new name creates the
//       service; the name of one of the caller's tenant replaces its spec (generation + 1: a rolling update).
//       409 when another tenant's service has that name.
//   GET    /v1/services?after=&limit=                -> {services: [service], next_after}      viewer
//   GET    /v1/services/{name}                       -> service                                viewer
//   DELETE /v1/services/{name}                       -> service (DELETED; replicas cancelled)  member
//   GET    /v1/services/{name}/replicas?after=&limit= -> {replicas: [replica], next_after}     viewer
//   POST   /v1/services/{name}/traffic {weights: {v1: 90, v2: 10}} -> {weights}                member
//       Versions not named get 0; the weights sum to 100 (400 naming the field otherwise).
//   POST   /v1/services/{name}/scale {replicas: {v1: 2}}   -> {replicas}                       member
//       Desired replicas of the named versions; the total within the spec's replicas.min..max.
//   GET    /v1/endpoints                             -> {routes: [route]}                      admin
//       Every tenant's services with their READY replicas, in the gateways' route shape
//       (gateway/endpoint_sync.h).
//   POST   /v1/services/load {gateway, instance, services: {NAME: {in_flight, queued, versions: {V: requests},
//                          tokens: {V: tokens}}}} -> {}                                          admin
//       A gateway's load, each second; the autoscaler sums the gateways that reported within 5 s. The
//       counters (since the gateway instance started) feed the serverless meter (controllers/serving_meter.h).
//
// A service: {id, name, tenant, user, state (ACTIVE | DELETED), reason, generation, versions [{name, weight,
// desired, requests (answered since the reporting gateways started: the observed split), metered_requests,
// metered_tokens (since the service began)}], replicas {min, max, initial}, desired (total), ready, created_at,
// updated_at, spec_yaml}. A replica: {version, ordinal, job, node, address, port, state (PENDING | STARTING | READY |
// NOT_READY | ENDED), since}. Another tenant's service reads as absent (404).

#include "controlplane/accounts.h"
#include "controlplane/controllers/deployment.h"
#include "controlplane/controllers/serving_meter.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// Registers the routes above. All must outlive the server's serving.
void RegisterServiceRoutes(http::Server& server, Accounts& accounts, store::Store& store,
                           DeploymentController& deployments, ServingMeterController& meter);

}  // namespace gpugeek::controlplane
