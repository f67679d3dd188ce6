#pragma once
// The model registry's routes. A model is a versioned folder (weights, config, tokenizer, signature) in its
// owner tenant's content-addressed store: the dataset routes serve it under /v1/models and
// /v1/model-objects (dataset_routes.h: push, refs, versions, log, diff), and this file adds what
// sharing needs (model_registry.h):
//
//   POST   /v1/models/{name}/pulls           {rev, owner?} -> {seq, owner, model, commit, files, bytes, ...};
//                                            logs the pull; another tenant's needs its `pull` right     viewer
//   GET    /v1/models/{name}/pulls?after=&limit=   the owner's pull log of the model, oldest first       viewer
//   GET    /v1/models/{name}/grants          {grants: [{tenant, rights}]}                                viewer
//   PUT    /v1/models/{name}/grants/{tenant} {rights: ["pull", "deploy", "finetune"]} (empty = revoke)     member
//   DELETE /v1/models/{name}/grants/{tenant}                                                          member
//   GET    /v1/shared-models                 {models: [{owner, name, rights}], next_after}: granted to
//                                            the caller's tenant                                          viewer
//   GET    /v1/model-objects/{digest}?owner=T&commit=C   an object's bytes: the caller's own, or an object
//                                            of version C of T's model after a logged pull of C           viewer
//
// A tenant with no right on another's model gets, for every question about it, the answer for a model
// that does not exist (404 with the same text), so it cannot learn the model exists.

#include <string>

#include "absl/status/statusor.h"
#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "controlplane/dataset_routes.h"
#include "controlplane/dataset_store.h"
#include "controlplane/model_registry.h"
#include "controlplane/node_authority.h"
#include "http/server.h"

namespace gpugeek::controlplane {

VersionCollection ModelCollection();

// A model a job names (`weights: [OWNER/]NAME[@REV]`), resolved for `tenant` needing `right`: the
// commit digest. NotFound (the text of an absent model) when the tenant has no right at all on it;
// PermissionDenied naming the right when it has others but not this one.
absl::StatusOr<std::string> ResolveModelFor(DatasetStores& models, const ModelRegistry& registry,
                                            const std::string& tenant, const std::string& owner,
                                            const std::string& name, const std::string& rev, ModelRight right);

// Admission of a job's `weights:`: ResolveModelFor for `right`, only a commit the store accepted whole,
// holding a file of the job's `engine` format when it names one (api/engines.h IsEngineFile; "" = any;
// else FailedPrecondition naming the format and the endings), and, for another tenant's model, a pull by
// `user` in the owner's log.
absl::StatusOr<std::string> AdmitWeights(DatasetStores& models, ModelRegistry& registry, const std::string& tenant,
                                         const std::string& user, const std::string& owner, const std::string& name,
                                         const std::string& rev, ModelRight right, const std::string& engine = "");

// Registers the routes above and the version routes of ModelCollection(); all borrowed must outlive the
// server.
void RegisterModelRoutes(http::Server& server, Accounts& accounts, DatasetStores& models, ModelRegistry& registry);

// GET /v1/agents/{node}/models/{commit}/objects/{digest} on the agents' listener: an object of model
// version `commit`, to the node's own credential, while a job with a member on the node names it.
void RegisterAgentModelRoute(http::Server& server, DatasetStores& models, ControlPlane& cp, NodeAuthority& nodes);

}  // namespace gpugeek::controlplane
