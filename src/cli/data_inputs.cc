#include "cli/data_inputs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/units.h"

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
