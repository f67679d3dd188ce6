// The job commands of the client (REST API of src/controlplane/api_routes.h):
//   gpugeek submit JOB.yaml [--follow | --dry-run] [--tenant T]
//   gpugeek jobs [--state S] [--tenant T] [--limit N]
//   gpugeek job ID
//   gpugeek logs ID [-f] [--rank N|all] [--epoch E]
//   gpugeek cancel ID [--reason TEXT]
//   gpugeek events [--job ID] [--after SEQ] [--limit N]
// each with --server URL and --json.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "absl/strings/escaping.h"
#include "api/job_spec.h"
#include "api/quantity.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/log_reader.h"
#include "cli/workdir_upload.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

constexpr auto kPollInterval = std::chrono::milliseconds(250);

// 42 s, 3.5 min, 2.0 h, 1.5 d.
std::string HumanSeconds(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 172800) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} d", s / 86400);
}

bool IsTerminalState(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
}

// "node-a GPUs 0,1,2,3 (A100-SXM-80GB)" per member, one line each.
std::vector<std::string> Placement(const json& allocation) {
  std::vector<std::string> lines;
  if (!allocation.is_object()) return lines;
  for (const json& m : allocation.value("members", json::array())) {
    const int64_t milli = m.value("gpu_milli", int64_t{1000});
    lines.push_back(fmt::format("rank {}: {} GPUs {} ({}{}){}", m.value("rank", 0), Text(m.value("node", json())),
                                fmt::join(m.value("gpus", std::vector<int>{}), ","),
                                Text(allocation.value("gpu_model", json())),
                                milli < 1000 ? fmt::format(", {} milli-GPU each", milli) : "",
                                allocation.value("released", false) ? " [released]" : ""));
  }
  return lines;
}

std::string PlacementShort(const json& allocation) {
  if (!allocation.is_object()) return "-";
  std::string out;
  for (const json& m : allocation.value("members", json::array())) {
    if (!out.empty()) out += " ";
    out += fmt::format("{}[{}]", Text(m.value("node", json())), fmt::join(m.value("gpus", std::vector<int>{}), ","));
  }
  return out.empty() ? "-" : out;
}

// The job's outcome line and exit code: 0 on SUCCEEDED, 1 otherwise.
int ReportOutcome(const json& job, std::ostream& out) {
  const std::string state = Text(job.value("state", json()));
  out << fmt::format("job {} {}", Text(job.value("id", json())), state);
  if (!job.value("exit_code", json()).is_null()) out << fmt::format(" (exit code {})", Text(job["exit_code"]));
  const std::string reason = job.value("reason", std::string());
  if (!reason.empty()) out << ": " << reason;
  out << "\n" << std::flush;
  return state == "SUCCEEDED" ? 0 : kExitFailed;
}

// Prints a job's log (rank 0, every placement) to `out` as it arrives until the job ended and its log
// is complete.
void StreamLog(const std::string& cmd, const ClientFlags& flags, const std::string& id, std::ostream& out) {
  auto client = Connect(cmd, flags);
  absl::StatusOr<json> last = ReadJobLogs(*client, {.job_id = id, .rank = 0, .follow = true}, [&](std::string_view b) {
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
    out.flush();
  });
  if (!last.ok()) Fail(cmd, std::string(last.status().message()));
}

// --follow: waits for placement (printing it), streams the logs, waits for the end; returns the
// exit code. Progress goes to `status_out`, logs to `log_out`.
int Follow(const std::string& cmd, const ClientFlags& flags, const std::string& id, std::ostream& status_out,
           std::ostream& log_out, json* final_job) {
  auto client = Connect(cmd, flags);
  const std::string path = "/v1/jobs/" + UrlEncode(id);
  std::string last_pending;
  json job;
  for (;;) {
    job = OrFail(cmd, client->Get(path));
    const std::string state = job.value("state", std::string());
    if (state != "PENDING") break;
    const std::string why = job.value("pending_reason", std::string());
    if (!why.empty() && why != last_pending) {
      status_out << fmt::format("pending: {}\n", why) << std::flush;
      last_pending = why;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (job["allocation"].is_object()) {
    status_out << fmt::format("placed {} ({}):\n", id, Text(job.value("state", json())));
    for (const std::string& line : Placement(job["allocation"])) status_out << "  " << line << "\n";
    status_out << std::flush;
    StreamLog(cmd, flags, id, log_out);
  }
  for (;;) {
    job = OrFail(cmd, client->Get(path));
    if (IsTerminalState(job.value("state", std::string()))) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  *final_job = job;
  return ReportOutcome(job, status_out);
}

// `submit --dry-run`: the offers the job would take, cheapest first within its capacity preference.
void PrintQuote(const json& quote, bool as_json) {
  if (as_json) return PrintJson(quote);
  if (quote["plan"].is_object()) std::cout << fmt::format("plan: {}\n", Text(quote["plan"].value("best", json())));
  TextTable table(
      {"GPU", "CAPACITY", "REGION", "PROVIDER", "NODES x GPUS", "PRICE/H", "FITS NOW", "EST. TIME", "EST. COST"});
  for (int c : {4, 5, 7, 8}) table.AlignRight(c);
  for (const json& l : quote["lines"]) {
    const std::string estimate = l.value("estimate", std::string());
    const int64_t seconds = l.value("est_seconds", int64_t{0});
    table.AddRow({Text(l["gpu_model"]), Text(l["capacity_type"]), l["region"] == "" ? "-" : Text(l["region"]),
                  l["provider"] == "" ? "-" : Text(l["provider"]),
                  fmt::format("{} x {}", l["members"].get<int>(), l["gpus_per_member"].get<int>()),
                  FormatMoney(l["price_per_hour_micros"].get<int64_t>()), l["fits_now"].get<bool>() ? "yes" : "no",
                  estimate.empty() ? "-"
                                   : fmt::format("{}{}", api::FormatDuration(std::chrono::seconds(seconds)),
                                                 estimate == "max_duration" ? " (max)" : ""),
                  l.contains("est_cost_micros") ? FormatMoney(l["est_cost_micros"].get<int64_t>()) : "-"});
  }
  std::cout << table.Render();
  if (quote["lines"].empty()) std::cout << "No offer in the pool matches the job now.\n";
  std::cout << fmt::format("Your tenant has {} to spend{}. Nothing was submitted.\n",
                           FormatMoney(quote["available_micros"].get<int64_t>()),
                           quote.value("enforced", false) ? " (budgets are enforced)" : "");
}

void RegisterSubmit(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string file;
    std::string tenant;
    bool follow = false;
    bool dry_run = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "submit",
      "Submit a job spec (docs/job-spec.md); a spec's `model:` config.json is read relative to the YAML file and "
      "sent for the planner");
  sub->add_option("spec", o->file, "Job spec YAML file")->required();
  sub->add_option("--tenant", o->tenant, "Tenant the job is accounted to");
  sub->add_flag("-f,--follow", o->follow,
                "Wait for placement, stream the logs, exit with the job's outcome (0 SUCCEEDED, 1 otherwise); "
                "with --json, progress and logs go to stderr and the final job JSON to stdout");
  sub->add_flag("--dry-run", o->dry_run,
                "Submit nothing: show which offers the job would take, what an hour of it costs there and, with the "
                "planner's time (or max_duration), what the whole job would cost; nothing is uploaded")
      ->excludes("--follow");
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "submit";
    const std::filesystem::path file(o->file);
    const std::string yaml = ReadFileOrFail(cmd, file, "job spec");
    auto spec = api::ParseJobSpec(yaml);
    if (!spec.ok()) Fail(cmd, fmt::format("{}: {}", o->file, spec.status().message()), kExitUsage);
    json body = {{"spec_yaml", yaml}};
    std::unique_ptr<http::Client> client = Connect(cmd, o->flags);
    if (o->dry_run) {
      // The server needs neither the folders nor the files to quote: nothing is uploaded.
      spec->workdir.clear();
      spec->files.clear();
      spec->weights_signer.clear();
      body["spec_yaml"] = api::JobSpecToYaml(*spec);
      body["dry_run"] = true;
    }
    if (!spec->workdir.empty()) {
      // The folder is relative to the spec file; the server gets its archive's digest instead of the path.
      std::filesystem::path dir(spec->workdir);
      if (dir.is_relative()) dir = file.parent_path() / dir;
      if (dir.empty()) dir = ".";
      absl::StatusOr<WorkdirUpload> up = UploadWorkdir(*client, dir.string(), {.progress = stderr});
      if (!up.ok()) Fail(cmd, std::string(up.status().message()));
      std::ostream& info = o->flags.json ? std::cerr : std::cout;
      info << fmt::format("workdir: {} ({} files, {} bytes packed to {} in {:.0f} ms); {}\n", dir.string(), up->files,
                          up->content_bytes, up->archive_bytes, up->pack_ms,
                          up->put_requests == 0 ? std::string("the server has it already, nothing uploaded")
                                                : fmt::format("uploaded {} bytes", up->bytes_sent));
      spec->workdir.clear();
      spec->workdir_digest = up->digest;
      body["spec_yaml"] = api::JobSpecToYaml(*spec);
    }
    for (const auto& [dest, src] : spec->files) {
      // SRC is relative to the spec file, as the workdir is; each entry is one archive, sent once per digest.
      std::filesystem::path from(src);
      if (from.is_relative()) from = file.parent_path() / from;
      absl::StatusOr<FileUpload> up = UploadFileEntry(*client, dest, from.string(), {.progress = stderr});
      if (!up.ok()) Fail(cmd, std::string(up.status().message()));
      std::ostream& info = o->flags.json ? std::cerr : std::cout;
      info << fmt::format("files.{}: {} {} ({} bytes as {}); {}\n", dest, up->kind, from.string(),
                          up->stats.content_bytes, up->stats.archive_bytes,
                          up->stats.put_requests == 0 ? std::string("the server has it already, nothing uploaded")
                                                      : fmt::format("uploaded {} bytes", up->stats.bytes_sent));
      spec->file_archives.push_back(up->archive);
    }
    if (!spec->files.empty()) {
      spec->files.clear();
      body["spec_yaml"] = api::JobSpecToYaml(*spec);
    }
    if (!spec->weights_signer.empty()) {
      // The key file is relative to the spec file; the server gets the key itself.
      std::filesystem::path key(spec->weights_signer);
      if (key.is_relative()) key = file.parent_path() / key;
      absl::StatusOr<std::string> pem = ReadFileBounded(key.string(), api::kMaxSignerPemBytes, "weights_signer key");
      if (!pem.ok()) Fail(cmd, fmt::format("weights_signer: {}", pem.status().message()), kExitUsage);
      spec->weights_signer.clear();
      spec->weights_signer_pem = *std::move(pem);
      body["spec_yaml"] = api::JobSpecToYaml(*spec);
    }
    if (!o->tenant.empty()) body["tenant"] = o->tenant;
    if (!spec->model.empty()) {
      std::filesystem::path model(spec->model);
      if (model.is_relative()) model = file.parent_path() / model;
      const std::string text = ReadFileOrFail(cmd, model, fmt::format("model '{}': config", spec->model));
      json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!config.is_object()) {
        Fail(cmd,
             fmt::format("model '{}': {} is not a JSON object (a Hugging Face config.json)", spec->model,
                         model.string()),
             kExitUsage);
      }
      body["model_config"] = std::move(config);
    }
    json job = OrFail(cmd, client->Post("/v1/jobs", body));
    if (o->dry_run) return PrintQuote(job, o->flags.json);
    const std::string id = Text(job.value("id", json()));
    if (o->flags.json && !o->follow) {
      PrintJson(job);
      return;
    }
    std::ostream& status_out = o->flags.json ? std::cerr : std::cout;
    status_out << fmt::format("submitted {} ({}): {}\n", id, Text(job.value("name", json())),
                              Text(job.value("state", json())));
    if (job["plan"].is_object()) {
      const json& plan = job["plan"];
      status_out << fmt::format("plan: {}\n", Text(plan.value("best", json())));
      const json alts = plan.value("alternatives", json::array());
      if (alts.size() > 1) status_out << fmt::format("  ({} alternatives the scheduler may use)\n", alts.size());
    }
    status_out << std::flush;
    if (!o->follow) return;
    json final_job;
    const int code = Follow(cmd, o->flags, id, status_out, o->flags.json ? std::cerr : std::cout, &final_job);
    if (o->flags.json) PrintJson(final_job);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

void RegisterJobs(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string state, tenant;
    int limit = 100;
    bool oldest = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("jobs", "List jobs, newest first");
  sub->add_option("--state", o->state, "PENDING | SCHEDULED | RUNNING | SUCCEEDED | FAILED | CANCELLED");
  sub->add_option("--tenant", o->tenant, "Only this tenant's jobs");
  sub->add_flag("--oldest", o->oldest, "Oldest first");
  sub->add_option("--limit", o->limit, "At most this many jobs (pages through the server's list)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "jobs";
    auto client = Connect(cmd, o->flags);
    json jobs = json::array();
    std::string after;
    bool more = false;  // the server has jobs past the last one shown
    while (static_cast<int>(jobs.size()) < o->limit) {
      std::string path =
          fmt::format("/v1/jobs?limit={}&order={}", std::min(1000, o->limit - static_cast<int>(jobs.size())),
                      o->oldest ? "oldest" : "newest");
      if (!o->state.empty()) path += "&state=" + UrlEncode(o->state);
      if (!o->tenant.empty()) path += "&tenant=" + UrlEncode(o->tenant);
      if (!after.empty()) path += "&after=" + UrlEncode(after);
      json page = OrFail(cmd, client->Get(path));
      for (json& j : page["jobs"]) jobs.push_back(std::move(j));
      more = page["next_after"].is_string();
      if (!more) break;
      after = page["next_after"].get<std::string>();
    }
    if (o->flags.json) {
      PrintJson({{"jobs", jobs}, {"next_after", more ? json(after) : json()}});
      return;
    }
    if (jobs.empty()) {
      std::cout << "No jobs.\n";
      return;
    }
    const TimePoint now = RealClock().Now();
    TextTable table({"ID", "NAME", "TENANT", "STATE", "PRIORITY", "CREATED", "PLACEMENT", "REASON"});
    table.AlignRight(4);
    for (const json& j : jobs) {
      std::string reason = j.value("pending_reason", j.value("reason", std::string()));
      if (reason.size() > 60) reason = reason.substr(0, 57) + "...";
      const std::string tenant = j.value("tenant", std::string());
      table.AddRow({Text(j["id"]), Text(j["name"]), tenant.empty() ? "-" : tenant, Text(j["state"]),
                    Text(j["priority"]), Ago(j.value("created_at", std::string()), now),
                    PlacementShort(j["allocation"]), reason});
    }
    std::cout << table.Render();
    if (more) {
      std::cout << fmt::format("(more jobs {} {}: gpugeek jobs --limit {}{})\n", o->oldest ? "after" : "before", after,
                               o->limit * 2, o->oldest ? " --oldest" : "");
    }
  });
}

void RegisterJob(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string id;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("job", "Show one job: state, reason, plan, placement and its events");
  sub->add_option("id", o->id, "Job id")->required();
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "job";
    auto client = Connect(cmd, o->flags);
    json job = OrFail(cmd, client->Get("/v1/jobs/" + UrlEncode(o->id)));
    json events = OrFail(cmd, client->Get("/v1/events?limit=1000&job=" + UrlEncode(o->id)))["events"];
    if (o->flags.json) {
      job["events"] = events;
      PrintJson(job);
      return;
    }
    const TimePoint now = RealClock().Now();
    const auto when = [&](const std::string& key) {
      const std::string t = job.value(key, std::string());
      return fmt::format("{} ({})", LocalTime(t), Ago(t, now));
    };
    const std::string tenant = job.value("tenant", std::string());
    std::cout << fmt::format("Job {} ({})\n", Text(job["id"]), Text(job["name"]));
    std::cout << fmt::format("  state:     {}\n", Text(job["state"]));
    std::cout << fmt::format("  reason:    {}\n", Text(job["reason"]));
    if (job.contains("pending_reason")) std::cout << fmt::format("  pending:   {}\n", Text(job["pending_reason"]));
    std::cout << fmt::format("  tenant:    {}\n", tenant.empty() ? "-" : tenant);
    std::cout << fmt::format("  priority:  {}\n", Text(job["priority"]));
    std::cout << fmt::format("  exit code: {}\n", Text(job["exit_code"]));
    std::cout << fmt::format("  restarts:  {}    epoch: {}\n", Text(job["restarts"]), Text(job["epoch"]));
    if (job.contains("retries") && job["retries"].is_object() && !job["retries"].empty()) {
      std::string used;
      for (const auto& [cause, n] : job["retries"].items())
        used += fmt::format("{}{} {}", used.empty() ? "" : ", ", cause, Text(n));
      std::cout << fmt::format("  retries:   {}\n", used);
    }
    // What the job resumes from, and how old that is: what a move now would lose (docs/checkpointing.md).
    if (job["checkpoint"].is_object()) {
      const std::string at = job["checkpoint"].value("reported_at", std::string());
      const std::string region = job["checkpoint"].value("region", std::string());
      std::cout << fmt::format("  checkpoint: step {}, complete {} ({}){}; a restart resumes there\n",
                               Text(job["checkpoint"]["step"]), LocalTime(at), Ago(at, now),
                               region.empty() ? "" : ", in " + region);
    } else {
      std::cout << "  checkpoint: none reported (a restart starts over)\n";
    }
    // Metered per second (controlplane/usage.h): GPU time and what it cost, and the spot saving.
    if (const json& usage = job["usage"]; usage.is_object() && !usage.value("lines", json::array()).empty()) {
      std::cout << fmt::format("  usage:     {:.3f} GPU-hours, cost {} (on-demand {}; saved {})\n",
                               usage.value("gpu_hours", 0.0), FormatMoney(usage.value("cost_micros", int64_t{0})),
                               FormatMoney(usage.value("on_demand_micros", int64_t{0})),
                               FormatMoney(usage.value("saving_micros", int64_t{0})));
    }
    std::cout << fmt::format("  created:   {}\n", when("created_at"));
    std::cout << fmt::format("  updated:   {}\n", when("updated_at"));
    if (job["plan"].is_object()) {
      const json& plan = job["plan"];
      std::cout << fmt::format("\nPlan: {}\n", Text(plan.value("best", json())));
      TextTable alts({"GPU MODEL", "GPUS", "PER NODE", "TP", "PP", "DP", "MEMORY/GPU", "EST TIME"});
      for (size_t c = 1; c < 8; ++c) alts.AlignRight(c);
      for (const json& a : plan.value("alternatives", json::array())) {
        const double secs = a.value("est_seconds", 0.0);
        alts.AddRow({Text(a["gpu_model"]), Text(a["gpus"]), Text(a["gpus_per_node"]), Text(a["tp"]), Text(a["pp"]),
                     Text(a["dp"]), FormatBytes(a.value("memory_per_gpu_bytes", uint64_t{0})),
                     secs > 0 ? HumanSeconds(secs) : "-"});
      }
      std::cout << alts.Render();
    }
    if (job["allocation"].is_object()) {
      std::cout << "\nPlacement:\n";
      for (const std::string& line : Placement(job["allocation"])) std::cout << "  " << line << "\n";
      const json& a = job["allocation"];
      if (a.value("members", json::array()).size() > 1) {
        std::cout << fmt::format("  master: {}:{}\n", Text(a["master_addr"]), Text(a["master_port"]));
      }
    }
    if (const json& usage = job["usage"]; usage.is_object() && !usage.value("lines", json::array()).empty()) {
      std::cout << "\nUsage:\n";
      TextTable lines({"CAPACITY", "GPU MODEL", "GPU-HOURS", "COST", "ON-DEMAND", "SAVED"});
      for (size_t c = 2; c < 6; ++c) lines.AlignRight(c);
      for (const json& l : usage["lines"]) {
        const int64_t cost = l.value("cost_micros", int64_t{0}), od = l.value("on_demand_micros", int64_t{0});
        lines.AddRow({Text(l["capacity_type"]), Text(l["gpu_model"]), fmt::format("{:.3f}", l.value("gpu_hours", 0.0)),
                      FormatMoney(cost), FormatMoney(od), FormatMoney(od - cost)});
      }
      std::cout << lines.Render();
    }
    std::cout << "\nEvents:\n";
    TextTable table({"SEQ", "TIME", "FROM", "TO", "REASON"});
    table.AlignRight(0);
    for (const json& e : events) {
      table.AddRow({Text(e["seq"]), LocalTime(e.value("time", std::string())), Text(e["from"]), Text(e["to"]),
                    Text(e["reason"])});
    }
    std::cout << table.Render();
  });
}

void RegisterLogs(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string id;
    bool follow = false;
    std::string rank = "0";
    int64_t epoch = -1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "logs",
      "Print a job's output (stdout and stderr of its gang members), byte for byte. Each placement of a member "
      "(epoch) is shown in order, preceded by '== attempt K (epoch E) ==' when there is more than one. Exit code: "
      "the job's once it ended (SUCCEEDED 0, FAILED its exit code or 1, CANCELLED 130 like a shell after Ctrl-C); "
      "0 for a job still running; 1 when the server refused or could not be reached");
  sub->add_option("id", o->id, "Job id")->required();
  sub->add_flag("-f,--follow", o->follow, "Keep printing new output until the job ends (then exit with its code)");
  sub->add_option("--rank", o->rank,
                  "Node rank in the gang (0..1023), or 'all': every rank, lines prefixed '[rank N] '")
      ->capture_default_str();
  sub->add_option("--epoch", o->epoch, "Only this placement of the job (see `gpugeek job ID`: epoch)")
      ->check(CLI::NonNegativeNumber);
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "logs";
    JobLogsOptions options{.job_id = o->id, .follow = o->follow};
    if (o->rank == "all") {
      options.rank.reset();
    } else {
      char* end = nullptr;
      const long rank = std::strtol(o->rank.c_str(), &end, 10);
      if (o->rank.empty() || *end != '\0' || rank < 0 || rank > 1023) {
        Fail(cmd, fmt::format("--rank: must be 0..1023 or 'all', got '{}'", o->rank), kExitUsage);
      }
      options.rank = static_cast<int>(rank);
    }
    if (o->epoch >= 0) options.epoch = o->epoch;
    auto client = Connect(cmd, o->flags);
    // --json (without -f) collects the output to print it as one document.
    const bool collect = o->flags.json && !o->follow;
    std::string text;
    absl::StatusOr<json> last = ReadJobLogs(*client, options, [&](std::string_view bytes) {
      if (collect) {
        text.append(bytes.data(), bytes.size());
        return;
      }
      std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      std::cout.flush();
    });
    if (!last.ok()) Fail(cmd, std::string(last.status().message()));
    const std::string state = last->value("state", std::string());
    const json exit_code = last->value("exit_code", json());
    if (collect) {
      json doc = {{"job", o->id},
                  {"state", state},
                  {"exit_code", exit_code},
                  {"log", text},
                  {"log_b64", absl::Base64Escape(text)}};
      if (options.rank) doc["rank"] = *options.rank;
      PrintJson(doc);  // "log" shows invalid UTF-8 as U+FFFD; "log_b64" holds the exact bytes
    }
    const int code = JobExitCode(state, exit_code);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

void RegisterCancel(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string id, reason;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("cancel", "Cancel a job (running members get SIGTERM, the grace, then SIGKILL)");
  sub->add_option("id", o->id, "Job id")->required();
  sub->add_option("--reason", o->reason, "Why (recorded in the job's events)");
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "cancel";
    auto client = Connect(cmd, o->flags);
    json body = json::object();
    if (!o->reason.empty()) body["reason"] = o->reason;
    json job = OrFail(cmd, client->Post("/v1/jobs/" + UrlEncode(o->id) + "/cancel", body));
    if (o->flags.json) {
      PrintJson(job);
      return;
    }
    std::cout << fmt::format("{} {}: {}\n", Text(job["id"]), Text(job["state"]), Text(job["reason"]));
  });
}

void RegisterEvents(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string job;
    int64_t after = 0;
    int limit = 100;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("events", "Job state transitions, oldest first, each with time and reason");
  sub->add_option("--job", o->job, "Only this job's events");
  sub->add_option("--after", o->after, "Only events after this sequence number")->check(CLI::NonNegativeNumber);
  sub->add_option("--limit", o->limit, "At most this many events")->capture_default_str()->check(CLI::Range(1, 1000));
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "events";
    auto client = Connect(cmd, o->flags);
    std::string path = fmt::format("/v1/events?after={}&limit={}", o->after, o->limit);
    if (!o->job.empty()) path += "&job=" + UrlEncode(o->job);
    json events = OrFail(cmd, client->Get(path));
    if (o->flags.json) {
      PrintJson(events);
      return;
    }
    if (events["events"].empty()) {
      std::cout << "No events.\n";
      return;
    }
    TextTable table({"SEQ", "TIME", "JOB", "FROM", "TO", "REASON"});
    table.AlignRight(0);
    for (const json& e : events["events"]) {
      table.AddRow({Text(e["seq"]), LocalTime(e.value("time", std::string())), Text(e["job_id"]), Text(e["from"]),
                    Text(e["to"]), Text(e["reason"])});
    }
    std::cout << table.Render();
  });
}

}  // namespace

void RegisterJobCommands(CLI::App& app) {
  RegisterSubmit(app);
  RegisterJobs(app);
  RegisterJob(app);
  RegisterLogs(app);
  RegisterCancel(app);
  RegisterEvents(app);
}

}  // namespace gpugeek::cli
