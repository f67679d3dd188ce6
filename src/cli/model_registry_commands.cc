// The model registry from the command line (controlplane/model_routes.h):
//   gpugeek model push DIR --name NAME [--branch main] [--tag T] [--message M]   a folder as a new version
//   gpugeek model ls                              your models and those other tenants shared with yours
//   gpugeek model pull [OWNER/]NAME[@REV] --out DIR                               a version into a new folder
//   gpugeek model share NAME --tenant T --rights pull,deploy,finetune             grant (replaces the rights)
//   gpugeek model unshare NAME --tenant T
//   gpugeek model grants NAME                     who else may use it
//   gpugeek model pulls NAME                      every pull of it, by whom
// Versions travel as datasets' do (data_remote.h): only the objects the other side lacks, each checked
// against its digest; the local cache is --cache, $GPUGEEK_MODEL_CACHE, $XDG_CACHE_HOME/gpugeek/models or
// ~/.cache/gpugeek/models. Tables on a terminal, JSON with --json; errors exit 1 (2 for bad flags).

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/job_spec.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/data_remote.h"
#include "common/table.h"
#include "common/units.h"
#include "data/version_store.h"

namespace gpugeek::cli {
namespace {

using J = nlohmann::json;

struct Common {
  ClientFlags server;
  std::string cache;
};

void AddCommon(CLI::App* cmd, Common& c, bool cache) {
  AddClientFlags(cmd, &c.server);
  if (cache) {
    cmd->add_option("--cache", c.cache,
                    "Local cache of model objects (default $GPUGEEK_MODEL_CACHE or ~/.cache/gpugeek/models)");
  }
}

template <typename T>
T Must(const std::string& cmd, absl::StatusOr<T> v) {
  if (!v.ok()) Fail(cmd, std::string(v.status().message()));
  return *std::move(v);
}

std::string CacheDir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GPUGEEK_MODEL_CACHE"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/gpugeek/models";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/gpugeek/models";
}

std::unique_ptr<data::VersionStore> OpenCache(const std::string& cmd, const Common& c) {
  return Must(cmd, data::VersionStore::Open(CacheDir(c.cache), RealClock()));
}

ClientFactory Factory(const std::string& cmd, const Common& c) {
  const Endpoint e = Must(cmd, ResolveEndpoint(c.server));
  return [e]() {
    return http::Client::Create(
        {.base_url = e.server, .read_timeout = std::chrono::minutes(5), .ca_file = e.ca_file, .bearer_token = e.token});
  };
}

std::string Short(const std::string& digest) { return digest.substr(0, 12); }

// Every page of GET `path` (?after= paging): the items of `field`.
J AllPages(const std::string& cmd, http::Client& client, const std::string& path, const std::string& field) {
  J items = J::array();
  std::string after;
  for (int page = 0; page < 10'000; ++page) {
    const std::string sep = path.find('?') == std::string::npos ? "?" : "&";
    J j = OrFail(cmd, client.Get(path + sep + "limit=1000" + (after.empty() ? "" : "&after=" + UrlEncode(after))));
    if (!j.is_object() || !j[field].is_array()) Fail(cmd, "the server's answer is not a page of " + field);
    for (J& item : j[field]) items.push_back(std::move(item));
    if (!j["next_after"].is_string() || j["next_after"].get<std::string>() <= after) break;
    after = j["next_after"].get<std::string>();
  }
  return items;
}

void RegisterPush(CLI::App* model) {
  struct Options : Common {
    std::string dir, name, branch = "main", tag, message, author;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = model->add_subcommand("push", "Push a model folder to the registry as a new version");
  cmd->add_option("dir", o->dir, "The model's folder (weights, config, tokenizer, model.sig)")->required();
  cmd->add_option("--name", o->name, "The model's name in the registry")->required();
  cmd->add_option("--branch", o->branch, "Branch to move to the new version")->capture_default_str();
  cmd->add_option("--tag", o->tag, "Also tag the version (tags never move)");
  cmd->add_option("--message,-m", o->message, "What this version is");
  cmd->add_option("--author", o->author, "Who made it (default $USER)");
  AddCommon(cmd, *o, true);
  cmd->callback([o] {
    const std::string c = "model push";
    auto cache = OpenCache(c, *o);
    const ClientFactory connect = Factory(c, *o);
    data::PushOptions p{.dataset = o->name, .branch = o->branch, .message = o->message, .author = o->author};
    if (p.author.empty()) p.author = std::getenv("USER") != nullptr ? std::getenv("USER") : "";
    const RemotePushResult r = Must(c, PushRemote(connect, *cache, o->dir, p, 4, RemoteModels()));
    if (!o->tag.empty()) {
      auto client = Must(c, connect());
      OrFail(c, client->Put(fmt::format("/v1/models/{}/tags/{}", UrlEncode(o->name), UrlEncode(o->tag)),
                            {{"commit", r.snapshot.commit}}));
    }
    if (o->server.json) {
      PrintJson({{"model", o->name},
                 {"branch", o->branch},
                 {"commit", r.snapshot.commit},
                 {"unchanged", r.snapshot.unchanged},
                 {"files", r.snapshot.files},
                 {"bytes", r.snapshot.bytes},
                 {"objects", r.objects},
                 {"uploaded_objects", r.uploaded_objects},
                 {"uploaded_bytes", r.uploaded_bytes}});
      return;
    }
    if (r.snapshot.unchanged) {
      std::cout << fmt::format("{}@{} is already this folder ({})\n", o->name, o->branch, Short(r.snapshot.commit));
      return;
    }
    std::cout << fmt::format("{}@{} -> {}: {} files, {}; sent {} of {} objects ({})\n", o->name, o->branch,
                             Short(r.snapshot.commit), r.snapshot.files, FormatBytes(r.snapshot.bytes),
                             r.uploaded_objects, r.objects, FormatBytes(r.uploaded_bytes));
  });
}

void RegisterLs(CLI::App* model) {
  auto o = std::make_shared<Common>();
  CLI::App* cmd = model->add_subcommand("ls", "Your tenant's models and the models other tenants shared with it");
  AddCommon(cmd, *o, false);
  cmd->callback([o] {
    const std::string c = "model ls";
    auto client = Connect(c, o->server);
    const J own = AllPages(c, *client, "/v1/models", "models");
    const J shared = AllPages(c, *client, "/v1/shared-models", "models");
    if (o->server.json) {
      PrintJson({{"models", own}, {"shared", shared}});
      return;
    }
    TextTable t({"MODEL", "OWNER", "BRANCHES", "TAGS", "RIGHTS"});
    for (const J& m : own) {
      std::vector<std::string> branches, tags;
      for (const J& b : m.value("branches", J::array())) branches.push_back(Text(b.value("name", J())));
      for (const J& b : m.value("tags", J::array())) tags.push_back(Text(b.value("name", J())));
      t.AddRow({Text(m.value("name", J())), "(yours)", fmt::format("{}", fmt::join(branches, ",")),
                tags.empty() ? "-" : fmt::format("{}", fmt::join(tags, ",")), "all"});
    }
    for (const J& m : shared) {
      std::vector<std::string> rights;
      for (const J& r : m.value("rights", J::array())) rights.push_back(Text(r));
      t.AddRow({Text(m.value("name", J())), Text(m.value("owner", J())), "-", "-",
                fmt::format("{}", fmt::join(rights, ","))});
    }
    std::cout << t.Render();
  });
}

void RegisterPull(CLI::App* model) {
  struct Options : Common {
    std::string ref, out;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = model->add_subcommand("pull", "Download a version of a model (yours or shared) into a new folder");
  cmd->add_option("model", o->ref, "[OWNER/]NAME[@REV]: OWNER for another tenant's model, REV default main")
      ->required();
  cmd->add_option("--out,-o", o->out, "Folder to create (absent or empty)")->required();
  AddCommon(cmd, *o, true);
  cmd->callback([o] {
    const std::string c = "model pull";
    const api::ModelRef ref = Must(c, api::ParseModelRef(o->ref, "model"));
    const ClientFactory connect = Factory(c, *o);
    auto client = Must(c, connect());
    J pull = {{"rev", ref.rev}};
    if (!ref.owner.empty()) pull["owner"] = ref.owner;
    // The pull is logged before any object leaves; the commit it names is what is fetched.
    const J pulled = OrFail(c, client->Post(fmt::format("/v1/models/{}/pulls", UrlEncode(ref.name)), pull));
    if (!pulled.is_object() || !pulled["commit"].is_string() || !pulled["owner"].is_string()) {
      Fail(c, "the server's answer names no commit");
    }
    const std::string commit = pulled["commit"].get<std::string>();
    RemoteCollection where = RemoteModels();
    if (!ref.owner.empty()) {
      where.object_query = fmt::format("?owner={}&commit={}", UrlEncode(ref.owner), UrlEncode(commit));
    }
    auto cache = OpenCache(c, *o);
    const FetchResult f = Must(c, FetchRemote(connect, *cache, commit, 4, where));
    const data::CheckoutResult r = Must(c, cache->Checkout(ref.name, commit, o->out, 0));
    if (o->server.json) {
      PrintJson({{"owner", pulled["owner"]},
                 {"model", ref.name},
                 {"commit", commit},
                 {"files", r.files},
                 {"bytes", r.bytes},
                 {"downloaded_objects", f.downloaded_objects},
                 {"downloaded_bytes", f.downloaded_bytes},
                 {"pull", pulled.value("seq", 0)}});
      return;
    }
    std::cout << fmt::format("{}/{}@{} ({}) -> {}: {} files, {}; fetched {} of {} objects ({})\n",
                             pulled["owner"].get<std::string>(), ref.name, ref.rev, Short(commit), o->out, r.files,
                             FormatBytes(r.bytes), f.downloaded_objects, f.objects, FormatBytes(f.downloaded_bytes));
  });
}

void RegisterShare(CLI::App* model) {
  struct Options : Common {
    std::string name, tenant;
    std::vector<std::string> rights;
  };
  for (const bool share : {true, false}) {
    auto o = std::make_shared<Options>();
    CLI::App* cmd =
        share ? model->add_subcommand("share", "Grant another tenant rights on your model (replaces its rights)")
              : model->add_subcommand("unshare", "Revoke another tenant's rights on your model");
    cmd->add_option("name", o->name, "Your model")->required();
    cmd->add_option("--tenant", o->tenant, "The tenant to grant or revoke")->required();
    if (share) {
      cmd->add_option("--rights", o->rights, "Any of pull, deploy, finetune (comma-separated)")
          ->delimiter(',')
          ->required();
    }
    AddCommon(cmd, *o, false);
    cmd->callback([o, share] {
      const std::string c = share ? "model share" : "model unshare";
      auto client = Connect(c, o->server);
      const std::string path = fmt::format("/v1/models/{}/grants/{}", UrlEncode(o->name), UrlEncode(o->tenant));
      const J j = OrFail(c, share ? client->Put(path, {{"rights", o->rights}}) : client->Delete(path));
      if (o->server.json) {
        PrintJson(j);
        return;
      }
      std::vector<std::string> rights;
      for (const J& r : j.value("rights", J::array())) rights.push_back(Text(r));
      std::cout << (rights.empty()
                        ? fmt::format("{}: tenant {} has no rights now\n", o->name, o->tenant)
                        : fmt::format("{}: tenant {} may {}\n", o->name, o->tenant, fmt::join(rights, ", ")));
    });
  }
}

void RegisterGrants(CLI::App* model) {
  struct Options : Common {
    std::string name;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = model->add_subcommand("grants", "Which other tenants may pull, deploy or fine-tune your model");
  cmd->add_option("name", o->name, "Your model")->required();
  AddCommon(cmd, *o, false);
  cmd->callback([o] {
    auto client = Connect("model grants", o->server);
    const J j = OrFail("model grants", client->Get(fmt::format("/v1/models/{}/grants", UrlEncode(o->name))));
    if (o->server.json) {
      PrintJson(j);
      return;
    }
    TextTable t({"TENANT", "RIGHTS"});
    for (const J& g : j.value("grants", J::array())) {
      std::vector<std::string> rights;
      for (const J& r : g.value("rights", J::array())) rights.push_back(Text(r));
      t.AddRow({Text(g.value("tenant", J())), fmt::format("{}", fmt::join(rights, ","))});
    }
    std::cout << t.Render();
  });
}

void RegisterPulls(CLI::App* model) {
  struct Options : Common {
    std::string name;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = model->add_subcommand("pulls", "Every pull of your model: when, by whom, which version");
  cmd->add_option("name", o->name, "Your model")->required();
  AddCommon(cmd, *o, false);
  cmd->callback([o] {
    const std::string c = "model pulls";
    auto client = Connect(c, o->server);
    const J pulls = AllPages(c, *client, fmt::format("/v1/models/{}/pulls", UrlEncode(o->name)), "pulls");
    if (o->server.json) {
      PrintJson({{"pulls", pulls}});
      return;
    }
    TextTable t({"SEQ", "TIME", "USER", "TENANT", "COMMIT"});
    for (const J& p : pulls) {
      t.AddRow({Text(p.value("seq", J())), UtcTime(p.value("time", int64_t{0})), Text(p.value("user", J())),
                Text(p.value("tenant", J())), Short(p.value("commit", ""))});
    }
    std::cout << t.Render();
  });
}

}  // namespace

void RegisterModelRegistryCommands(CLI::App& app) {
  CLI::App* model = app.get_subcommand("model");
  model->description("Model artifacts: the registry (push, pull, share), signing and watermarks");
  RegisterPush(model);
  RegisterLs(model);
  RegisterPull(model);
  RegisterShare(model);
  RegisterGrants(model);
  RegisterPulls(model);
}

}  // namespace gpugeek::cli
