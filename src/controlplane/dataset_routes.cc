#include "controlplane/dataset_routes.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "api/json_reader.h"
#include "archive/digest.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/paging.h"
#include "http/status_http.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

constexpr size_t kMaxLogLimit = 1000;

J RefsJson(const std::vector<data::Ref>& refs) {
  J branches = J::array(), tags = J::array();
  for (const data::Ref& ref : refs) {
    J j = {{"name", ref.name}, {"commit", ref.commit}};
    if (!ref.error.empty()) j["error"] = ref.error;
    (ref.kind == data::Ref::Kind::kBranch ? branches : tags).push_back(std::move(j));
  }
  return {{"branches", std::move(branches)}, {"tags", std::move(tags)}};
}

J CommitJson(const std::string& digest, const data::Commit& c) {
  return {{"commit", digest},      {"tree", c.tree},       {"parents", c.parents},
          {"dataset", c.dataset},  {"message", c.message}, {"author", c.author},
          {"time", c.time_unix_s}, {"files", c.files},     {"bytes", c.bytes}};
}

std::string_view ChangeName(data::DiffEntry::Change c) {
  switch (c) {
    case data::DiffEntry::Change::kAdded:
      return "added";
    case data::DiffEntry::Change::kRemoved:
      return "removed";
    case data::DiffEntry::Change::kModified:
      return "modified";
  }
  return "modified";
}

// The caller's store and a valid name from the path.
absl::StatusOr<data::VersionStore*> StoreOf(DatasetStores& datasets, const VersionCollection& c, const Principal& who,
                                            const Request& r) {
  RETURN_IF_ERROR(data::ValidateRefName(r.param("name"), c.noun));
  return datasets.For(who.tenant);
}

// A dataset (model) with no branch or tag does not exist.
absl::StatusOr<std::vector<data::Ref>> Refs(const data::VersionStore& store, const VersionCollection& c,
                                            const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<data::Ref> refs, store.ListRefs(name));
  if (refs.empty()) {
    return absl::NotFoundError(
        fmt::format("no {} '{}' (push one: {})", c.noun, name, fmt::format(fmt::runtime(c.push_hint), name)));
  }
  return refs;
}

absl::StatusOr<std::string> RequiredQuery(const Request& r, const std::string& name, const std::string& example) {
  std::string v = r.query_value(name);
  if (v.empty()) {
    return absl::InvalidArgumentError(fmt::format("query parameter '{}' is required, e.g. {}", name, example));
  }
  return v;
}

// NotFound unless the store accepted `commit` as a commit (data/version_transfer.h): refs point only at
// whole versions.
absl::Status NeedCommit(const data::VersionStore& store, const VersionCollection& c, const std::string& commit) {
  if (data::IsAccepted(store, data::ObjectKind::kCommit, commit)) return absl::OkStatus();
  return absl::NotFoundError(fmt::format("no commit {} in your {}: send the version's objects first ({} does)",
                                         commit.substr(0, 80), c.collection,
                                         fmt::format(fmt::runtime(c.push_hint), "NAME")));
}

absl::StatusOr<Reply> Log(DatasetStores& datasets, const VersionCollection& c, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
  const std::string name = r.param("name");
  ASSIGN_OR_RETURN(int limit, PageLimit(r));
  const std::string rev = r.query_value("rev", "main");
  // One more than asked: its digest is where the next page starts.
  ASSIGN_OR_RETURN(std::vector<data::LogEntry> log, store->Log(name, rev, std::min<size_t>(limit, kMaxLogLimit) + 1));
  J commits = J::array();
  J next = nullptr;
  for (size_t i = 0; i < log.size(); ++i) {
    if (static_cast<int>(i) == limit) {
      next = log[i].digest;
      break;
    }
    commits.push_back(CommitJson(log[i].digest, log[i].commit));
  }
  return Reply::Json({{"commits", std::move(commits)}, {"next_rev", std::move(next)}});
}

absl::StatusOr<Reply> Diff(DatasetStores& datasets, const VersionCollection& c, const Principal& who,
                           const Request& r) {
  ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
  ASSIGN_OR_RETURN(std::string from, RequiredQuery(r, "from", "from=main~1"));
  ASSIGN_OR_RETURN(std::string to, RequiredQuery(r, "to", "to=main"));
  ASSIGN_OR_RETURN(std::vector<data::DiffEntry> diff, store->Diff(r.param("name"), from, to));
  ASSIGN_OR_RETURN(J page, Page(
                               r, "changes", diff, [](const data::DiffEntry& e) { return e.path; },
                               [](const data::DiffEntry& e) -> J {
                                 return {{"path", e.path},
                                         {"change", ChangeName(e.change)},
                                         {"bytes_before", e.bytes_before},
                                         {"bytes_after", e.bytes_after}};
                               }));
  return Reply::Json(page);
}

absl::StatusOr<Reply> SetBranch(DatasetStores& datasets, const VersionCollection& c, const Principal& who,
                                const Request& r) {
  ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"commit", "expected"}));
  ASSIGN_OR_RETURN(std::string commit, reader.String("commit"));
  if (!reader.Has("expected")) {
    return absl::InvalidArgumentError(
        "expected: required: the commit the branch is at now as you read it, \"\" for a new branch (the move is "
        "a compare-and-swap)");
  }
  ASSIGN_OR_RETURN(std::string expected, reader.String("expected"));
  RETURN_IF_ERROR(NeedCommit(*store, c, commit));
  RETURN_IF_ERROR(store->SetBranch(r.param("name"), r.param("branch"), commit, expected));
  return Reply::Json({{c.noun, r.param("name")}, {"branch", r.param("branch")}, {"commit", commit}});
}

absl::StatusOr<Reply> PutTag(DatasetStores& datasets, const VersionCollection& c, const Principal& who,
                             const Request& r) {
  ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"commit"}));
  ASSIGN_OR_RETURN(std::string rev, reader.String("commit"));
  ASSIGN_OR_RETURN(std::string commit, store->Resolve(r.param("name"), rev));
  RETURN_IF_ERROR(NeedCommit(*store, c, commit));
  RETURN_IF_ERROR(store->CreateTag(r.param("name"), r.param("tag"), commit));
  return Reply::Json({{c.noun, r.param("name")}, {"tag", r.param("tag")}, {"commit", commit}});
}

absl::StatusOr<Reply> Missing(DatasetStores& datasets, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(data::VersionStore * store, datasets.For(who.tenant));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"digests", "kinds"}));
  if (!body.contains("digests") || !body["digests"].is_array() || body["digests"].size() > kMaxMissingQuery) {
    return absl::InvalidArgumentError(
        fmt::format("digests: must be a list of at most {} object digests; ask in batches", kMaxMissingQuery));
  }
  // Each digest's kind (chunk when not given): a tree or commit counts as present only when it was
  // accepted as one.
  const J kinds = body.value("kinds", J::array());
  if (!kinds.is_array() || (!kinds.empty() && kinds.size() != body["digests"].size())) {
    return absl::InvalidArgumentError("kinds: when given, one of chunk, tree, commit per digest, in order");
  }
  J missing = J::array();
  for (size_t i = 0; i < body["digests"].size(); ++i) {
    const J& d = body["digests"][i];
    const std::string digest = d.is_string() ? d.get<std::string>() : std::string();
    if (!archive::IsSha256Hex(digest)) {
      return absl::InvalidArgumentError(fmt::format("digests[{}]: must be a SHA-256, 64 lower-case hex digits", i));
    }
    data::ObjectKind kind = data::ObjectKind::kChunk;
    if (!kinds.empty()) {
      ASSIGN_OR_RETURN(kind, data::ParseObjectKind(kinds[i].is_string() ? kinds[i].get<std::string>() : ""));
    }
    if (!data::IsAccepted(*store, kind, digest)) missing.push_back(digest);
  }
  return Reply::Json({{"missing", std::move(missing)}});
}

absl::StatusOr<Reply> PutObject(DatasetStores& datasets, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(data::ObjectKind kind, data::ParseObjectKind(r.query_value("kind")));
  absl::StatusOr<bool> stored = datasets.Accept(who.tenant, kind, r.param("digest"), r.body);
  if (!stored.ok()) {
    if (absl::IsResourceExhausted(stored.status()) &&
        stored.status().message().find(datasets.options().limit_flag) != std::string::npos) {
      return Reply::Json(http::ErrorBody(stored.status(), {{"limit_bytes", datasets.options().max_tenant_bytes}}), 413);
    }
    return stored.status();
  }
  return Reply::Json({{"digest", r.param("digest")}, {"new", *stored}});
}

Reply Bytes(std::string bytes) {
  Reply reply;
  reply.content_type = "application/octet-stream";
  reply.body = std::move(bytes);
  return reply;
}

}  // namespace

VersionCollection DatasetCollection() {
  return {.collection = "datasets",
          .objects = "dataset-objects",
          .noun = "dataset",
          .push_hint = "gpugeek data push DIR --dataset {} --remote"};
}

void RegisterVersionRoutes(http::Server& server, Accounts& accounts, DatasetStores& datasets,
                           const VersionCollection& c) {
  const std::string base = "/v1/" + c.collection;
  const std::string objects = "/v1/" + c.objects;
  const auto route = [&](const std::string& method, const std::string& pattern, GuardedHandler handler) {
    GuardedRoute(server, accounts, method, pattern, std::move(handler));
  };
  route("GET", base, [&datasets, c](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(data::VersionStore * store, datasets.For(who.tenant));
    const std::vector<std::string> names = store->ListDatasets();
    ASSIGN_OR_RETURN(J page,
                     Page(
                         r, c.collection, names, [](const std::string& n) { return n; },
                         [&](const std::string& n) -> J {
                           absl::StatusOr<std::vector<data::Ref>> refs = store->ListRefs(n);
                           J j = refs.ok() ? RefsJson(*refs) : J{{"error", std::string(refs.status().message())}};
                           j["name"] = n;
                           return j;
                         }));
    return Reply::Json(page);
  });
  route("GET", base + "/{name}", [&datasets, c](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
    ASSIGN_OR_RETURN(std::vector<data::Ref> refs, Refs(*store, c, r.param("name")));
    J j = RefsJson(refs);
    j["name"] = r.param("name");
    return Reply::Json(j);
  });
  route("GET", base + "/{name}/versions/{rev}",
        [&datasets, c](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
          ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
          ASSIGN_OR_RETURN(std::string digest, store->Resolve(r.param("name"), r.param("rev")));
          ASSIGN_OR_RETURN(data::Commit commit, store->ReadCommit(digest));
          return Reply::Json(CommitJson(digest, commit));
        });
  route("GET", base + "/{name}/log",
        [&datasets, c](const Principal& who, const Request& r) { return Log(datasets, c, who, r); });
  route("GET", base + "/{name}/diff",
        [&datasets, c](const Principal& who, const Request& r) { return Diff(datasets, c, who, r); });
  route("PUT", base + "/{name}/branches/{branch}",
        [&datasets, c](const Principal& who, const Request& r) { return SetBranch(datasets, c, who, r); });
  route("PUT", base + "/{name}/tags/{tag}",
        [&datasets, c](const Principal& who, const Request& r) { return PutTag(datasets, c, who, r); });
  for (const auto& [pattern, kind, param] :
       {std::tuple{base + "/{name}/branches/{branch}", data::Ref::Kind::kBranch, "branch"},
        std::tuple{base + "/{name}/tags/{tag}", data::Ref::Kind::kTag, "tag"}}) {
    route("DELETE", pattern,
          [&datasets, c, kind = kind, param = std::string(param)](const Principal& who,
                                                                  const Request& r) -> absl::StatusOr<Reply> {
            ASSIGN_OR_RETURN(data::VersionStore * store, StoreOf(datasets, c, who, r));
            RETURN_IF_ERROR(store->DeleteRef(r.param("name"), kind, r.param(param)));
            return Reply::Json({{c.noun, r.param("name")}, {param, r.param(param)}, {"deleted", true}});
          });
  }
  route("POST", objects + "/missing",
        [&datasets](const Principal& who, const Request& r) { return Missing(datasets, who, r); });
  route("PUT", objects + "/{digest}",
        [&datasets](const Principal& who, const Request& r) { return PutObject(datasets, who, r); });
  if (!c.object_get) return;
  route("GET", objects + "/{digest}", [&datasets](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(data::VersionStore * store, datasets.For(who.tenant));
    ASSIGN_OR_RETURN(std::string bytes, store->objects().Get(r.param("digest"), data::kMaxTreeBytes));
    return Bytes(std::move(bytes));
  });
}

void RegisterAgentVersionRoute(http::Server& server, DatasetStores& stores, NodeAuthority& nodes,
                               const std::string& pattern, const std::string& what, VersionOwnerFn owner_of) {
  server.Route("GET", pattern,
               [&stores, &nodes, what, owner_of = std::move(owner_of)](const Request& r) -> absl::StatusOr<Reply> {
                 auto it = r.headers.find("authorization");
                 RETURN_IF_ERROR(nodes.AuthenticateNode(
                     it == r.headers.end() ? std::string_view() : std::string_view(it->second), r.param("node")));
                 const std::string commit = r.param("commit");
                 const std::string digest = r.param("digest");
                 const auto absent = absl::NotFoundError(fmt::format("no object {} of a {} version assigned to node {}",
                                                                     digest.substr(0, 80), what, r.param("node")));
                 // Only an object of the version of a job this node holds a member of.
                 std::optional<std::string> owner = owner_of(r.param("node"), commit);
                 if (!owner.has_value()) return absent;
                 absl::StatusOr<bool> has = stores.VersionHas(*owner, commit, digest);
                 if (!has.ok() || !*has) return absent;
                 ASSIGN_OR_RETURN(data::VersionStore * store, stores.For(*owner));
                 ASSIGN_OR_RETURN(std::string bytes, store->objects().Get(digest, data::kMaxTreeBytes));
                 return Bytes(std::move(bytes));
               });
}

void RegisterAgentDatasetRoute(http::Server& server, DatasetStores& datasets, ControlPlane& cp, NodeAuthority& nodes) {
  RegisterAgentVersionRoute(
      server, datasets, nodes, "/v1/agents/{node}/datasets/{commit}/objects/{digest}", "dataset",
      [&cp](const std::string& node, const std::string& commit) { return cp.DatasetTenantFor(node, commit); });
}

}  // namespace gpugeek::controlplane
