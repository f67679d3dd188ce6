#pragma once
// What the `gpugeek data` commands share: the input files named on the command line, and a progress bar.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/near_duplicates.h"
#include "data/version_store.h"

namespace CLI {
class App;
}

namespace gpugeek::cli {

// `gpugeek data clean` (data_clean_command.cc); registered on the `data` subcommand by
// RegisterDataVersionCommands.
void RegisterDataCleanCommand(CLI::App* data_cmd);

// The version store's folder: $GPUGEEK_DATA_STORE, else $XDG_DATA_HOME/gpugeek/datasets, else
// ~/.local/share/gpugeek/datasets.
std::string DefaultDataStore();

// The version store at `store` (DefaultDataStore() when empty). Only `push` creates one (create=true);
// for every other command a folder that is not a store is NotFound naming it, so a mistyped --store is
// not taken for an empty store.
absl::StatusOr<std::unique_ptr<data::VersionStore>> OpenDataStore(const std::string& store, bool create);

// The regular files under `paths` (a file itself, or every file below a folder, recursively), sorted by
// path, each once: the order in which `data dedup` numbers documents and `data shard` records.
// InvalidArgument naming a path that is neither a file nor a folder, or a folder that cannot be listed.
absl::StatusOr<std::vector<std::string>> ListInputFiles(const std::vector<std::string>& paths);

// The near-duplicate flags `data dedup` and `data clean` share: --threshold, --ngram, --unit, --bands,
// --rows, --seed, --threads, written into `options` and `unit` ("word" or "char"). Bands and rows are 0
// until FinishDedupOptions.
void AddDedupOptions(CLI::App* cmd, data::NearDuplicateOptions& options, std::string& unit);
// Applies --unit, and chooses bands and rows for the threshold (data::ChooseLsh) when neither was given.
// InvalidArgument when only one of --bands and --rows was given.
absl::Status FinishDedupOptions(data::NearDuplicateOptions& options, const std::string& unit);

// A one-line bar on stderr while it is a terminal (nothing otherwise):
//   "hashing [#########                     ] 120 MiB / 400 MiB"   (kBytes)
//   "sketching [####                        ] 12/1030 documents"  (kCount, noun "documents")
// redrawn at most every 100 ms and once at the end (done == total), which ends the line. Copyable; call
// from one thread at a time.
class ProgressBar {
 public:
  enum class Unit { kCount, kBytes };
  ProgressBar(std::string label, Unit unit, std::string noun = "");
  void operator()(uint64_t done, uint64_t total) const;

 private:
  std::string label_;
  Unit unit_;
  std::string noun_;
  bool on_;
  mutable std::chrono::steady_clock::time_point last_{};
};

}  // namespace gpugeek::cli
