#include "hpo/testing/lcbench.h"

#include <zlib.h>

#include <sstream>

#include "fmt/format.h"

namespace gpugeek::hpo::testing {
namespace {

constexpr int kEpochs = 52;

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) out.push_back(cell);
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, LearningCurves>> LoadLcBench(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(f);
  std::stringstream in(text);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = SplitCsv(line);
  size_t acc = 0, sec = 0;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "acc_1") acc = i;
    if (header[i] == "time_1") sec = i;
  }
  if (acc == 0 || sec == 0) return absl::InvalidArgumentError(fmt::format("{}: no acc_1 / time_1 columns", path));
  std::map<std::string, LearningCurves> out;
  for (int row = 2; std::getline(in, line); ++row) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = SplitCsv(line);
    if (cells.size() < sec + kEpochs || cells.size() < acc + kEpochs) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: {} cells", path, row, cells.size()));
    }
    LearningCurves& c = out[cells[0]];
    auto& a = c.accuracy.emplace_back();
    auto& s = c.seconds.emplace_back();
    for (int e = 0; e < kEpochs; ++e) {
      a.push_back(std::stod(cells[acc + e]));
      s.push_back(std::stod(cells[sec + e]));
    }
  }
  return out;
}

}  // namespace gpugeek::hpo::testing
