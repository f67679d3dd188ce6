#include "cli/data_inputs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/clock.h"
#include "common/units.h"
#include "data/minhash.h"

namespace gpugeek::cli {

absl::StatusOr<std::vector<std::string>> ListInputFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec);
      if (ec) return absl::InvalidArgumentError(fmt::format("{}: {}", p, ec.message()));
      for (const auto& entry : it) {
        if (entry.is_regular_file(ec)) files.push_back(entry.path().string());
      }
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      return absl::InvalidArgumentError(fmt::format("{}: not a file or folder", p));
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

std::string DefaultDataStore() {
  if (const char* s = std::getenv("GPUGEEK_DATA_STORE"); s != nullptr && *s != '\0') return s;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/gpugeek/datasets";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.local/share/gpugeek/datasets";
}

absl::StatusOr<std::unique_ptr<data::VersionStore>> OpenDataStore(const std::string& store, bool create) {
  const std::string root = store.empty() ? DefaultDataStore() : store;
  std::error_code ec;
  if (!create && !std::filesystem::is_directory(std::filesystem::path(root) / "refs", ec)) {
    return absl::NotFoundError(
        fmt::format("no dataset store at {}: push a folder first (gpugeek data push), or give --store", root));
  }
  return data::VersionStore::Open(root, RealClock());
}

void AddDedupOptions(CLI::App* cmd, data::NearDuplicateOptions& o, std::string& unit) {
  cmd->add_option("--threshold", o.threshold, "Exact Jaccard index that makes a near duplicate, (0, 1]")
      ->capture_default_str();
  cmd->add_option("--ngram", o.shingles.n, "Words (or bytes, with --unit char) per shingle")->capture_default_str();
  cmd->add_option("--unit", unit, "What a shingle is made of: word or char")
      ->check(CLI::IsMember({"word", "char"}))
      ->capture_default_str();
  o.lsh.bands = o.lsh.rows = 0;  // chosen for the threshold unless given
  cmd->add_option("--bands", o.lsh.bands,
                  "LSH bands (with --rows; default: chosen for the threshold, e.g. 16 x 6 at 0.8)");
  cmd->add_option("--rows", o.lsh.rows, "MinHash values per band (with --bands)");
  cmd->add_option("--seed", o.lsh.seed, "Seed of the MinHash functions")->capture_default_str();
  cmd->add_option("--threads", o.threads, "Worker threads (0: one per core)")->capture_default_str();
}

absl::Status FinishDedupOptions(data::NearDuplicateOptions& o, const std::string& unit) {
  o.shingles.unit = unit == "char" ? data::ShingleUnit::kChar : data::ShingleUnit::kWord;
  if ((o.lsh.bands == 0) != (o.lsh.rows == 0)) {
    return absl::InvalidArgumentError(
        "--bands and --rows go together; give both, or neither to have them chosen for the threshold");
  }
  if (o.lsh.bands == 0 && o.threshold > 0 && o.threshold <= 1) {
    const data::LshOptions chosen = data::ChooseLsh(o.threshold);
    o.lsh.bands = chosen.bands;
    o.lsh.rows = chosen.rows;
  }
  return absl::OkStatus();
}

ProgressBar::ProgressBar(std::string label, Unit unit, std::string noun)
    : label_(std::move(label)), unit_(unit), noun_(std::move(noun)), on_(::isatty(STDERR_FILENO) == 1) {}

void ProgressBar::operator()(uint64_t done, uint64_t total) const {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr uint64_t kWidth = 30;
  const uint64_t filled = total ? kWidth * std::min(done, total) / total : kWidth;
  const std::string amount = unit_ == Unit::kBytes ? fmt::format("{} / {}", FormatBytes(done), FormatBytes(total))
                                                   : fmt::format("{}/{} {}", done, total, noun_);
  std::fprintf(stderr, "\r%s [%s%s] %s", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), amount.c_str());
  if (done >= total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace gpugeek::cli
