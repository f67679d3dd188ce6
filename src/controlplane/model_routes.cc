#include "controlplane/model_routes.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "absl/strings/numbers.h"
#include "api/engines.h"
#include "api/json_reader.h"
#include "archive/digest.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/paging.h"
#include "data/version_objects.h"
#include "data/version_transfer.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

std::string Owner(const std::string& owner, const Principal& who) { return owner.empty() ? who.tenant : owner; }
bool SameTenant(const std::string& a, const std::string& b) {
  return (a.empty() ? "default" : a) == (b.empty() ? "default" : b);
}

// The one answer for a model the caller may not see and one that does not exist.
absl::Status NoModel(const std::string& owner, const std::string& name, bool own) {
  if (own) {
    return absl::NotFoundError(fmt::format("no model '{}' (push one: gpugeek model push DIR --name {})",
                                           name.substr(0, 64), name.substr(0, 64)));
  }
  return absl::NotFoundError(
      fmt::format("no model '{}/{}' shared with your tenant", owner.substr(0, 64), name.substr(0, 64)));
}

// The commit `rev` names in owner's model `name`, if `tenant` holds `right` on it.
absl::StatusOr<std::string> Resolve(DatasetStores& models, const ModelRegistry& registry, const std::string& tenant,
                                    const std::string& owner, const std::string& name, const std::string& rev,
                                    ModelRight right) {
  RETURN_IF_ERROR(data::ValidateRefName(name, "model"));
  const bool own = SameTenant(owner, tenant);
  const ModelRights rights = registry.RightsOf(owner, name, tenant);
  if (rights == 0) return NoModel(owner, name, own);
  ASSIGN_OR_RETURN(data::VersionStore * store, models.For(owner));
  absl::StatusOr<std::vector<data::Ref>> refs = store->ListRefs(name);
  if (!refs.ok() || refs->empty()) return NoModel(owner, name, own);
  if (!(rights & right)) {
    return absl::PermissionDeniedError(fmt::format(
        "tenant '{}' may {} model {}/{} but not {} it; ask its owner to grant {}", tenant,
        fmt::join(ModelRightNames(rights), ", "), owner, name, ModelRightNames(right)[0], ModelRightNames(right)[0]));
  }
  const auto no_version = [&] {
    return absl::NotFoundError(
        fmt::format("no version '{}' of model {}{}", rev.substr(0, 80), own ? "" : owner + "/", name));
  };
  absl::StatusOr<std::string> commit = store->Resolve(name, rev);
  // Why another tenant's revision did not resolve may name the owner's other models (a commit digest of one
  // "is in dataset 'secret'"): that tenant gets one answer for every revision that is not a version here.
  if (!own && absl::IsNotFound(commit.status())) return no_version();
  if (!commit.ok()) return commit.status();
  ASSIGN_OR_RETURN(data::Commit c, store->ReadCommit(*commit));
  // A commit digest of another model of the same owner resolves in the store; it is not this model's.
  if (c.dataset != name) return no_version();
  return *commit;
}

absl::StatusOr<Reply> Pull(DatasetStores& models, ModelRegistry& registry, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"rev", "owner"}));
  ASSIGN_OR_RETURN(std::string rev, reader.String("rev", "main"));
  ASSIGN_OR_RETURN(std::string owner_field, reader.String("owner", ""));
  const std::string owner = Owner(owner_field, who);
  const std::string name = r.param("name");
  ASSIGN_OR_RETURN(std::string commit, Resolve(models, registry, who.tenant, owner, name, rev, kModelPull));
  ASSIGN_OR_RETURN(data::VersionStore * store, models.For(owner));
  ASSIGN_OR_RETURN(data::Commit c, store->ReadCommit(commit));
  ASSIGN_OR_RETURN(
      PullRecord record,
      registry.RecordPull(owner, {.user = who.user, .tenant = who.tenant, .model = name, .commit = commit}));
  return Reply::Json({{"seq", record.seq},
                      {"owner", owner.empty() ? "default" : owner},
                      {"model", name},
                      {"commit", commit},
                      {"tree", c.tree},
                      {"message", c.message},
                      {"author", c.author},
                      {"time", c.time_unix_s},
                      {"files", c.files},
                      {"bytes", c.bytes}});
}

absl::StatusOr<Reply> PullLog(DatasetStores& models, ModelRegistry& registry, const Principal& who, const Request& r) {
  const std::string name = r.param("name");
  RETURN_IF_ERROR(data::ValidateRefName(name, "model"));
  ASSIGN_OR_RETURN(data::VersionStore * store, models.For(who.tenant));
  ASSIGN_OR_RETURN(std::vector<data::Ref> refs, store->ListRefs(name));
  if (refs.empty()) return NoModel(who.tenant, name, true);
  ASSIGN_OR_RETURN(int limit, PageLimit(r));
  int64_t after = 0;
  const std::string after_text = r.query_value("after", "0");
  if (!absl::SimpleAtoi(after_text, &after) || after < 0) {
    return absl::InvalidArgumentError("query parameter 'after' must be a pull's seq (an integer >= 0)");
  }
  ASSIGN_OR_RETURN(std::vector<PullRecord> pulls, registry.Pulls(who.tenant, name, after, limit + 1));
  J list = J::array();
  J next = nullptr;
  for (size_t i = 0; i < pulls.size(); ++i) {
    if (static_cast<int>(i) == limit) {
      next = std::to_string(pulls[i - 1].seq);
      break;
    }
    const PullRecord& p = pulls[i];
    list.push_back({{"seq", p.seq},
                    {"time", p.time_unix_s},
                    {"user", p.user},
                    {"tenant", p.tenant},
                    {"model", p.model},
                    {"commit", p.commit}});
  }
  return Reply::Json({{"pulls", std::move(list)}, {"next_after", std::move(next)}});
}

absl::StatusOr<Reply> SetGrant(DatasetStores& models, ModelRegistry& registry, const Accounts& accounts,
                               const Principal& who, const Request& r, bool revoke) {
  const std::string name = r.param("name");
  RETURN_IF_ERROR(data::ValidateRefName(name, "model"));
  ASSIGN_OR_RETURN(data::VersionStore * store, models.For(who.tenant));
  ASSIGN_OR_RETURN(std::vector<data::Ref> refs, store->ListRefs(name));
  if (refs.empty()) return NoModel(who.tenant, name, true);
  const std::string grantee = r.param("tenant");
  if (!accounts.HasTenant(grantee)) {
    return absl::NotFoundError(
        fmt::format("tenant: no tenant '{}' (gpugeek tenant ls lists them)", grantee.substr(0, 64)));
  }
  ModelRights rights = 0;
  if (!revoke) {
    ASSIGN_OR_RETURN(J body, r.JsonBody());
    if (!body.is_object() || !body.contains("rights") || !body["rights"].is_array() || body.size() != 1) {
      return absl::InvalidArgumentError(
          "body: must be {\"rights\": [...]} with any of \"pull\", \"deploy\", \"finetune\" ([] revokes)");
    }
    std::vector<std::string> names;
    for (const J& n : body["rights"]) {
      if (!n.is_string()) return absl::InvalidArgumentError("rights: each right is a string: pull, deploy or finetune");
      names.push_back(n.get<std::string>());
    }
    ASSIGN_OR_RETURN(rights, ParseModelRights(names));
  }
  RETURN_IF_ERROR(registry.SetGrant(who.tenant, name, grantee, rights));
  return Reply::Json({{"model", name}, {"tenant", grantee}, {"rights", ModelRightNames(rights)}});
}

absl::StatusOr<Reply> GetObject(DatasetStores& models, const ModelRegistry& registry, const Principal& who,
                                const Request& r) {
  const std::string digest = r.param("digest");
  const std::string owner = Owner(r.query_value("owner"), who);
  const auto absent = absl::NotFoundError(fmt::format("no object {}", digest.substr(0, 80)));
  if (!SameTenant(owner, who.tenant)) {
    // Another tenant's object: only one of a version whose pull this tenant logged, of a model it may pull.
    const std::string commit = r.query_value("commit");
    if (!archive::IsSha256Hex(commit) || !registry.HasPullTicket(who.tenant, owner, commit)) return absent;
    ASSIGN_OR_RETURN(data::VersionStore * store, models.For(owner));
    absl::StatusOr<data::Commit> c = store->ReadCommit(commit);
    if (!c.ok() || !(registry.RightsOf(owner, c->dataset, who.tenant) & kModelPull)) return absent;
    absl::StatusOr<bool> has = models.VersionHas(owner, commit, digest);
    if (!has.ok() || !*has) return absent;
  }
  ASSIGN_OR_RETURN(data::VersionStore * store, models.For(owner));
  absl::StatusOr<std::string> bytes = store->objects().Get(digest, data::kMaxTreeBytes);
  if (!bytes.ok()) return absl::IsNotFound(bytes.status()) ? absent : bytes.status();
  Reply reply;
  reply.content_type = "application/octet-stream";
  reply.body = *std::move(bytes);
  return reply;
}

}  // namespace

VersionCollection ModelCollection() {
  return {.collection = "models",
          .objects = "model-objects",
          .noun = "model",
          .push_hint = "gpugeek model push DIR --name {}",
          .object_get = false};
}

absl::StatusOr<std::string> ResolveModelFor(DatasetStores& models, const ModelRegistry& registry,
                                            const std::string& tenant, const std::string& owner,
                                            const std::string& name, const std::string& rev, ModelRight right) {
  return Resolve(models, registry, tenant, owner.empty() ? tenant : owner, name, rev, right);
}

absl::StatusOr<std::string> AdmitWeights(DatasetStores& models, ModelRegistry& registry, const std::string& tenant,
                                         const std::string& user, const std::string& owner_in, const std::string& name,
                                         const std::string& rev, ModelRight right, const std::string& engine) {
  const std::string owner = owner_in.empty() ? tenant : owner_in;
  ASSIGN_OR_RETURN(std::string commit, Resolve(models, registry, tenant, owner, name, rev, right));
  ASSIGN_OR_RETURN(data::VersionStore * store, models.For(owner));
  if (!data::IsAccepted(*store, data::ObjectKind::kCommit, commit)) {
    return absl::NotFoundError(fmt::format("{} is not a version pushed whole to the registry", commit.substr(0, 12)));
  }
  if (!engine.empty()) {
    ASSIGN_OR_RETURN(const auto files, store->ListFiles(commit));
    if (std::none_of(files.begin(), files.end(), [&](const auto& f) { return api::IsEngineFile(engine, f.first); })) {
      return absl::FailedPreconditionError(
          fmt::format("engine {}: the version holds no {} file (none of its {} files ends in {}); push the export "
                      "(examples/gpt/export_engine.py writes model.torchscript.pt, model.onnx, model.int8.onnx) "
                      "or leave engine: out",
                      engine, engine, files.size(), fmt::join(api::EngineFileSuffixes(engine), ", ")));
    }
  }
  if (!SameTenant(owner, tenant)) {
    RETURN_IF_ERROR(
        registry.RecordPull(owner, {.user = user, .tenant = tenant, .model = name, .commit = commit}).status());
  }
  return commit;
}

void RegisterAgentModelRoute(http::Server& server, DatasetStores& models, ControlPlane& cp, NodeAuthority& nodes) {
  RegisterAgentVersionRoute(
      server, models, nodes, "/v1/agents/{node}/models/{commit}/objects/{digest}", "model",
      [&cp](const std::string& node, const std::string& commit) { return cp.ModelOwnerFor(node, commit); });
}

void RegisterModelRoutes(http::Server& server, Accounts& accounts, DatasetStores& models, ModelRegistry& registry) {
  RegisterVersionRoutes(server, accounts, models, ModelCollection());
  const auto route = [&](const std::string& method, const std::string& pattern, GuardedHandler handler) {
    GuardedRoute(server, accounts, method, pattern, std::move(handler));
  };
  route("POST", "/v1/models/{name}/pulls",
        [&models, &registry](const Principal& who, const Request& r) { return Pull(models, registry, who, r); });
  route("GET", "/v1/models/{name}/pulls",
        [&models, &registry](const Principal& who, const Request& r) { return PullLog(models, registry, who, r); });
  route("GET", "/v1/models/{name}/grants",
        [&models, &registry](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
          const std::string name = r.param("name");
          RETURN_IF_ERROR(data::ValidateRefName(name, "model"));
          ASSIGN_OR_RETURN(data::VersionStore * store, models.For(who.tenant));
          ASSIGN_OR_RETURN(std::vector<data::Ref> refs, store->ListRefs(name));
          if (refs.empty()) return NoModel(who.tenant, name, true);
          J grants = J::array();
          for (const ModelGrant& g : registry.GrantsOn(who.tenant, name)) {
            grants.push_back({{"tenant", g.grantee}, {"rights", ModelRightNames(g.rights)}});
          }
          return Reply::Json({{"model", name}, {"grants", std::move(grants)}});
        });
  route("PUT", "/v1/models/{name}/grants/{tenant}",
        [&models, &registry, &accounts](const Principal& who, const Request& r) {
          return SetGrant(models, registry, accounts, who, r, /*revoke=*/false);
        });
  route("DELETE", "/v1/models/{name}/grants/{tenant}",
        [&models, &registry, &accounts](const Principal& who, const Request& r) {
          return SetGrant(models, registry, accounts, who, r, /*revoke=*/true);
        });
  route("GET", "/v1/shared-models", [&registry](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    const std::vector<ModelGrant> grants = registry.GrantsTo(who.tenant);
    ASSIGN_OR_RETURN(J page,
                     Page(
                         r, "models", grants, [](const ModelGrant& g) { return g.owner + "/" + g.model; },
                         [](const ModelGrant& g) -> J {
                           return {{"owner", g.owner}, {"name", g.model}, {"rights", ModelRightNames(g.rights)}};
                         }));
    return Reply::Json(page);
  });
  route("GET", "/v1/model-objects/{digest}",
        [&models, &registry](const Principal& who, const Request& r) { return GetObject(models, registry, who, r); });
}

}  // namespace gpugeek::controlplane
