// The model service commands (REST API of src/controlplane/service_routes.h, docs/service-spec.md):
//   gpugeek serve SPEC.yaml                    deploy a service, or roll out a new spec of it
//   gpugeek services                           the services of your tenant
//   gpugeek endpoints                          every service's versions and ready replicas (admin)
//   gpugeek replicas NAME                      a service's replicas and their readiness
//   gpugeek traffic set NAME v1=90 v2=10       the versions' weights (v2=100: promote; the others get 0)
//   gpugeek scale NAME v1=2                    desired replicas of versions
//   gpugeek service delete NAME                delete it: its replicas are cancelled
// each with --server URL, --token, --profile and --json.

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "api/service_spec.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/workdir_upload.h"
#include "common/absl_fmt.h"
#include "common/table.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// NAME=N arguments as a JSON object, or the command fails naming the bad one.
json Assignments(const std::string& cmd, const std::vector<std::string>& args, const std::string& what) {
  json out = json::object();
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    int64_t n = 0;
    if (eq == std::string::npos || eq == 0 || !absl::SimpleAtoi(a.substr(eq + 1), &n)) {
      Fail(cmd, fmt::format("'{}': give VERSION={} (e.g. v1=2)", a, what), kExitUsage);
    }
    out[a.substr(0, eq)] = n;
  }
  return out;
}

std::string Versions(const json& s) {
  std::string out;
  for (const json& v : s["versions"]) {
    out += fmt::format("{}{} {}% x{}", out.empty() ? "" : ", ", Text(v["name"]), v["weight"].get<int64_t>(),
                       v["desired"].get<int64_t>());
  }
  return out;
}

void PrintMap(const json& m, const std::string& title) {
  std::string out;
  for (const auto& [k, v] : m.items()) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v.get<int64_t>());
  std::cout << title << ": " << out << "\n";
}

}  // namespace

void RegisterServeCommands(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string file;
    std::string name;
    std::vector<std::string> args;
  };
  auto o = std::make_shared<Options>();

  CLI::App* serve = app.add_subcommand("serve", "Deploy a model service from a spec, or roll out a new spec of it");
  serve->add_option("spec", o->file, "Service spec YAML file (docs/service-spec.md)")->required();
  AddClientFlags(serve, &o->flags);
  serve->callback([o] {
    const std::string cmd = "serve";
    const std::string yaml = ReadFileOrFail(cmd, o->file, "service spec");
    absl::StatusOr<api::ServiceSpec> spec = api::ParseServiceSpec(yaml);
    if (!spec.ok()) Fail(cmd, fmt::format("{}: {}", o->file, std::string(spec.status().message())), kExitUsage);
    auto client = Connect(cmd, o->flags);
    // Each version's workdir is packed and uploaded as `gpugeek submit` does (once per digest; relative to the spec
    // file); the server gets the archives' digests instead of the paths.
    std::string body_yaml = yaml;
    bool uploaded = false;
    for (api::ServiceVersion& v : spec->versions) {
      if (v.run.workdir.empty()) continue;
      std::filesystem::path dir(v.run.workdir);
      if (dir.is_relative()) dir = std::filesystem::path(o->file).parent_path() / dir;
      if (dir.empty()) dir = ".";
      absl::StatusOr<WorkdirUpload> up = UploadWorkdir(*client, dir.string(), {.progress = stderr});
      if (!up.ok()) Fail(cmd, fmt::format("versions {}: {}", v.name, up.status().message()));
      (o->flags.json ? std::cerr : std::cout)
          << fmt::format("version {}: workdir {} ({} files); {}\n", v.name, dir.string(), up->files,
                         up->put_requests == 0 ? std::string("the server has it already")
                                               : fmt::format("uploaded {} bytes", up->bytes_sent));
      v.run.workdir.clear();
      v.run.workdir_digest = up->digest;
      uploaded = true;
    }
    if (uploaded) body_yaml = api::ServiceSpecToYaml(*spec);
    const json s = OrFail(cmd, client->Post("/v1/services", {{"spec_yaml", body_yaml}}));
    if (o->flags.json) {
      PrintJson(s);
      return;
    }
    std::cout << fmt::format("service {} (generation {}): {}; gpugeek replicas {}\n", Text(s["name"]),
                             s["generation"].get<int64_t>(), Versions(s), Text(s["name"]));
  });

  CLI::App* services = app.add_subcommand("services", "List model services");
  AddClientFlags(services, &o->flags);
  services->callback([o] {
    const std::string cmd = "services";
    auto client = Connect(cmd, o->flags);
    const json all = AllPages(cmd, *client, "/v1/services", "services");
    if (o->flags.json) {
      PrintJson(all);
      return;
    }
    TextTable table({"NAME", "GEN", "READY", "DESIRED", "VERSIONS", "REQUESTS", "TOKENS", "UPDATED", "REASON"});
    for (size_t c : {1, 2, 3, 5, 6}) table.AlignRight(c);
    for (const json& s : all) {
      // Metered since the service began (every gateway's counters: controllers/serving_meter.h).
      int64_t requests = 0, tokens = 0;
      for (const json& v : s["versions"]) {
        requests += v.value("metered_requests", int64_t{0});
        tokens += v.value("metered_tokens", int64_t{0});
      }
      table.AddRow({Text(s["name"]), std::to_string(s["generation"].get<int64_t>()),
                    std::to_string(s["ready"].get<int64_t>()), std::to_string(s["desired"].get<int64_t>()), Versions(s),
                    std::to_string(requests), std::to_string(tokens), LocalTime(Text(s["updated_at"])),
                    Text(s["reason"])});
    }
    std::cout << table.Render();
  });

  CLI::App* endpoints = app.add_subcommand("endpoints", "Every service's versions and ready replicas (admin)");
  AddClientFlags(endpoints, &o->flags);
  endpoints->callback([o] {
    const std::string cmd = "endpoints";
    auto client = Connect(cmd, o->flags);
    const json e = OrFail(cmd, client->Get("/v1/endpoints"));
    if (o->flags.json) {
      PrintJson(e);
      return;
    }
    TextTable table({"SERVICE", "VERSION", "WEIGHT", "REPLICA", "ADDRESS", "STATE"});
    table.AlignRight(2);
    for (const json& r : e["routes"]) {
      for (const json& v : r["versions"]) {
        const std::string weight = fmt::format("{}%", v["weight"].get<int64_t>());
        if (v["replicas"].empty()) {
          table.AddRow({Text(r["service"]), Text(v["name"]), weight, "-", "-", "no ready replica"});
        }
        for (const json& rep : v["replicas"]) {
          table.AddRow({Text(r["service"]), Text(v["name"]), weight, Text(rep["id"]), Text(rep["address"]), "READY"});
        }
      }
    }
    std::cout << table.Render();
  });

  CLI::App* replicas = app.add_subcommand("replicas", "A service's replicas and their readiness");
  replicas->add_option("name", o->name, "Service name")->required();
  AddClientFlags(replicas, &o->flags);
  replicas->callback([o] {
    const std::string cmd = "replicas";
    auto client = Connect(cmd, o->flags);
    const json all = AllPages(cmd, *client, "/v1/services/" + UrlEncode(o->name) + "/replicas", "replicas");
    if (o->flags.json) {
      PrintJson(all);
      return;
    }
    TextTable table({"VERSION", "REPLICA", "JOB", "NODE", "ADDRESS", "STATE", "SINCE"});
    table.AlignRight(1);
    for (const json& r : all) {
      const std::string address =
          Text(r["address"]).empty() ? "-" : fmt::format("{}:{}", Text(r["address"]), r["port"].get<int64_t>());
      table.AddRow({Text(r["version"]), std::to_string(r["ordinal"].get<int64_t>()), Text(r["job"]),
                    Text(r["node"]).empty() ? "-" : Text(r["node"]), address, Text(r["state"]),
                    LocalTime(Text(r["since"]))});
    }
    std::cout << table.Render();
  });

  CLI::App* traffic = app.add_subcommand("traffic", "The versions' shares of a service's requests");
  traffic->require_subcommand(1);
  CLI::App* set = traffic->add_subcommand("set", "Set the weights (percent, summing to 100; versions not named get 0)");
  set->add_option("name", o->name, "Service name")->required();
  set->add_option("weights", o->args, "VERSION=PERCENT ... (v2=100 promotes v2)")->required();
  AddClientFlags(set, &o->flags);
  set->callback([o] {
    const std::string cmd = "traffic set";
    const json weights = Assignments(cmd, o->args, "PERCENT");
    auto client = Connect(cmd, o->flags);
    const json w = OrFail(cmd, client->Post("/v1/services/" + UrlEncode(o->name) + "/traffic", {{"weights", weights}}));
    if (o->flags.json) {
      PrintJson(w);
    } else {
      PrintMap(w["weights"], o->name + " weights");
    }
  });

  CLI::App* scale = app.add_subcommand("scale", "Set the desired replicas of a service's versions");
  scale->add_option("name", o->name, "Service name")->required();
  scale->add_option("replicas", o->args, "VERSION=N ...")->required();
  AddClientFlags(scale, &o->flags);
  scale->callback([o] {
    const std::string cmd = "scale";
    const json replicas_wanted = Assignments(cmd, o->args, "N");
    auto client = Connect(cmd, o->flags);
    const json r =
        OrFail(cmd, client->Post("/v1/services/" + UrlEncode(o->name) + "/scale", {{"replicas", replicas_wanted}}));
    if (o->flags.json) {
      PrintJson(r);
    } else {
      PrintMap(r["replicas"], o->name + " replicas");
    }
  });

  CLI::App* service = app.add_subcommand("service", "One model service");
  service->require_subcommand(1);
  CLI::App* del = service->add_subcommand("delete", "Delete a service: its replicas are cancelled");
  del->add_option("name", o->name, "Service name")->required();
  AddClientFlags(del, &o->flags);
  del->callback([o] {
    const std::string cmd = "service delete";
    auto client = Connect(cmd, o->flags);
    const json s = OrFail(cmd, client->Delete("/v1/services/" + UrlEncode(o->name)));
    if (o->flags.json) {
      PrintJson(s);
    } else {
      std::cout << fmt::format("service {}: {} ({})\n", Text(s["name"]), Text(s["state"]), Text(s["reason"]));
    }
  });
}

}  // namespace gpugeek::cli
