#pragma once
// What `gpugeek data push --remote` and `gpugeek model push` do, for route tests: ask the server which of
// a local version's objects it lacks, then send those children first to `objects_path`
// ("/v1/dataset-objects" or "/v1/model-objects").

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "absl/status/statusor.h"
#include "data/version_store.h"
#include "data/version_transfer.h"
#include "http/client.h"

namespace gpugeek::controlplane::testing {

// The number of objects sent.
inline absl::StatusOr<int> UploadVersion(http::Client& c, const data::VersionStore& local, const std::string& commit,
                                         const std::string& objects_path = "/v1/dataset-objects") {
  absl::StatusOr<std::vector<data::VersionObject>> listed = data::ListVersionObjects(local, commit);
  if (!listed.ok()) return listed.status();
  const std::vector<data::VersionObject> objects = *std::move(listed);
  nlohmann::json digests = nlohmann::json::array();
  for (const data::VersionObject& o : objects) digests.push_back(o.digest);
  absl::StatusOr<nlohmann::json> missing = c.Post(objects_path + "/missing", {{"digests", digests}});
  if (!missing.ok()) return missing.status();
  std::set<std::string> want((*missing)["missing"].begin(), (*missing)["missing"].end());
  int sent = 0;
  for (const data::VersionObject& o : objects) {
    if (!want.contains(o.digest)) continue;
    absl::StatusOr<std::string> bytes = local.objects().Get(o.digest);
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<nlohmann::json> put =
        c.PutBytes(fmt::format("{}/{}?kind={}", objects_path, o.digest, data::ObjectKindName(o.kind)), *bytes,
                   "application/octet-stream");
    if (!put.ok()) return put.status();
    ++sent;
  }
  return sent;
}

}  // namespace gpugeek::controlplane::testing
