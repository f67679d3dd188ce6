// The account commands of the client (REST API of src/controlplane/account_routes.h):
//   gpugeek login SERVER [--token T | --token-file F] [--ca-file F] [--profile NAME]
//   gpugeek whoami
//   gpugeek tenants [create NAME]                          (admin)
//   gpugeek users [create NAME --tenant T --role R]        (admin)
//   gpugeek tokens [create [--user U] [--description D] [--expires 30d] | revoke ID]
//   gpugeek join-tokens, gpugeek join-token create [--uses N] [--expires 1h] [--provider P] | revoke ID   (admin)
//   gpugeek audit [--user U] [--tenant T] [--after SEQ] [--limit N]  (admin)
// each with --server URL, --token, --profile and --json.

#include <iostream>

#include <fmt/format.h>

#include "absl/strings/strip.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/config.h"
#include "common/file.h"
#include "common/table.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// A token lifetime: a positive ParseDurationSeconds ("30d", "12h", ...).
std::optional<int64_t> ParseTtl(const std::string& text) {
  std::optional<int64_t> s = ParseDurationSeconds(text);
  if (!s || *s == 0) return std::nullopt;
  return s;
}

void RegisterLogin(CLI::App& app) {
  struct Options {
    std::string server;
    std::string token;
    std::string token_file;
    std::string ca_file;
    std::string profile = "default";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "login", "Check a token against a server and save both as a profile of the CLI config (then current)");
  sub->add_option("server", o->server, "Server URL, e.g. https://gpu.example.com:8470")->required();
  sub->add_option("--token", o->token, "API token (default: $GPUGEEK_TOKEN)");
  sub->add_option("--token-file", o->token_file,
                  "File whose first line is the token (kept by path: the config refers to it, e.g. admin.token)");
  sub->add_option("--ca-file", o->ca_file, "CA certificate the server's certificate is signed by");
  sub->add_option("--profile", o->profile, "Profile name (default: default)");
  sub->callback([o] {
    const std::string cmd = "login";
    if (o->token.empty() && o->token_file.empty()) {
      if (const char* env = std::getenv("GPUGEEK_TOKEN"); env != nullptr) o->token = env;
    }
    if (o->token.empty() == o->token_file.empty()) {
      Fail(cmd, "give exactly one of --token (or $GPUGEEK_TOKEN) and --token-file", kExitUsage);
    }
    Profile profile{.server = o->server, .token = o->token, .token_file = "", .ca_file = o->ca_file};
    if (!o->token_file.empty()) {
      profile.token_file = std::filesystem::absolute(o->token_file).string();
    }
    if (!profile.ca_file.empty()) profile.ca_file = std::filesystem::absolute(profile.ca_file).string();
    ClientFlags flags{.server = o->server, .token = o->token, .ca_file = profile.ca_file};
    if (flags.token.empty()) {
      auto text = ReadFileBounded(profile.token_file, 4096, "token file");
      if (!text.ok()) Fail(cmd, std::string(text.status().message()), kExitUsage);
      flags.token = std::string(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
    }
    json who = OrFail(cmd, Connect(cmd, flags)->Get("/v1/whoami"));
    const std::string path = ConfigPath();
    if (absl::Status st = SaveProfile(path, o->profile, profile); !st.ok()) Fail(cmd, std::string(st.message()));
    std::cout << fmt::format("Logged in to {} as {} (tenant {}, role {}); profile '{}' saved in {}\n", o->server,
                             Text(who["user"]), Text(who["tenant"]), Text(who["role"]), o->profile, path);
  });
}

void RegisterWhoami(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub = app.add_subcommand("whoami", "Show the user, tenant and role the token acts as");
  AddClientFlags(sub, flags.get());
  sub->callback([flags] {
    const std::string cmd = "whoami";
    json who = OrFail(cmd, Connect(cmd, *flags)->Get("/v1/whoami"));
    if (flags->json) {
      PrintJson(who);
      return;
    }
    std::cout << fmt::format("{} (tenant {}, role {}) with token {} on {}\n", Text(who["user"]), Text(who["tenant"]),
                             Text(who["role"]), Text(who["token_id"]), ResolveServerUrl(*flags));
  });
}

// Every page of a listing route.
json ListAll(const std::string& cmd, http::Client& client, const std::string& path, const std::string& field) {
  json all = json::array();
  std::string after;
  for (;;) {
    json page = OrFail(cmd, client.Get(path + "?limit=1000" + (after.empty() ? "" : "&after=" + UrlEncode(after))));
    for (json& item : page[field]) all.push_back(std::move(item));
    if (page["next_after"].is_null()) return all;
    after = page["next_after"].get<std::string>();
  }
}

void RegisterTenants(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub = app.add_subcommand("tenants", "List tenants (admin); `tenants create NAME` adds one");
  AddClientFlags(sub, flags.get());
  auto name = std::make_shared<std::string>();
  CLI::App* create = sub->add_subcommand("create", "Create a tenant");
  create->add_option("name", *name, "Tenant name: a DNS label, e.g. team-a")->required();
  AddClientFlags(create, flags.get());
  create->callback([flags, name] {
    const std::string cmd = "tenants create";
    json t = OrFail(cmd, Connect(cmd, *flags)->Post("/v1/tenants", {{"name", *name}}));
    if (flags->json) return PrintJson(t);
    std::cout << "Created tenant " << Text(t["name"]) << "\n";
  });
  sub->callback([flags, sub] {
    if (sub->got_subcommand("create")) return;
    const std::string cmd = "tenants";
    json all = ListAll(cmd, *Connect(cmd, *flags), "/v1/tenants", "tenants");
    if (flags->json) return PrintJson({{"tenants", all}});
    TextTable table({"NAME", "CREATED"});
    for (const json& t : all) table.AddRow({Text(t["name"]), LocalTime(Text(t["created_at"]))});
    std::cout << table.Render();
  });
}

void RegisterUsers(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string name, tenant, role = "member";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("users", "List users (admin); `users create NAME --tenant T --role R` adds one");
  AddClientFlags(sub, &o->flags);
  CLI::App* create = sub->add_subcommand("create", "Create a user (then give it a token: tokens create --user NAME)");
  create->add_option("name", o->name, "User name: a DNS label, e.g. alice")->required();
  create->add_option("--tenant", o->tenant, "Its tenant")->required();
  create->add_option("--role", o->role, "admin, member or viewer (default: member)");
  AddClientFlags(create, &o->flags);
  create->callback([o] {
    const std::string cmd = "users create";
    json u = OrFail(
        cmd, Connect(cmd, o->flags)->Post("/v1/users", {{"name", o->name}, {"tenant", o->tenant}, {"role", o->role}}));
    if (o->flags.json) return PrintJson(u);
    std::cout << fmt::format("Created user {} (tenant {}, role {})\n", Text(u["name"]), Text(u["tenant"]),
                             Text(u["role"]));
  });
  sub->callback([o, sub] {
    if (sub->got_subcommand("create")) return;
    const std::string cmd = "users";
    json all = ListAll(cmd, *Connect(cmd, o->flags), "/v1/users", "users");
    if (o->flags.json) return PrintJson({{"users", all}});
    TextTable table({"NAME", "TENANT", "ROLE", "CREATED"});
    for (const json& u : all) {
      table.AddRow({Text(u["name"]), Text(u["tenant"]), Text(u["role"]), LocalTime(Text(u["created_at"]))});
    }
    std::cout << table.Render();
  });
}

void RegisterTokens(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string user, description, expires, id;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("tokens", "List your API tokens (an admin: everyone's); create or revoke one");
  AddClientFlags(sub, &o->flags);
  CLI::App* create = sub->add_subcommand("create", "Create an API token; it is printed once and never again");
  create->add_option("--user", o->user, "For this user (admin only; default: yourself)");
  create->add_option("--description", o->description, "What it is for, e.g. ci");
  create->add_option("--expires", o->expires, "Lifetime: 3600s, 90m, 12h or 30d (default: never)");
  AddClientFlags(create, &o->flags);
  create->callback([o] {
    const std::string cmd = "tokens create";
    json body = {{"description", o->description}};
    if (!o->user.empty()) body["user"] = o->user;
    if (!o->expires.empty()) {
      std::optional<int64_t> s = ParseTtl(o->expires);
      if (!s)
        Fail(cmd, fmt::format("--expires '{}' must be a number with s, m, h or d, e.g. 30d", o->expires), kExitUsage);
      body["expires_in_s"] = *s;
    }
    json t = OrFail(cmd, Connect(cmd, o->flags)->Post("/v1/tokens", body));
    if (o->flags.json) return PrintJson(t);
    std::cout << Text(t["token"]) << "\n";
    std::cerr << fmt::format("Token {} for {} (expires {}). It is shown only now: keep it in a secret store.\n",
                             Text(t["id"]), Text(t["user"]),
                             t["expires_at"].is_null() ? "never" : LocalTime(Text(t["expires_at"])));
  });
  CLI::App* revoke = sub->add_subcommand("revoke", "Revoke a token: every later call with it is refused");
  revoke->add_option("id", o->id, "Token id (the 16 hex digits after ggk_)")->required();
  AddClientFlags(revoke, &o->flags);
  revoke->callback([o] {
    const std::string cmd = "tokens revoke";
    json t = OrFail(cmd, Connect(cmd, o->flags)->Delete("/v1/tokens/" + UrlEncode(o->id)));
    if (o->flags.json) return PrintJson(t);
    std::cout << fmt::format("Revoked token {} of {}\n", Text(t["id"]), Text(t["user"]));
  });
  sub->callback([o, sub] {
    if (sub->got_subcommand("create") || sub->got_subcommand("revoke")) return;
    const std::string cmd = "tokens";
    json all = ListAll(cmd, *Connect(cmd, o->flags), "/v1/tokens", "tokens");
    if (o->flags.json) return PrintJson({{"tokens", all}});
    TextTable table({"ID", "USER", "DESCRIPTION", "CREATED", "EXPIRES", "REVOKED"});
    for (const json& t : all) {
      table.AddRow(
          {Text(t["id"]), Text(t["user"]), t["description"].get<std::string>().empty() ? "-" : Text(t["description"]),
           LocalTime(Text(t["created_at"])), t["expires_at"].is_null() ? "never" : LocalTime(Text(t["expires_at"])),
           t["revoked_at"].is_null() ? "-" : LocalTime(Text(t["revoked_at"]))});
    }
    std::cout << table.Render();
  });
}

void RegisterJoinTokens(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string description, expires, id, provider;
    int64_t uses = 1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("join-tokens", "List join tokens (admin); see also join-token create|revoke");
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "join-tokens";
    json all = ListAll(cmd, *Connect(cmd, o->flags), "/v1/join-tokens", "join_tokens");
    if (o->flags.json) return PrintJson({{"join_tokens", all}});
    TextTable table({"ID", "USES LEFT", "PROVIDER", "DESCRIPTION", "CREATED BY", "CREATED", "EXPIRES"});
    for (const json& t : all) {
      table.AddRow(
          {Text(t["id"]), Text(t["uses_left"]), t.value("provider", std::string()).empty() ? "-" : Text(t["provider"]),
           t["description"].get<std::string>().empty() ? "-" : Text(t["description"]), Text(t["created_by"]),
           LocalTime(Text(t["created_at"])), t["expires_at"].is_null() ? "never" : LocalTime(Text(t["expires_at"]))});
    }
    std::cout << table.Render();
  });
  CLI::App* token = app.add_subcommand("join-token", "Create or revoke a join token (admin): how new nodes join");
  token->require_subcommand(1);
  CLI::App* create =
      token->add_subcommand("create", "Create a join token; pass it to `gpugeek agent --join-token` on the new nodes");
  create->add_option("--uses", o->uses, "How many agents may join with it (default: 1)");
  create->add_option("--expires", o->expires, "Lifetime: 3600s, 90m, 12h or 30d (default: 1h)");
  create->add_option("--description", o->description, "What it is for, e.g. rack-12");
  create->add_option("--provider", o->provider,
                     "The provider (a tenant) whose nodes join with it: their usage is owed to it (docs/billing.md)");
  AddClientFlags(create, &o->flags);
  create->callback([o] {
    const std::string cmd = "join-token create";
    // A join token lets machines into the pool: it expires by default.
    std::optional<int64_t> ttl = ParseTtl(o->expires.empty() ? "1h" : o->expires);
    if (!ttl)
      Fail(cmd, fmt::format("--expires '{}' must be a number with s, m, h or d, e.g. 1h", o->expires), kExitUsage);
    json t = OrFail(cmd, Connect(cmd, o->flags)
                             ->Post("/v1/join-tokens", {{"description", o->description},
                                                        {"uses", o->uses},
                                                        {"expires_in_s", *ttl},
                                                        {"provider", o->provider}}));
    if (o->flags.json) return PrintJson(t);
    std::cout << Text(t["token"]) << "\n";
    std::cerr << fmt::format("Join token {}: {} agent(s) may join until {}. It is shown only now.\n", Text(t["id"]),
                             Text(t["uses_left"]), LocalTime(Text(t["expires_at"])));
  });
  CLI::App* revoke = token->add_subcommand("revoke", "Delete a join token: no more agents join with it");
  revoke->add_option("id", o->id, "Join token id (the 16 hex digits after ggj_)")->required();
  AddClientFlags(revoke, &o->flags);
  revoke->callback([o] {
    const std::string cmd = "join-token revoke";
    OrFail(cmd, Connect(cmd, o->flags)->Delete("/v1/join-tokens/" + UrlEncode(o->id)));
    if (!o->flags.json) std::cout << "Revoked join token " << o->id << "\n";
  });
}

}  // namespace

void RegisterAudit(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string user, tenant;
    int64_t after = 0;
    int limit = 100;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "audit", "List the audit log (admin): every state-changing call, who made it, when, from where, its status");
  sub->add_option("--user", o->user, "Only this user's calls");
  sub->add_option("--tenant", o->tenant, "Only calls of this tenant's users");
  sub->add_option("--after", o->after, "Only records after this seq (page on from the last one shown)");
  sub->add_option("--limit", o->limit, "At most this many records, oldest first")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "audit";
    std::string path = fmt::format("/v1/audit?limit={}&after={}", o->limit, o->after);
    if (!o->user.empty()) path += "&user=" + UrlEncode(o->user);
    if (!o->tenant.empty()) path += "&tenant=" + UrlEncode(o->tenant);
    json page = OrFail(cmd, Connect(cmd, o->flags)->Get(path));
    if (o->flags.json) return PrintJson(page);
    TextTable table({"SEQ", "TIME", "USER", "TENANT", "ROLE", "CALL", "STATUS", "FROM", "REQUEST"});
    for (const json& a : page["records"]) {
      table.AddRow({std::to_string(a.value("seq", int64_t{0})), LocalTime(Text(a["time"])), Text(a["user"]),
                    Text(a["tenant"]), Text(a["role"]), Text(a["method"]) + " " + Text(a["path"]),
                    std::to_string(a.value("status", 0)), Text(a["remote_address"]), Text(a["request_id"])});
    }
    std::cout << table.Render();
    if (!page["next_after"].is_null()) {
      std::cout << fmt::format("(more: gpugeek audit --after {})\n", page["next_after"].get<int64_t>());
    }
  });
}

void RegisterAccountCommands(CLI::App& app) {
  RegisterJoinTokens(app);
  RegisterLogin(app);
  RegisterWhoami(app);
  RegisterTenants(app);
  RegisterUsers(app);
  RegisterTokens(app);
  RegisterAudit(app);
}

}  // namespace gpugeek::cli
