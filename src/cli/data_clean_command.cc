// `gpugeek data clean --dataset NAME [REV] [--to-branch cleaned] ...`: a cleaning run over a dataset
// version (data/cleaning.h) committed as a new version: the kept records as canonical JSON Lines and
// cleaning-report.json (what was removed and why, every anomaly and unparsable row). The branch is made
// at REV when it does not exist, so the cleaned commit's parent is the version it cleaned.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include "api/quantity.h"
#include "cli/data_inputs.h"
#include "common/clock.h"
#include "common/table.h"
#include "data/cleaning.h"
#include "data/version_store.h"

namespace gpugeek::cli {
namespace {

struct Options {
  std::string store, dataset, rev = "main", branch = "cleaned", format = "auto", field = "text", unit = "word";
  std::string max_bytes = "4Gi";
  std::vector<std::string> drop;
  data::NearDuplicateOptions dedup;
  bool json = false;
};

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "gpugeek data clean: " << message << "\n";
  throw CLI::RuntimeError(2);
}

template <typename T>
T OrFail(absl::StatusOr<T> v) {
  if (!v.ok()) Fail(std::string(v.status().message()));
  return *std::move(v);
}

void Run(Options o) {
  absl::StatusOr<uint64_t> max_bytes = api::ParseBytes(o.max_bytes);
  if (!max_bytes.ok()) Fail(fmt::format("--max-bytes: {}", std::string(max_bytes.status().message())));
  auto store = OrFail(OpenDataStore(o.store, /*create=*/false));
  const std::string source = OrFail(store->Resolve(o.dataset, o.rev));
  const auto files = OrFail(store->ListFiles(source));
  std::vector<data::CleanInput> inputs;
  uint64_t total = 0;
  const ProgressBar bar("reading", ProgressBar::Unit::kCount, "files");
  for (const auto& [path, entry] : files) {
    if (path == "cleaning-report.json") continue;  // the report of an earlier run is not data
    if (entry.bytes > *max_bytes - total) {
      Fail(fmt::format("the version holds more than --max-bytes {} ({} at {})", o.max_bytes, path, total));
    }
    total += entry.bytes;
    inputs.push_back({path, OrFail(store->ReadFile(entry, entry.bytes))});
    bar(inputs.size(), files.size());
  }
  data::CleanOptions c;
  c.format = o.format;
  c.records.text_field = o.field;
  c.dedup = o.dedup;
  if (absl::Status st = FinishDedupOptions(c.dedup, o.unit); !st.ok()) Fail(std::string(st.message()));
  c.drop.insert(o.drop.begin(), o.drop.end());
  const data::CleanResult result = OrFail(data::CleanRecords(inputs, c));
  const nlohmann::json report = data::CleaningReport(result, c, source);

  // The cleaned version: written to a scratch folder beside the store, pushed, removed (also on failure).
  namespace fs = std::filesystem;
  struct Scratch {
    fs::path path;
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } scratch{fs::path(store->root()) / fmt::format(".clean-{}", ::getpid())};
  auto write = [&](const fs::path& path, const std::string& bytes) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
    f.close();
    if (ec || !f) Fail(fmt::format("cannot write {}: {}", path.string(), ec ? ec.message() : "write failed"));
  };
  std::error_code ec;
  fs::remove_all(scratch.path, ec);
  fs::create_directories(scratch.path, ec);
  if (ec) Fail(fmt::format("cannot create {}: {}", scratch.path.string(), ec.message()));
  for (const auto& [path, lines] : result.files) write(scratch.path / path, lines);
  write(scratch.path / "cleaning-report.json", report.dump(2) + "\n");
  // The branch is made at the version cleaned (its parent) unless it exists; it is never that version's.
  const std::vector<data::Ref> refs = OrFail(store->ListRefs(o.dataset));
  bool exists = false;
  for (const data::Ref& r : refs) exists = exists || (r.kind == data::Ref::Kind::kBranch && r.name == o.branch);
  if (o.branch == o.rev)
    Fail(fmt::format("--to-branch {} is the version being cleaned; commit it on another branch", o.branch));
  if (!exists) {
    if (absl::Status s = store->CreateBranch(o.dataset, o.branch, source); !s.ok()) Fail(std::string(s.message()));
  }
  const size_t kept = report["kept"].get<size_t>();
  data::PushOptions push{.dataset = o.dataset,
                         .branch = o.branch,
                         .message = fmt::format("clean {}@{} ({}): kept {} of {} records", o.dataset, o.rev,
                                                source.substr(0, 12), kept, result.parsed.records.size())};
  if (const char* user = std::getenv("USER"); user != nullptr) push.author = user;
  const data::PushResult commit = OrFail(store->Push(scratch.path.string(), push));

  if (o.json) {
    nlohmann::json j = report;
    j.erase("removed");
    j.erase("anomalies");
    j.erase("errors");
    j["anomalies"] = result.anomalies.size();
    j["commit"] = commit.commit;
    j["branch"] = o.branch;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{}@{} -> {}@{} {}: kept {} of {} records\n", o.dataset, o.rev, o.dataset, o.branch,
                           commit.commit.substr(0, 12), kept, result.parsed.records.size());
  TextTable table({"REMOVED FOR", "RECORDS"});
  for (const auto& [reason, n] : report["removed_by_reason"].items()) table.AddRow({reason, n.dump()});
  table.AlignRight(1);
  std::cout << table.Render();
  std::cout << fmt::format("{} anomalies reported, {} rows could not be parsed; see cleaning-report.json in {}@{}\n",
                           result.anomalies.size(), result.parsed.errors.size(), o.dataset, o.branch);
}

}  // namespace

void RegisterDataCleanCommand(CLI::App* data_cmd) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = data_cmd->add_subcommand(
      "clean",
      "Clean a dataset version into a new one: records from JSON Lines / CSV / text, exact and near duplicates "
      "removed, anomalies reported (and removed with --drop), a report of what went and why");
  cmd->add_option("rev", o->rev, "Version to clean (branch, tag or commit)")->capture_default_str();
  cmd->add_option("--store", o->store, "Store folder (default $GPUGEEK_DATA_STORE or ~/.local/share/gpugeek/datasets)");
  cmd->add_option("--dataset,-d", o->dataset, "Dataset name")->required();
  cmd->add_option("--to-branch", o->branch, "Branch the cleaned version is committed on (made at REV if missing)")
      ->capture_default_str();
  cmd->add_option("--format", o->format, "Record format of every file: auto (by extension), text, jsonl, csv")
      ->capture_default_str();
  cmd->add_option("--field", o->field, "JSON field or CSV column holding the text")->capture_default_str();
  AddDedupOptions(cmd, o->dedup, o->unit);
  cmd->add_option("--drop", o->drop, "Anomaly kinds to remove: length, charset, repeated_lines, numeric:FIELD")
      ->delimiter(',');
  cmd->add_option("--max-bytes", o->max_bytes, "Most bytes of the version read in all")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { Run(*o); });
}

}  // namespace gpugeek::cli
