#include "controlplane/secret_routes.h"

#include <fmt/format.h>

#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/paging.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

J SecretJson(const store::SecretRecord& s) {
  return {{"name", s.name},
          {"tenant", s.tenant},
          {"created_at", FormatTime(s.created_at)},
          {"updated_at", FormatTime(s.updated_at)}};
}

// The caller's secret `name` without its value; NotFound as the store's for an absent one.
absl::StatusOr<store::SecretRecord> Find(Secrets& secrets, const Principal& who, const std::string& name) {
  ASSIGN_OR_RETURN(auto all, secrets.List(who.tenant));
  for (store::SecretRecord& s : all) {
    if (s.name == name) return std::move(s);
  }
  return absl::NotFoundError(store::Store::fmt_no_secret(who.tenant, name));
}

}  // namespace

void RegisterSecretRoutes(http::Server& server, Accounts& accounts, Secrets& secrets, RotateKeysFn rotate) {
  const auto route = [&](const std::string& method, const std::string& pattern, GuardedHandler handler) {
    GuardedRoute(server, accounts, method, pattern, std::move(handler));
  };
  route("PUT", "/v1/secrets/{name}", [&secrets](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(J body, r.JsonBody());
    api::JsonReader reader(body, "");
    RETURN_IF_ERROR(reader.CheckObject({"value"}));
    ASSIGN_OR_RETURN(std::string value, reader.String("value"));
    ASSIGN_OR_RETURN(store::SecretRecord s, secrets.Put(who.tenant, r.param("name"), std::move(value)));
    return Reply::Json(SecretJson(s));
  });
  route("GET", "/v1/secrets", [&secrets](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(auto all, secrets.List(who.tenant));
    ASSIGN_OR_RETURN(J page, Page(
                                 r, "secrets", all, [](const store::SecretRecord& s) { return s.name; }, SecretJson));
    return Reply::Json(page);
  });
  route("GET", "/v1/secrets/{name}", [&secrets](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(store::SecretRecord s, Find(secrets, who, r.param("name")));
    return Reply::Json(SecretJson(s));
  });
  route("DELETE", "/v1/secrets/{name}", [&secrets](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(store::SecretRecord s, Find(secrets, who, r.param("name")));
    RETURN_IF_ERROR(secrets.Delete(who.tenant, s.name));
    return Reply::Json(SecretJson(s));
  });
  route("POST", "/v1/keys/rotate", [rotate](const Principal&, const Request& r) -> absl::StatusOr<Reply> {
    J body = J::object();
    if (!r.body.empty()) {
      ASSIGN_OR_RETURN(body, r.JsonBody());
    }
    api::JsonReader reader(body, "");
    RETURN_IF_ERROR(reader.CheckObject({"retire"}));
    ASSIGN_OR_RETURN(bool retire, reader.Bool("retire", false));
    if (!rotate) {
      return absl::FailedPreconditionError(
          "keys: this server's master keys are not in a key file it rotates (a KMS); rotate them there");
    }
    ASSIGN_OR_RETURN(crypto::MasterKeyRotation done, rotate(retire));
    return Reply::Json({{"new_key_id", done.new_key_id}, {"rewrapped", done.rewrapped}, {"retired", done.retired}});
  });
}

}  // namespace gpugeek::controlplane
