// Dataset versions from the command line (data/version_store.h): `gpugeek data push DIR --dataset NAME`,
// `data log`, `data diff`, `data checkout`, `data branch`, `data tag`, `data gc`, `data fsck`. The store
// is a folder: --store, else $GPUGEEK_DATA_STORE, else $XDG_DATA_HOME/gpugeek/datasets, else
// ~/.local/share/gpugeek/datasets. With --remote, push, log, diff, checkout, branch and tag work on the
// server's datasets of the caller's tenant (data_remote.h), the local store caching objects. Every command prints a
// table, or JSON with --json; errors go to stderr with exit status 2 (1 when fsck finds damage).

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/data_inputs.h"
#include "cli/data_remote.h"
#include "common/table.h"
#include "common/units.h"
#include "data/version_gc.h"
#include "data/version_store.h"

namespace gpugeek::cli {
namespace {

struct Common {
  std::string store;
  std::string dataset;
  bool json = false;
  // --remote: the server's datasets (the store is then the local cache of objects).
  bool remote = false;
  ClientFlags server;
};

[[noreturn]] void DataFail(const std::string& command, const std::string& message) {
  std::cerr << "gpugeek data " << command << ": " << message << "\n";
  throw CLI::RuntimeError(2);
}

std::unique_ptr<data::VersionStore> OpenStore(const std::string& command, const Common& c, bool create = false) {
  absl::StatusOr<std::unique_ptr<data::VersionStore>> store = OpenDataStore(c.store, create);
  if (!store.ok()) DataFail(command, std::string(store.status().message()));
  return *std::move(store);
}

template <typename T>
T OrFail(const std::string& command, absl::StatusOr<T> v) {
  if (!v.ok()) DataFail(command, std::string(v.status().message()));
  return *std::move(v);
}

void OrFail(const std::string& command, const absl::Status& s) {
  if (!s.ok()) DataFail(command, std::string(s.message()));
}

void AddCommon(CLI::App* cmd, Common& c, bool dataset, bool remote = true) {
  cmd->add_option("--store", c.store,
                  "Store folder (default $GPUGEEK_DATA_STORE or ~/.local/share/gpugeek/datasets); with --remote, "
                  "the local cache of objects");
  if (dataset) cmd->add_option("--dataset,-d", c.dataset, "Dataset name")->required();
  cmd->add_flag("--json", c.json, "Print JSON");
  if (!remote) return;
  cmd->add_flag("--remote", c.remote,
                "The server's datasets of your tenant (--server / $GPUGEEK_SERVER, token as for every client "
                "command) instead of the local store");
  cmd->add_option("--server", c.server.server, "Server URL for --remote (default: $GPUGEEK_SERVER or the profile's)");
  cmd->add_option("--token", c.server.token, "API token for --remote (default: $GPUGEEK_TOKEN or the profile's)");
  cmd->add_option("--ca-file", c.server.ca_file, "CA certificate for an https server (default: $GPUGEEK_CA_FILE)");
  cmd->add_option("--profile", c.server.profile, "Config profile for --remote");
}

// Connections to the server of --remote; the command fails on a bad endpoint.
ClientFactory Remote(const std::string& command, const Common& c) {
  absl::StatusOr<Endpoint> e = ResolveEndpoint(c.server);
  if (!e.ok()) DataFail(command, std::string(e.status().message()));
  return [e = *e]() {
    return http::Client::Create(
        {.base_url = e.server, .read_timeout = std::chrono::minutes(5), .ca_file = e.ca_file, .bearer_token = e.token});
  };
}

std::unique_ptr<http::Client> Connected(const std::string& command, const ClientFactory& connect) {
  return OrFail(command, connect());
}

std::string ShortDigest(const std::string& d) { return d.substr(0, 12); }

// `text` safe to print on a terminal line: control bytes (a newline, ESC of a colour or cursor sequence,
// a tab that would break a table) shown as \xNN, so a file name or commit message cannot forge output.
std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

struct PushFlags : Common {
  std::string dir, branch = "main", message, author;
  int threads = 0;
  bool follow_links = false;
};

// `data push --remote`: snapshot into the local cache, upload what the server lacks, move its branch.
void PushToServer(const PushFlags& o, data::VersionStore& cache, const data::PushOptions& p) {
  const ClientFactory connect = Remote("push", o);
  const auto start = std::chrono::steady_clock::now();
  const RemotePushResult r = OrFail("push", PushRemote(connect, cache, o.dir, p));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.json) {
    std::cout << nlohmann::json{{"commit", r.snapshot.commit},
                                {"parent", r.parent},
                                {"unchanged", r.snapshot.unchanged},
                                {"files", r.snapshot.files},
                                {"bytes", r.snapshot.bytes},
                                {"chunks", r.snapshot.chunks},
                                {"objects", r.objects},
                                {"uploaded_objects", r.uploaded_objects},
                                {"uploaded_bytes", r.uploaded_bytes},
                                {"seconds", seconds}}
                     .dump(2)
              << "\n";
    return;
  }
  if (r.snapshot.unchanged) {
    std::cout << fmt::format("{}@{} on the server is already {}: nothing changed, nothing sent\n", o.dataset, o.branch,
                             ShortDigest(r.snapshot.commit));
    return;
  }
  std::cout << fmt::format("{}@{} -> {} on the server\n", o.dataset, o.branch, ShortDigest(r.snapshot.commit));
  std::cout << fmt::format("{} files, {}; sent {} of {} objects ({}) in {:.1f} s\n", r.snapshot.files,
                           FormatBytes(r.snapshot.bytes), r.uploaded_objects, r.objects, FormatBytes(r.uploaded_bytes),
                           seconds);
}

void RegisterPush(CLI::App* data_cmd) {
  using Options = PushFlags;
  auto o = std::make_shared<Options>();
  CLI::App* cmd = data_cmd->add_subcommand(
      "push", "Snapshot a folder as a new version (commit) of a dataset; only changed chunks are stored");
  cmd->add_option("dir", o->dir, "Folder to snapshot")->required();
  AddCommon(cmd, *o, true);
  cmd->add_option("--branch,-b", o->branch, "Branch to commit on (created when missing)")->capture_default_str();
  cmd->add_option("--message,-m", o->message, "Commit message");
  cmd->add_option("--author", o->author, "Author (default $USER)");
  cmd->add_option("--threads", o->threads, "Hashing threads (0: one per core)")->capture_default_str();
  cmd->add_flag("--follow-links,-L", o->follow_links, "Store the file a symbolic link leads to (else refused)");
  cmd->callback([o] {
    auto store = OpenStore("push", *o, /*create=*/true);
    data::PushOptions p{.dataset = o->dataset, .branch = o->branch, .message = o->message, .author = o->author};
    if (p.author.empty()) {
      const char* user = std::getenv("USER");
      p.author = user != nullptr ? user : "";
    }
    p.threads = o->threads;
    p.follow_links = o->follow_links;
    p.progress = ProgressBar("hashing", ProgressBar::Unit::kBytes);
    if (o->remote) return PushToServer(*o, *store, p);
    const auto start = std::chrono::steady_clock::now();
    const data::PushResult r = OrFail("push", store->Push(o->dir, p));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mb_per_s = seconds > 0 ? static_cast<double>(r.bytes) / 1e6 / seconds : 0;
    if (o->json) {
      std::cout << nlohmann::json{{"commit", r.commit},       {"unchanged", r.unchanged},
                                  {"files", r.files},         {"bytes", r.bytes},
                                  {"chunks", r.chunks},       {"new_objects", r.new_objects},
                                  {"new_bytes", r.new_bytes}, {"seconds", seconds},
                                  {"mb_per_s", mb_per_s}}
                       .dump(2)
                << "\n";
      return;
    }
    if (r.unchanged) {
      std::cout << fmt::format("{}@{} is already {}: nothing changed, no commit made\n", o->dataset, o->branch,
                               ShortDigest(r.commit));
    } else {
      std::cout << fmt::format("{}@{} -> {}\n", o->dataset, o->branch, ShortDigest(r.commit));
    }
    std::cout << fmt::format("{} files, {} in {} chunks; {} new ({} objects); {:.1f} MB/s\n", r.files,
                             FormatBytes(r.bytes), r.chunks, FormatBytes(r.new_bytes), r.new_objects, mb_per_s);
  });
}

void RegisterLog(CLI::App* data_cmd) {
  struct Options : Common {
    std::string rev = "main";
    size_t limit = 20;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = data_cmd->add_subcommand("log", "A dataset's versions, newest first, along first parents");
  cmd->add_option("rev", o->rev, "Branch, tag or commit to start from")->capture_default_str();
  AddCommon(cmd, *o, true);
  cmd->add_option("--limit,-n", o->limit, "Most versions to show (1..10000)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->callback([o] {
    const std::vector<data::LogEntry> log =
        o->remote ? OrFail("log", LogRemote(*Connected("log", Remote("log", *o)), o->dataset, o->rev, o->limit))
                  : OrFail("log", OpenStore("log", *o)->Log(o->dataset, o->rev, o->limit));
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const data::LogEntry& e : log) {
        j.push_back({{"commit", e.digest},
                     {"parents", e.commit.parents},
                     {"tree", e.commit.tree},
                     {"time", e.commit.time_unix_s},
                     {"author", e.commit.author},
                     {"message", e.commit.message},
                     {"files", e.commit.files},
                     {"bytes", e.commit.bytes}});
      }
      std::cout << j.dump(2) << "\n";
      return;
    }
    TextTable table({"COMMIT", "TIME", "AUTHOR", "FILES", "SIZE", "MESSAGE"});
    for (const data::LogEntry& e : log) {
      table.AddRow({ShortDigest(e.digest), UtcTime(e.commit.time_unix_s), Printable(e.commit.author),
                    std::to_string(e.commit.files), FormatBytes(e.commit.bytes),
                    Printable(e.commit.message.substr(0, e.commit.message.find('\n')))});
    }
    table.AlignRight(3);
    table.AlignRight(4);
    std::cout << table.Render();
  });
}

void RegisterDiff(CLI::App* data_cmd) {
  struct Options : Common {
    std::string from, to = "main";
    size_t limit = 1000;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = data_cmd->add_subcommand("diff", "Files added, removed and modified between two versions");
  cmd->add_option("from", o->from, "Older version (branch, tag, commit, main~1, ...)")->required();
  cmd->add_option("to", o->to, "Newer version")->capture_default_str();
  AddCommon(cmd, *o, true);
  cmd->add_option("--limit", o->limit, "Most files to list; the totals count all")->capture_default_str();
  cmd->callback([o] {
    const std::vector<data::DiffEntry> diff =
        o->remote ? OrFail("diff", DiffRemote(*Connected("diff", Remote("diff", *o)), o->dataset, o->from, o->to))
                  : OrFail("diff", OpenStore("diff", *o)->Diff(o->dataset, o->from, o->to));
    uint64_t added = 0, removed = 0, modified = 0;
    for (const data::DiffEntry& d : diff) {
      (d.change == data::DiffEntry::Change::kAdded     ? added
       : d.change == data::DiffEntry::Change::kRemoved ? removed
                                                       : modified) += 1;
    }
    auto change = [](data::DiffEntry::Change c) {
      return c == data::DiffEntry::Change::kAdded     ? "added"
             : c == data::DiffEntry::Change::kRemoved ? "removed"
                                                      : "modified";
    };
    if (o->json) {
      nlohmann::json files = nlohmann::json::array();
      for (size_t i = 0; i < diff.size() && i < o->limit; ++i) {
        files.push_back({{"path", diff[i].path},
                         {"change", change(diff[i].change)},
                         {"bytes_before", diff[i].bytes_before},
                         {"bytes_after", diff[i].bytes_after}});
      }
      std::cout << nlohmann::json{{"added", added},
                                  {"removed", removed},
                                  {"modified", modified},
                                  {"files", files},
                                  {"truncated", diff.size() > o->limit}}
                       .dump(2)
                << "\n";
      return;
    }
    for (size_t i = 0; i < diff.size() && i < o->limit; ++i) {
      const data::DiffEntry& d = diff[i];
      const char mark = d.change == data::DiffEntry::Change::kAdded     ? 'A'
                        : d.change == data::DiffEntry::Change::kRemoved ? 'D'
                                                                        : 'M';
      std::cout << fmt::format("{} {}  ({} -> {})\n", mark, Printable(d.path), FormatBytes(d.bytes_before),
                               FormatBytes(d.bytes_after));
    }
    if (diff.size() > o->limit) std::cout << fmt::format("... and {} more (--limit)\n", diff.size() - o->limit);
    std::cout << fmt::format("{} added, {} removed, {} modified\n", added, removed, modified);
  });
}

void RegisterCheckout(CLI::App* data_cmd) {
  struct Options : Common {
    std::string rev, dir;
    int threads = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd =
      data_cmd->add_subcommand("checkout", "Write a version into a new folder, every byte checked against its digest");
  cmd->add_option("rev", o->rev, "Branch, tag or commit")->required();
  cmd->add_option("dir", o->dir, "Folder to create (absent or empty)")->required();
  AddCommon(cmd, *o, true);
  cmd->add_option("--threads", o->threads, "Writer threads (0: one per core)")->capture_default_str();
  cmd->callback([o] {
    auto store = OpenStore("checkout", *o, /*create=*/o->remote);
    std::string rev = o->rev;
    if (o->remote) {
      // The version's objects into the local cache (only those it lacks), then a checkout from it.
      const ClientFactory connect = Remote("checkout", *o);
      rev = OrFail("checkout", ResolveRemote(*Connected("checkout", connect), o->dataset, o->rev));
      const FetchResult f = OrFail("checkout", FetchRemote(connect, *store, rev));
      if (!o->json) {
        std::cout << fmt::format("fetched {} of {} objects ({}) from the server\n", f.downloaded_objects, f.objects,
                                 FormatBytes(f.downloaded_bytes));
      }
    }
    const data::CheckoutResult r = OrFail("checkout", store->Checkout(o->dataset, rev, o->dir, o->threads));
    if (o->json) {
      std::cout << nlohmann::json{{"commit", r.commit}, {"files", r.files}, {"bytes", r.bytes}}.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{}@{} ({}) -> {}: {} files, {}\n", o->dataset, o->rev, ShortDigest(r.commit), o->dir,
                             r.files, FormatBytes(r.bytes));
  });
}

void RegisterRefCommand(CLI::App* data_cmd, data::Ref::Kind kind) {
  struct Options : Common {
    std::string name, from = "main", remove;
  };
  const bool branch = kind == data::Ref::Kind::kBranch;
  const std::string command = branch ? "branch" : "tag";
  auto o = std::make_shared<Options>();
  CLI::App* cmd = data_cmd->add_subcommand(
      command, branch ? "List a dataset's branches and tags, or create a branch (NAME [FROM])"
                      : "List a dataset's branches and tags, or tag a version (NAME [REV]); tags never move");
  cmd->add_option("name", o->name, branch ? "New branch" : "New tag");
  cmd->add_option("from", o->from, branch ? "Version it starts at" : "Version it names")->capture_default_str();
  cmd->add_option("--delete", o->remove, branch ? "Delete this branch" : "Delete this tag");
  AddCommon(cmd, *o, true);
  cmd->callback([o, kind, command] {
    std::vector<data::Ref> refs;
    if (o->remote) {
      auto client = Connected(command, Remote(command, *o));
      const std::string path = fmt::format("/v1/datasets/{}/{}/", http::UrlEncode(o->dataset),
                                           kind == data::Ref::Kind::kBranch ? "branches" : "tags");
      if (!o->remove.empty()) {
        OrFail(command, client->Delete(path + http::UrlEncode(o->remove)).status());
        if (!o->json) std::cout << fmt::format("deleted {} {} on the server\n", command, o->remove);
        return;
      }
      if (!o->name.empty()) {
        const std::string commit = OrFail(command, ResolveRemote(*client, o->dataset, o->from));
        nlohmann::json body = {{"commit", commit}};
        if (kind == data::Ref::Kind::kBranch) body["expected"] = "";  // a new branch: it must not exist
        OrFail(command, client->Put(path + http::UrlEncode(o->name), body).status());
      }
      refs = OrFail(command, RefsRemote(*client, o->dataset));
    } else {
      auto store = OpenStore(command, *o);
      if (!o->remove.empty()) {
        OrFail(command, store->DeleteRef(o->dataset, kind, o->remove));
        if (!o->json) std::cout << fmt::format("deleted {} {}\n", command, o->remove);
        return;
      }
      if (!o->name.empty()) {
        OrFail(command, kind == data::Ref::Kind::kBranch ? store->CreateBranch(o->dataset, o->name, o->from)
                                                         : store->CreateTag(o->dataset, o->name, o->from));
      }
      refs = OrFail(command, store->ListRefs(o->dataset));
    }
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const data::Ref& r : refs) {
        j.push_back(
            {{"kind", r.kind == data::Ref::Kind::kBranch ? "branch" : "tag"}, {"name", r.name}, {"commit", r.commit}});
      }
      std::cout << j.dump(2) << "\n";
      return;
    }
    TextTable table({"KIND", "NAME", "COMMIT"});
    for (const data::Ref& r : refs) {
      table.AddRow({r.kind == data::Ref::Kind::kBranch ? "branch" : "tag", r.name,
                    r.error.empty() ? ShortDigest(r.commit) : "DAMAGED: " + r.error});
    }
    std::cout << table.Render();
  });
}

void RegisterMaintenance(CLI::App* data_cmd) {
  auto gc = std::make_shared<Common>();
  CLI::App* gc_cmd = data_cmd->add_subcommand(
      "gc", "Delete objects no branch or tag reaches, and what killed pushes left (waits for running pushes)");
  AddCommon(gc_cmd, *gc, false, false);
  gc_cmd->callback([gc] {
    auto store = OpenStore("gc", *gc);
    const data::GcResult r = OrFail("gc", data::GarbageCollect(*store));
    if (gc->json) {
      std::cout << nlohmann::json{{"kept_objects", r.kept_objects},
                                  {"kept_bytes", r.kept_bytes},
                                  {"removed_objects", r.removed_objects},
                                  {"removed_bytes", r.removed_bytes},
                                  {"temp_files_removed", r.temp_files_removed}}
                       .dump(2)
                << "\n";
      return;
    }
    std::cout << fmt::format("removed {} objects ({}) and {} temporary files; kept {} objects ({})\n",
                             r.removed_objects, FormatBytes(r.removed_bytes), r.temp_files_removed, r.kept_objects,
                             FormatBytes(r.kept_bytes));
  });

  auto fsck = std::make_shared<Common>();
  CLI::App* fsck_cmd = data_cmd->add_subcommand(
      "fsck", "Check every object against its digest and every ref's history; exit 1 when damaged");
  AddCommon(fsck_cmd, *fsck, false, false);
  fsck_cmd->callback([fsck] {
    auto store = OpenStore("fsck", *fsck);
    const data::FsckReport r = OrFail("fsck", data::Fsck(*store));
    if (fsck->json) {
      std::cout << nlohmann::json{{"objects", r.objects},
                                  {"bytes", r.bytes},
                                  {"unreferenced_objects", r.unreferenced_objects},
                                  {"damaged", r.damaged},
                                  {"missing", r.missing},
                                  {"ok", r.ok()}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << fmt::format("{} objects ({}), {} unreferenced; {} damaged, {} missing\n", r.objects,
                               FormatBytes(r.bytes), r.unreferenced_objects, r.damaged.size(), r.missing.size());
      for (const std::string& d : r.damaged) std::cout << "damaged: " << d << "\n";
      for (const std::string& m : r.missing) std::cout << "missing: " << m << "\n";
    }
    if (!r.ok()) throw CLI::RuntimeError(1);
  });
}

}  // namespace

void RegisterDataVersionCommands(CLI::App* data_cmd) {
  RegisterPush(data_cmd);
  RegisterLog(data_cmd);
  RegisterDiff(data_cmd);
  RegisterCheckout(data_cmd);
  RegisterRefCommand(data_cmd, data::Ref::Kind::kBranch);
  RegisterRefCommand(data_cmd, data::Ref::Kind::kTag);
  RegisterMaintenance(data_cmd);
  RegisterDataCleanCommand(data_cmd);
}

}  // namespace gpugeek::cli
