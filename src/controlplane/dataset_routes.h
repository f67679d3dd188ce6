#pragma once
// The routes of dataset versions (dataset_store.h: one store per tenant; access.h says who may call
// each). Pushing is the client's work: it snapshots a folder into its own store, asks which objects the
// server lacks, sends those children first, then moves the branch by compare-and-swap; `gpugeek data
// push --remote` does all of it.
//
//   GET    /v1/datasets                                     {datasets: [{name, branches, tags}], next_after}  viewer
//   GET    /v1/datasets/{name}                              {name, branches: [{name, commit}], tags: [...]}   viewer
//   GET    /v1/datasets/{name}/versions/{rev}               the commit `rev` names: {commit, tree, parents,
//                                                           dataset, message, author, time, files, bytes}     viewer
//   GET    /v1/datasets/{name}/log?rev=R&limit=N            {commits: [...], next_rev} first parents of R      viewer
//   GET    /v1/datasets/{name}/diff?from=A&to=B&after=P     {changes: [{path, change, bytes_before,
//                                                           bytes_after}], next_after}  (paged by path)       viewer
//   PUT    /v1/datasets/{name}/branches/{branch}            {commit, expected} -> compare-and-swap; 409 when
//                                                           the branch is not at `expected` ("" = absent)     member
//   DELETE /v1/datasets/{name}/branches/{branch}                                                             member
//   PUT    /v1/datasets/{name}/tags/{tag}                   {commit}; 409 when the name is taken              member
//   DELETE /v1/datasets/{name}/tags/{tag}                                                                    member
//   POST   /v1/dataset-objects/missing                      {digests: [...<= 10,000]} -> {missing: [...]}     member
//   PUT    /v1/dataset-objects/{digest}?kind=chunk|tree|commit  BYTES -> {digest, new}; 400 when the bytes
//                                                           do not hash to the digest, 409 when a child is
//                                                           missing, 413 past --max-dataset-bytes             member
//   GET    /v1/dataset-objects/{digest}                     the object's bytes                                viewer
//   GET    /v1/agents/{node}/datasets/{commit}/objects/{digest}   the bytes, to the node's own credential     node
//
// Everything is the caller's tenant's: another tenant's dataset or object reads as absent. An object is
// at most one request body (the API listener's 12 MiB; chunks are at most 4 MiB), so a tree of a folder
// with more than about 80,000 entries cannot be pushed (split the folder). An agent may read an object
// only while a job whose dataset version is `commit` has a member assigned to its node, and only one of
// that version's objects; otherwise 404.

#include <functional>
#include <optional>
#include <string>

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "controlplane/dataset_store.h"
#include "controlplane/node_authority.h"
#include "http/server.h"

namespace gpugeek::controlplane {

inline constexpr size_t kMaxMissingQuery = 10'000;

// The names under which one kind of versioned folder is served: datasets here, models in
// model_routes.h (the same routes under /v1/models and /v1/model-objects).
struct VersionCollection {
  std::string collection;  // "datasets": /v1/datasets/{name}/...
  std::string objects;     // "dataset-objects": /v1/dataset-objects/...
  std::string noun;        // "dataset", in messages
  std::string push_hint;   // the command that pushes one; {} is replaced by the name
  bool object_get = true;  // registers GET /v1/{objects}/{digest} (models serve their own, with grants)
};
VersionCollection DatasetCollection();

// Registers the user routes of `c` on the API listener; everything borrowed must outlive the server.
void RegisterVersionRoutes(http::Server& server, Accounts& accounts, DatasetStores& stores, const VersionCollection& c);
inline void RegisterDatasetRoutes(http::Server& server, Accounts& accounts, DatasetStores& datasets) {
  RegisterVersionRoutes(server, accounts, datasets, DatasetCollection());
}

// Registers GET /v1/agents/{node}/datasets/{commit}/objects/{digest} on the agents' listener.
void RegisterAgentDatasetRoute(http::Server& server, DatasetStores& datasets, ControlPlane& cp, NodeAuthority& nodes);

// Registers GET `pattern` (with {node}, {commit} and {digest}) on the agents' listener: object `digest` of
// version `commit` in `stores`, to node `node`'s own credential, when owner_of(node, commit) names the
// tenant whose version a member on that node needs, and the object is one of that version; 404 naming
// `what` ("dataset", "model") otherwise.
using VersionOwnerFn = std::function<std::optional<std::string>(const std::string& node, const std::string& commit)>;
void RegisterAgentVersionRoute(http::Server& server, DatasetStores& stores, NodeAuthority& nodes,
                               const std::string& pattern, const std::string& what, VersionOwnerFn owner_of);

}  // namespace gpugeek::controlplane
