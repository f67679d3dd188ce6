#pragma once
// A client's side of dataset versions on the server (controlplane/dataset_routes.h): push a folder as
// a version, fetch a version's objects, read refs, log and diff. The local version store is the cache:
// a push snapshots the folder into it (only new chunks are hashed into new objects) and uploads only the
// objects the server lacks; a fetch downloads only the objects the cache lacks, each checked against
// its digest.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/version_store.h"
#include "http/client.h"

namespace gpugeek::cli {

// Makes a new client to the server: uploads and downloads run on several connections at once.
using ClientFactory = std::function<absl::StatusOr<std::unique_ptr<http::Client>>()>;

// Where a kind of versioned folder lives on the server (controlplane::VersionCollection): datasets, or
// the model registry's models, whose routes are the same under other names.
struct RemoteCollection {
  std::string base;     // "/v1/datasets"
  std::string objects;  // "/v1/dataset-objects"
  std::string noun;     // "dataset", in messages
  // Appended to object reads: "?owner=T&commit=C" reads the objects of another tenant's model after a
  // logged pull (controlplane/model_routes.h).
  std::string object_query;
};
inline RemoteCollection RemoteDatasets() { return {"/v1/datasets", "/v1/dataset-objects", "dataset", ""}; }
inline RemoteCollection RemoteModels() { return {"/v1/models", "/v1/model-objects", "model", ""}; }

struct RemotePushResult {
  data::PushResult snapshot;  // the local snapshot (commit, files, bytes, chunks; new_* are the cache's)
  std::string parent;         // the branch's head on the server before the push ("" = a new branch)
  uint64_t objects = 0;       // objects the version is made of
  uint64_t uploaded_objects = 0;
  uint64_t uploaded_bytes = 0;
};

// Pushes folder `dir` as a new version of options.dataset on the server's branch options.branch: the
// head is read, `dir` is snapshotted onto it in `cache`, the objects the server lacks are sent children
// first (chunks on `connections` connections), and the branch is moved from the head read to the new
// commit by compare-and-swap. Nothing is sent when the folder equals the head (snapshot.unchanged).
// Errors: the server's (PermissionDenied for a viewer, ResourceExhausted past its --max-dataset-bytes,
// FailedPrecondition when someone else moved the branch meanwhile: push again), Snapshot's.
absl::StatusOr<RemotePushResult> PushRemote(const ClientFactory& connect, data::VersionStore& cache,
                                            const std::string& dir, const data::PushOptions& options,
                                            int connections = 4, const RemoteCollection& where = RemoteDatasets());

// The commit digest `rev` names in the server's `dataset`. NotFound naming the revision.
absl::StatusOr<std::string> ResolveRemote(http::Client& client, const std::string& dataset, const std::string& rev,
                                          const RemoteCollection& where = RemoteDatasets());

struct FetchResult {
  uint64_t objects = 0;  // of the version
  uint64_t downloaded_objects = 0;
  uint64_t downloaded_bytes = 0;
};
// Downloads into `cache` every object of version `commit` that it lacks (trees walked top-down; chunks on
// `connections` connections), each verified against its digest (DataLoss naming it otherwise). Afterwards
// cache.Checkout(dataset, commit, ...) works offline.
absl::StatusOr<FetchResult> FetchRemote(const ClientFactory& connect, data::VersionStore& cache,
                                        const std::string& commit, int connections = 4,
                                        const RemoteCollection& where = RemoteDatasets());

// The server's `dataset`: branches and tags (NotFound when it has none).
absl::StatusOr<std::vector<data::Ref>> RefsRemote(http::Client& client, const std::string& dataset,
                                                  const RemoteCollection& where = RemoteDatasets());
// Up to `limit` commits from `rev` back along first parents, newest first (paged over the API).
absl::StatusOr<std::vector<data::LogEntry>> LogRemote(http::Client& client, const std::string& dataset,
                                                      const std::string& rev, size_t limit,
                                                      const RemoteCollection& where = RemoteDatasets());
// Every change from `from` to `to` (paged over the API).
absl::StatusOr<std::vector<data::DiffEntry>> DiffRemote(http::Client& client, const std::string& dataset,
                                                        const std::string& from, const std::string& to,
                                                        const RemoteCollection& where = RemoteDatasets());

}  // namespace gpugeek::cli
