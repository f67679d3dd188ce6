// The hyper-parameter search commands (REST API of src/controlplane/experiment_routes.h, docs/hpo.md):
//   gpugeek hpo run SPEC.yaml [--wait]     start an experiment (its trial's `workdir:` is uploaded first)
//   gpugeek hpo list                       the experiments of your tenant
//   gpugeek hpo status ID [--svg DIR]      its trials, the best so far and which parameters mattered;
//                                          --svg writes best-so-far charts vs trials and vs GPU-hours
//   gpugeek hpo export ID [--out FILE]     every trial as CSV
//   gpugeek hpo stop ID                    no new trials; running ones are cancelled
// each with --server URL, --token, --profile and --json.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/workdir_upload.h"
#include "common/line_chart.h"
#include "common/table.h"
#include "hpo/experiment_spec.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

std::string Value(const json& v) { return v.is_number() ? fmt::format("{:.6g}", v.get<double>()) : Text(v); }

std::string Params(const json& params) {
  std::string out;
  for (const auto& [name, v] : params.items()) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, v.is_number_float() ? Value(v) : Text(v));
  }
  return out;
}

// The whole experiment: every page of trials.
json Fetch(const std::string& cmd, http::Client& client, const std::string& id) {
  json all;
  json trials = json::array();
  std::string after;
  for (;;) {
    json page = OrFail(
        cmd, client.Get("/v1/experiments/" + UrlEncode(id) + "?limit=1000" + (after.empty() ? "" : "&after=" + after)));
    for (json& t : page["trials"]) trials.push_back(std::move(t));
    const bool last = page["next_after"].is_null();
    if (!last) after = std::to_string(page["next_after"].get<int64_t>());
    all = std::move(page);
    if (last) break;
  }
  all["trials"] = std::move(trials);
  all.erase("next_after");
  return all;
}

std::string Counts(const json& e) {
  const json& c = e["counts"];
  return fmt::format("{} running, {} complete, {} pruned, {} failed of {}", c.value("running", 0),
                     c.value("complete", 0), c.value("pruned", 0), c.value("failed", 0),
                     e["budget"]["trials"].get<int64_t>());
}

std::string BestLine(const json& e) {
  if (e["best"].is_null()) return "best: none yet";
  return fmt::format("best: {} {} at trial {} ({})", Text(e["metric"]), Value(e["best"]["value"]),
                     e["best"]["number"].get<int64_t>(), Params(e["best"]["params"]));
}

void PrintStatus(const json& e) {
  std::cout << fmt::format("{} ({}): {}; {}\n", Text(e["id"]), Text(e["name"]), Text(e["state"]), Text(e["reason"]));
  std::cout << fmt::format("objective: {} {}; sampler {}, pruner {}, {} at once; {:.2f} GPU-hours used\n",
                           Text(e["direction"]), Text(e["metric"]), Text(e["sampler"]), Text(e["pruner"]),
                           e["parallelism"].get<int64_t>(), e["gpu_seconds"].get<double>() / 3600);
  TextTable table({"TRIAL", "STATE", "VALUE", "LAST STEP", "LAST VALUE", "GPU-S", "JOB", "PARAMS"});
  for (size_t c : {0, 2, 3, 4, 5}) table.AlignRight(c);
  for (const json& t : e["trials"]) {
    table.AddRow({std::to_string(t["number"].get<int64_t>()), Text(t["state"]), Value(t["value"]), Text(t["last_step"]),
                  Value(t["last_value"]), fmt::format("{:.0f}", t["gpu_seconds"].get<double>()), Text(t["job_id"]),
                  Params(t["params"])});
  }
  std::cout << table.Render();
  std::cout << Counts(e) << "\n" << BestLine(e) << "\n";
  std::string importance;
  for (const json& i : e["importance"]) {
    importance +=
        fmt::format("{}{} {:.0f}%", importance.empty() ? "" : ", ", Text(i["param"]), 100 * i["share"].get<double>());
  }
  if (!importance.empty()) std::cout << "importance (share of eta^2 of the loss ranks): " << importance << "\n";
}

// Best so far against trials and against cumulative GPU-hours (trials in order).
void WriteCharts(const std::string& cmd, const json& e, const std::string& dir) {
  ChartSeries by_trial{.name = "best " + Text(e["metric"])};
  ChartSeries by_gpu{.name = by_trial.name};
  double gpu_hours = 0;
  const json& best = e["best_so_far"];
  for (size_t i = 0; i < e["trials"].size() && i < best.size(); ++i) {
    gpu_hours += e["trials"][i]["gpu_seconds"].get<double>() / 3600;
    if (!best[i].is_number()) continue;
    by_trial.points.emplace_back(static_cast<double>(i + 1), best[i].get<double>());
    by_gpu.points.emplace_back(gpu_hours, best[i].get<double>());
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string id = Text(e["id"]);
  const double trials = std::max<double>(1, static_cast<double>(e["trials"].size()));
  const std::string title = fmt::format("{} ({})", Text(e["name"]), id);
  const std::vector<std::pair<std::string, std::string>> files = {
      {dir + "/" + id + "-best-vs-trials.svg", LineChartSvg(title, "trials", Text(e["metric"]), {by_trial}, 1, trials)},
      {dir + "/" + id + "-best-vs-gpu-hours.svg",
       LineChartSvg(title, "GPU-hours", Text(e["metric"]), {by_gpu}, 0, std::max(gpu_hours, 1e-6))}};
  for (const auto& [path, svg] : files) {
    std::ofstream out(path);
    out << svg;
    if (!out) Fail(cmd, fmt::format("--svg: cannot write {}", path), kExitUsage);
    std::cout << "wrote " << path << "\n";
  }
}

// The spec with its trial's `workdir:` uploaded and replaced by workdir_digest (as `gpugeek submit` does).
std::string UploadTrialWorkdir(const std::string& cmd, http::Client& client, const std::filesystem::path& file,
                               const std::string& yaml, const hpo::ExperimentSpec& spec, bool quiet) {
  if (spec.trial.workdir.empty()) return yaml;
  std::filesystem::path dir(spec.trial.workdir);
  if (dir.is_relative()) dir = file.parent_path() / dir;
  if (dir.empty()) dir = ".";
  absl::StatusOr<WorkdirUpload> up = UploadWorkdir(client, dir.string(), {.progress = stderr});
  if (!up.ok()) Fail(cmd, "trial." + std::string(up.status().message()));
  (quiet ? std::cerr : std::cout) << fmt::format(
      "trial.workdir: {} ({} files, {} bytes); {}\n", dir.string(), up->files, up->content_bytes,
      up->put_requests == 0 ? "the server has it already" : fmt::format("uploaded {} bytes", up->bytes_sent));
  // The `workdir:` line of the block-style trial becomes `workdir_digest:`, so the rest of the file (its
  // quoting: "64" stays a string) is sent as written; a flow-style trial is emitted again.
  static const std::regex line(R"((\n[ \t]+)workdir:[ \t]*[^\n]*)");
  const size_t trial = yaml.find("\ntrial:");
  std::smatch m;
  if (trial != std::string::npos &&
      std::regex_search(yaml.begin() + static_cast<std::ptrdiff_t>(trial), yaml.end(), m, line)) {
    const size_t at = trial + static_cast<size_t>(m.position(0));
    return yaml.substr(0, at) + m[1].str() + "workdir_digest: " + up->digest + yaml.substr(at + m.length(0));
  }
  YAML::Node root = YAML::Load(yaml);
  root["trial"].remove("workdir");
  root["trial"]["workdir_digest"] = up->digest;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

// Polls until the experiment ends; one line per change (rewritten in place on a terminal).
json Wait(const std::string& cmd, http::Client& client, const std::string& id) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  std::string shown;
  for (;;) {
    json e = OrFail(cmd, client.Get("/v1/experiments/" + UrlEncode(id) + "?limit=1"));
    const std::string line = Counts(e) + "; " + BestLine(e);
    if (line != shown) {
      std::cerr << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
      shown = line;
    }
    const std::string state = Text(e["state"]);
    if (state != "running" && state != "stopping") {
      if (tty) std::cerr << "\n";
      return e;
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

}  // namespace

void RegisterHpoCommands(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string file;
    std::string id;
    std::string svg;
    std::string out;
    bool wait = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* hpo = app.add_subcommand("hpo", "Hyper-parameter experiments: trials as jobs, stopped early by a pruner");
  hpo->require_subcommand(1);

  CLI::App* run = hpo->add_subcommand("run", "Start an experiment from a spec (docs/hpo.md)");
  run->add_option("spec", o->file, "Experiment spec YAML file")->required();
  run->add_flag("--wait", o->wait, "Follow it to the end; exit 0 when it succeeded, 1 otherwise");
  AddClientFlags(run, &o->flags);
  run->callback([o] {
    const std::string cmd = "hpo run";
    const std::filesystem::path file(o->file);
    const std::string yaml = ReadFileOrFail(cmd, file, "experiment spec");
    absl::StatusOr<hpo::ExperimentSpec> spec = hpo::ParseExperimentSpec(yaml);
    if (!spec.ok()) Fail(cmd, fmt::format("{}: {}", o->file, std::string(spec.status().message())), kExitUsage);
    auto client = Connect(cmd, o->flags);
    const std::string sent = UploadTrialWorkdir(cmd, *client, file, yaml, *spec, o->flags.json);
    json e = OrFail(cmd, client->Post("/v1/experiments", {{"spec_yaml", sent}}));
    const std::string id = Text(e["id"]);
    if (!o->wait) {
      if (o->flags.json) {
        PrintJson(e);
      } else {
        std::cout << fmt::format("experiment {} ({}) started: {} trials, {} at once; gpugeek hpo status {}\n", id,
                                 Text(e["name"]), e["budget"]["trials"].get<int64_t>(), e["parallelism"].get<int64_t>(),
                                 id);
      }
      return;
    }
    std::cerr << fmt::format("experiment {} ({}) started\n", id, Text(e["name"]));
    e = Wait(cmd, *client, id);
    if (o->flags.json) {
      PrintJson(Fetch(cmd, *client, id));
    } else {
      PrintStatus(Fetch(cmd, *client, id));
    }
    if (Text(e["state"]) != "succeeded") throw CLI::RuntimeError(kExitFailed);
  });

  CLI::App* list = hpo->add_subcommand("list", "List experiments");
  AddClientFlags(list, &o->flags);
  list->callback([o] {
    const std::string cmd = "hpo list";
    auto client = Connect(cmd, o->flags);
    json all = json::array();
    std::string after;
    for (;;) {
      json page = OrFail(cmd, client->Get("/v1/experiments?limit=1000" + (after.empty() ? "" : "&after=" + after)));
      for (json& e : page["experiments"]) all.push_back(std::move(e));
      if (page["next_after"].is_null()) break;
      after = UrlEncode(page["next_after"].get<std::string>());
    }
    if (o->flags.json) {
      PrintJson(all);
      return;
    }
    TextTable table({"ID", "NAME", "STATE", "TRIALS", "GPU-H", "CREATED", "REASON"});
    table.AlignRight(4);
    for (const json& e : all) {
      table.AddRow({Text(e["id"]), Text(e["name"]), Text(e["state"]), Counts(e),
                    fmt::format("{:.2f}", e["gpu_seconds"].get<double>() / 3600), LocalTime(Text(e["created_at"])),
                    Text(e["reason"])});
    }
    std::cout << table.Render();
  });

  CLI::App* status = hpo->add_subcommand("status", "An experiment's trials, best so far and parameter importance");
  status->add_option("id", o->id, "Experiment id (x-000001)")->required();
  status->add_option("--svg", o->svg, "Write best-so-far charts (vs trials, vs GPU-hours) into this folder");
  AddClientFlags(status, &o->flags);
  status->callback([o] {
    const std::string cmd = "hpo status";
    auto client = Connect(cmd, o->flags);
    const json e = Fetch(cmd, *client, o->id);
    if (o->flags.json) {
      PrintJson(e);
    } else {
      PrintStatus(e);
    }
    if (!o->svg.empty()) WriteCharts(cmd, e, o->svg);
  });

  CLI::App* exp = hpo->add_subcommand("export", "Every trial of an experiment as CSV");
  exp->add_option("id", o->id, "Experiment id")->required();
  exp->add_option("--out", o->out, "Write to this file instead of stdout");
  AddClientFlags(exp, &o->flags);
  exp->callback([o] {
    const std::string cmd = "hpo export";
    auto client = Connect(cmd, o->flags);
    absl::StatusOr<std::string> csv = client->GetText("/v1/experiments/" + UrlEncode(o->id) + "/export");
    if (!csv.ok()) Fail(cmd, std::string(csv.status().message()));
    if (o->out.empty()) {
      std::cout << *csv;
      return;
    }
    std::ofstream out(o->out);
    out << *csv;
    if (!out) Fail(cmd, fmt::format("--out: cannot write {}", o->out), kExitUsage);
  });

  CLI::App* stop = hpo->add_subcommand("stop", "Stop an experiment: no new trials, running ones cancelled");
  stop->add_option("id", o->id, "Experiment id")->required();
  AddClientFlags(stop, &o->flags);
  stop->callback([o] {
    const std::string cmd = "hpo stop";
    auto client = Connect(cmd, o->flags);
    const json e = OrFail(cmd, client->Post("/v1/experiments/" + UrlEncode(o->id) + "/stop", json::object()));
    if (o->flags.json) {
      PrintJson(e);
    } else {
      std::cout << fmt::format("experiment {}: {} ({})\n", Text(e["id"]), Text(e["state"]), Text(e["reason"]));
    }
  });
}

}  // namespace gpugeek::cli
