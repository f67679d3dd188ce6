#include "cli/data_remote.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/status_macros.h"
#include "data/version_transfer.h"

namespace gpugeek::cli {
namespace {

using J = nlohmann::json;

constexpr size_t kMissingBatch = 10'000;  // controlplane::kMaxMissingQuery

// Runs fn(client, i) for i in [0, n) on up to `connections` connections; the first error stops the rest.
absl::Status ParallelCalls(const ClientFactory& connect, size_t n, int connections,
                           const std::function<absl::Status(http::Client&, size_t)>& fn) {
  if (n == 0) return absl::OkStatus();
  std::atomic<size_t> next{0};
  std::mutex mu;
  absl::Status first;
  auto worker = [&] {
    absl::StatusOr<std::unique_ptr<http::Client>> client = connect();
    for (size_t i; (i = next++) < n;) {
      absl::Status s = client.ok() ? fn(**client, i) : client.status();
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = s;
        next = n;
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t count = std::min<size_t>(std::max(connections, 1), n);
  for (size_t t = 0; t < count; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  return first;
}

// One object's bytes from the server, checked against its digest.
absl::StatusOr<std::string> GetObject(http::Client& client, const RemoteCollection& where, const std::string& digest) {
  std::string bytes;
  bool too_big = false;
  RETURN_IF_ERROR(client.GetStream(where.objects + "/" + digest + where.object_query, [&](const std::string& piece) {
    if (bytes.size() + piece.size() > data::kMaxTreeBytes) {
      too_big = true;
      return false;
    }
    bytes += piece;
    return true;
  }));
  if (too_big) return absl::DataLossError(fmt::format("object {}: larger than {} bytes", digest, data::kMaxTreeBytes));
  if (archive::Sha256Hex(bytes) != digest) {
    return absl::DataLossError(fmt::format("object {}: the server's {} bytes do not hash to it", digest, bytes.size()));
  }
  return bytes;
}

std::string DatasetPath(const RemoteCollection& where, const std::string& dataset) {
  return where.base + "/" + http::UrlEncode(dataset);
}

// `parse()`, or DataLoss when the server's JSON is not of the shape this client reads (a field missing
// or of another type): never an exception out of a command.
template <typename T, typename Fn>
absl::StatusOr<T> Parsed(Fn parse) {
  try {
    return T(parse());
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(fmt::format("the server's answer is not what this client reads: {}", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::string> ResolveRemote(http::Client& client, const std::string& dataset, const std::string& rev,
                                          const RemoteCollection& where) {
  RETURN_IF_ERROR(data::ValidateRefName(dataset, where.noun));
  ASSIGN_OR_RETURN(J commit, client.Get(DatasetPath(where, dataset) + "/versions/" + http::UrlEncode(rev)));
  if (!commit.contains("commit") || !commit["commit"].is_string()) {
    return absl::DataLossError("the server's answer names no commit");
  }
  return commit["commit"].get<std::string>();
}

absl::StatusOr<RemotePushResult> PushRemote(const ClientFactory& connect, data::VersionStore& cache,
                                            const std::string& dir, const data::PushOptions& options, int connections,
                                            const RemoteCollection& where) {
  RETURN_IF_ERROR(data::ValidateRefName(options.dataset, where.noun));
  RETURN_IF_ERROR(data::ValidateRefName(options.branch, "branch"));
  ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client, connect());
  RemotePushResult result;
  // The branch's head on the server (from its branches: a tag of that name is not a head), and its
  // commit object in the cache (the snapshot's parent).
  absl::StatusOr<std::vector<data::Ref>> refs = RefsRemote(*client, options.dataset, where);
  if (!refs.ok() && !absl::IsNotFound(refs.status())) return refs.status();
  for (const data::Ref& ref : refs.value_or(std::vector<data::Ref>{})) {
    if (ref.kind == data::Ref::Kind::kTag && ref.name == options.branch) {
      return absl::InvalidArgumentError(
          fmt::format("--branch {}: {} {} has a tag of that name on the server, and tags never move; push to "
                      "another branch",
                      options.branch, where.noun, options.dataset));
    }
    if (ref.kind == data::Ref::Kind::kBranch && ref.name == options.branch) result.parent = ref.commit;
  }
  if (!result.parent.empty() && !archive::IsSha256Hex(result.parent)) {
    return absl::DataLossError("the server names a branch head that is not a SHA-256");
  }
  if (!result.parent.empty() && !cache.objects().Has(result.parent)) {
    ASSIGN_OR_RETURN(std::string bytes, GetObject(*client, where, result.parent));
    RETURN_IF_ERROR(cache.objects().PutWithDigest(result.parent, bytes).status());
  }
  ASSIGN_OR_RETURN(result.snapshot, cache.Snapshot(dir, options, result.parent));
  if (result.snapshot.unchanged) return result;

  ASSIGN_OR_RETURN(std::vector<data::VersionObject> objects, data::ListVersionObjects(cache, result.snapshot.commit));
  result.objects = objects.size();
  std::set<std::string> missing;
  for (size_t begin = 0; begin < objects.size(); begin += kMissingBatch) {
    J digests = J::array(), kinds = J::array();
    for (size_t i = begin; i < objects.size() && i < begin + kMissingBatch; ++i) {
      digests.push_back(objects[i].digest);
      kinds.push_back(data::ObjectKindName(objects[i].kind));
    }
    ASSIGN_OR_RETURN(J reply, client->Post(where.objects + "/missing",
                                           {{"digests", std::move(digests)}, {"kinds", std::move(kinds)}}));
    for (const J& d : reply.value("missing", J::array())) {
      if (d.is_string()) missing.insert(d.get<std::string>());
    }
  }
  // Chunks first, in parallel; then the trees bottom-up and the commit, in order (children first).
  std::vector<const data::VersionObject*> chunks, rest;
  for (const data::VersionObject& o : objects) {
    if (!missing.contains(o.digest)) continue;
    (o.kind == data::ObjectKind::kChunk ? chunks : rest).push_back(&o);
  }
  std::atomic<uint64_t> bytes_sent{0};
  auto send = [&](http::Client& c, const data::VersionObject& o) -> absl::Status {
    ASSIGN_OR_RETURN(std::string bytes, cache.objects().Get(o.digest, data::kMaxTreeBytes));
    RETURN_IF_ERROR(c.PutBytes(fmt::format("{}/{}?kind={}", where.objects, o.digest, data::ObjectKindName(o.kind)),
                               bytes, "application/octet-stream")
                        .status());
    bytes_sent += bytes.size();
    return absl::OkStatus();
  };
  const absl::Status sent = ParallelCalls(connect, chunks.size(), connections,
                                          [&](http::Client& c, size_t i) { return send(c, *chunks[i]); });
  RETURN_IF_ERROR(sent);
  for (const data::VersionObject* o : rest) RETURN_IF_ERROR(send(*client, *o));
  result.uploaded_objects = chunks.size() + rest.size();
  result.uploaded_bytes = bytes_sent;
  absl::StatusOr<J> moved =
      client->Put(DatasetPath(where, options.dataset) + "/branches/" + http::UrlEncode(options.branch),
                  {{"commit", result.snapshot.commit}, {"expected", result.parent}});
  if (!moved.ok()) {
    if (absl::IsFailedPrecondition(moved.status())) {
      return absl::FailedPreconditionError(
          fmt::format("{}@{} moved on the server while this push ran ({}); the objects are uploaded: push again",
                      options.dataset, options.branch, std::string(moved.status().message())));
    }
    return moved.status();
  }
  return result;
}

absl::StatusOr<FetchResult> FetchRemote(const ClientFactory& connect, data::VersionStore& cache,
                                        const std::string& commit, int connections, const RemoteCollection& where) {
  ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client, connect());
  FetchResult result;
  auto have = [&](const std::string& digest) -> absl::StatusOr<std::string> {
    if (cache.objects().Has(digest)) return cache.objects().Get(digest, data::kMaxTreeBytes);
    ASSIGN_OR_RETURN(std::string bytes, GetObject(*client, where, digest));
    RETURN_IF_ERROR(cache.objects().PutWithDigest(digest, bytes).status());
    result.downloaded_objects += 1;
    result.downloaded_bytes += bytes.size();
    return bytes;
  };
  ASSIGN_OR_RETURN(std::string commit_bytes, have(commit));
  ASSIGN_OR_RETURN(data::Commit c, data::DecodeCommit(commit_bytes));
  // Trees top-down (a tree names its children), then the chunks the cache lacks.
  std::vector<std::pair<std::string, int>> trees = {{c.tree, 0}};
  std::set<std::string> seen_trees, chunk_set;
  std::vector<std::string> chunks;
  result.objects = 1;
  while (!trees.empty()) {
    auto [digest, depth] = trees.back();
    trees.pop_back();
    if (!seen_trees.insert(digest).second) continue;
    if (depth > data::kMaxTreeDepth) return absl::DataLossError("the version's folders nest too deep");
    result.objects += 1;
    ASSIGN_OR_RETURN(std::string bytes, have(digest));
    ASSIGN_OR_RETURN(data::Tree tree, data::DecodeTree(bytes));
    for (const data::TreeEntry& e : tree.entries) {
      if (e.is_dir) {
        trees.emplace_back(e.tree, depth + 1);
        continue;
      }
      for (const data::ChunkRef& ch : e.chunks) {
        if (chunk_set.insert(ch.digest).second) chunks.push_back(ch.digest);
      }
    }
  }
  result.objects += chunks.size();
  std::vector<std::string> wanted;
  for (const std::string& d : chunks) {
    if (!cache.objects().Has(d)) wanted.push_back(d);
  }
  std::atomic<uint64_t> bytes_got{0};
  const absl::Status got = ParallelCalls(connect, wanted.size(), connections, [&](http::Client& cl, size_t i) {
    absl::StatusOr<std::string> bytes = GetObject(cl, where, wanted[i]);
    if (!bytes.ok()) return bytes.status();
    bytes_got += bytes->size();
    return cache.objects().PutWithDigest(wanted[i], *bytes).status();
  });
  RETURN_IF_ERROR(got);
  RETURN_IF_ERROR(cache.objects().Sync());
  result.downloaded_objects += wanted.size();
  result.downloaded_bytes += bytes_got;
  return result;
}

absl::StatusOr<std::vector<data::Ref>> RefsRemote(http::Client& client, const std::string& dataset,
                                                  const RemoteCollection& where) {
  RETURN_IF_ERROR(data::ValidateRefName(dataset, where.noun));
  ASSIGN_OR_RETURN(J j, client.Get(DatasetPath(where, dataset)));
  return Parsed<std::vector<data::Ref>>([&] {
    std::vector<data::Ref> refs;
    for (const auto& [field, kind] :
         {std::pair{"branches", data::Ref::Kind::kBranch}, std::pair{"tags", data::Ref::Kind::kTag}}) {
      for (const J& r : j.at(field)) {
        refs.push_back({.kind = kind,
                        .name = r.at("name").get<std::string>(),
                        .commit = r.at("commit").get<std::string>(),
                        .error = r.value("error", std::string())});
      }
    }
    return refs;
  });
}

absl::StatusOr<std::vector<data::LogEntry>> LogRemote(http::Client& client, const std::string& dataset,
                                                      const std::string& rev, size_t limit,
                                                      const RemoteCollection& where) {
  RETURN_IF_ERROR(data::ValidateRefName(dataset, where.noun));
  std::vector<data::LogEntry> log;
  std::string next = rev;
  while (log.size() < limit && !next.empty()) {
    const size_t page = std::min<size_t>(limit - log.size(), 1000);
    ASSIGN_OR_RETURN(J j, client.Get(fmt::format("{}/log?rev={}&limit={}", DatasetPath(where, dataset),
                                                 http::UrlEncode(next), page)));
    const size_t before = log.size();
    RETURN_IF_ERROR(Parsed<bool>([&] {
                      for (const J& c : j.at("commits")) {
                        data::LogEntry e;
                        e.digest = c.at("commit").get<std::string>();
                        e.commit.tree = c.value("tree", std::string());
                        e.commit.parents = c.value("parents", std::vector<std::string>());
                        e.commit.dataset = c.value("dataset", std::string());
                        e.commit.message = c.value("message", std::string());
                        e.commit.author = c.value("author", std::string());
                        e.commit.time_unix_s = c.value("time", int64_t{0});
                        e.commit.files = c.value("files", uint64_t{0});
                        e.commit.bytes = c.value("bytes", uint64_t{0});
                        log.push_back(std::move(e));
                      }
                      next =
                          j.contains("next_rev") && j["next_rev"].is_string() ? j["next_rev"].get<std::string>() : "";
                      return true;
                    }).status());
    if (log.size() == before) break;  // an empty page ends it, whatever it says comes next
  }
  return log;
}

absl::StatusOr<std::vector<data::DiffEntry>> DiffRemote(http::Client& client, const std::string& dataset,
                                                        const std::string& from, const std::string& to,
                                                        const RemoteCollection& where) {
  RETURN_IF_ERROR(data::ValidateRefName(dataset, where.noun));
  std::vector<data::DiffEntry> diff;
  std::string after;
  for (;;) {
    std::string path = fmt::format("{}/diff?from={}&to={}&limit=1000", DatasetPath(where, dataset),
                                   http::UrlEncode(from), http::UrlEncode(to));
    if (!after.empty()) path += "&after=" + http::UrlEncode(after);
    ASSIGN_OR_RETURN(J j, client.Get(path));
    std::string next;
    RETURN_IF_ERROR(Parsed<bool>([&] {
                      for (const J& c : j.at("changes")) {
                        const std::string change = c.at("change").get<std::string>();
                        diff.push_back({.path = c.at("path").get<std::string>(),
                                        .change = change == "added"     ? data::DiffEntry::Change::kAdded
                                                  : change == "removed" ? data::DiffEntry::Change::kRemoved
                                                                        : data::DiffEntry::Change::kModified,
                                        .bytes_before = c.value("bytes_before", uint64_t{0}),
                                        .bytes_after = c.value("bytes_after", uint64_t{0})});
                      }
                      if (j.contains("next_after") && j["next_after"].is_string()) {
                        next = j["next_after"].get<std::string>();
                      }
                      return true;
                    }).status());
    if (next.empty() || next <= after) break;  // the last page, or one that does not move forward
    after = next;
  }
  return diff;
}

}  // namespace gpugeek::cli
