// The tenants' quota commands of the client (REST API of src/controlplane/quota_routes.h):
//   gpugeek quota [--tenant T]          use against limit and fair share (your tenant; an admin: all)
//   gpugeek quota set TENANT [--gpus MODEL=N]... [--milli-gpus N] [--jobs N] [--weight W]     (admin)
// each with --server URL, --token, --profile and --json. `quota set` changes only the limits it is
// given (MODEL=0, --milli-gpus 0, --jobs 0: unlimited) and keeps the others.

#include <iostream>
#include <set>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/table.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// "held/limit", the limit "-" when unlimited (0).
std::string UseOf(const std::string& held, int64_t limit, const std::string& limit_text) {
  return held + "/" + (limit > 0 ? limit_text : "-");
}

// Held GPUs against the cap, per model: "H100-SXM-80GB 2/8, A100-SXM-80GB 0.5/-"; "-" when none.
std::string GpusByModel(const json& row) {
  std::set<std::string> models;
  for (const auto& [model, milli] : row["held_gpu_milli_by_model"].items()) models.insert(model);
  for (const auto& [model, n] : row["max_gpus_by_model"].items()) models.insert(model);
  std::string out;
  for (const std::string& model : models) {
    const int64_t held = row["held_gpu_milli_by_model"].value(model, int64_t{0});
    const int64_t cap = row["max_gpus_by_model"].value(model, int64_t{0});
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", model, UseOf(Gpus(held), cap, std::to_string(cap)));
  }
  return out.empty() ? "-" : out;
}

// Every row GET /v1/quota gives the caller (all pages), with the half-life.
json AllRows(const std::string& cmd, http::Client& client, const std::string& tenant, json* half_life_s) {
  json page;
  json all =
      AllPages(cmd, client, "/v1/quota" + (tenant.empty() ? "" : "?tenant=" + UrlEncode(tenant)), "tenants", &page);
  *half_life_s = page["half_life_s"];
  return all;
}

void PrintTable(const json& rows, const json& half_life_s) {
  TextTable table({"TENANT", "WEIGHT", "GPUS BY MODEL", "MILLI-GPU", "JOBS", "FAIR-SHARE", "OVER-QUOTA"});
  table.AlignRight(1);
  table.AlignRight(5);
  table.AlignRight(6);
  std::vector<std::string> waiting;
  for (const json& row : rows) {
    const int64_t max_milli = row["max_gpu_milli"];
    const int64_t max_jobs = row["max_jobs"];
    table.AddRow({Text(row["tenant"]), fmt::format("{:g}", row["weight"].get<double>()), GpusByModel(row),
                  UseOf(std::to_string(row["held_gpu_milli"].get<int64_t>()), max_milli, std::to_string(max_milli)),
                  UseOf(std::to_string(row["jobs"].get<int64_t>()), max_jobs, std::to_string(max_jobs)),
                  fmt::format("{:.3f}", row["fair_share_factor"].get<double>()),
                  std::to_string(row["over_quota_jobs"].size())});
    for (const json& j : row["over_quota_jobs"])
      waiting.push_back(fmt::format("  {}: {}", Text(j["id"]), Text(j["reason"])));
  }
  std::cout << table.Render();
  const double days = half_life_s.is_number() ? half_life_s.get<double>() / 86400 : 0;
  std::cout << fmt::format("Fair share: 1 = unused, 0.5 = used exactly its share; usage half-life {}.\n",
                           days > 0 ? fmt::format("{:g} days", days) : std::string("off (no decay)"));
  if (!waiting.empty()) {
    std::cout << "Waiting over quota:\n";
    for (const std::string& line : waiting) std::cout << line << "\n";
  }
}

}  // namespace

void RegisterQuotaCommands(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string tenant;
    std::vector<std::string> gpus;
    int64_t milli_gpus = 0;
    int64_t jobs = 0;
    double weight = 1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "quota", "Show each tenant's GPUs, milli-GPU and jobs held against its quota, and its fair-share factor");
  sub->add_option("--tenant", o->tenant, "Only this tenant (yours unless you are an admin)");
  AddClientFlags(sub, &o->flags);
  CLI::App* set = sub->add_subcommand("set", "Set a tenant's quota and fair-share weight (admin); unset limits stay");
  set->add_option("tenant", o->tenant, "Tenant name")->required();
  CLI::Option* gpus =
      set->add_option("--gpus", o->gpus, "Whole GPUs of one model, MODEL=N (repeat per model; 0: no cap)");
  CLI::Option* milli =
      set->add_option("--milli-gpus", o->milli_gpus, "Milli-GPU over all models (1000 = one GPU; 0: no cap)")
          ->check(CLI::NonNegativeNumber);
  CLI::Option* jobs =
      set->add_option("--jobs", o->jobs, "Jobs holding GPUs at once (0: no cap)")->check(CLI::NonNegativeNumber);
  CLI::Option* weight =
      set->add_option("--weight", o->weight, "Fair-share weight (> 0; only ratios matter)")->check(CLI::PositiveNumber);
  AddClientFlags(set, &o->flags);
  set->callback([o, gpus, milli, jobs, weight] {
    const std::string cmd = "quota set";
    auto client = Connect(cmd, o->flags);
    json half_life;
    json rows = AllRows(cmd, *client, o->tenant, &half_life);
    // What the tenant has now, changed by the flags given.
    json body = {{"weight", 1}, {"max_gpu_milli", 0}, {"max_jobs", 0}, {"max_gpus_by_model", json::object()}};
    if (!rows.empty()) {
      for (const char* key : {"weight", "max_gpu_milli", "max_jobs", "max_gpus_by_model"}) body[key] = rows[0][key];
    }
    if (weight->count() > 0) body["weight"] = o->weight;
    if (milli->count() > 0) body["max_gpu_milli"] = o->milli_gpus;
    if (jobs->count() > 0) body["max_jobs"] = o->jobs;
    if (gpus->count() > 0) {
      for (const std::string& g : o->gpus) {
        const size_t eq = g.rfind('=');
        const std::string count = eq == std::string::npos ? "" : g.substr(eq + 1);
        if (eq == 0 || count.empty() || count.size() > 9 ||
            count.find_first_not_of("0123456789") != std::string::npos) {
          Fail(cmd, fmt::format("--gpus '{}' must be MODEL=N, e.g. A100-SXM-80GB=8", g), kExitUsage);
        }
        const int64_t n = std::stoll(count);
        if (n == 0) {
          body["max_gpus_by_model"].erase(g.substr(0, eq));
        } else {
          body["max_gpus_by_model"][g.substr(0, eq)] = n;
        }
      }
    }
    json row = OrFail(cmd, client->Put("/v1/tenants/" + UrlEncode(o->tenant) + "/quota", body));
    if (o->flags.json) return PrintJson(row);
    PrintTable(json::array({row}), half_life);
  });
  sub->callback([o, sub] {
    if (sub->got_subcommand("set")) return;
    const std::string cmd = "quota";
    json half_life;
    json rows = AllRows(cmd, *Connect(cmd, o->flags), o->tenant, &half_life);
    if (o->flags.json) return PrintJson({{"tenants", rows}, {"half_life_s", half_life}});
    PrintTable(rows, half_life);
  });
}

}  // namespace gpugeek::cli
