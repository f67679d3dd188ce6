#include "hpo/testing/lcbench.h"

#include <zlib.h>

#include <sstream>

#include "fmt/format.h"
#include "hpo/random_sampler.h"
#include "hpo/study.h"

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

LcBenchSearch RunLcBenchSearch(const LearningCurves& curves, const PrunerConfig& pruner, uint64_t seed,
                               int64_t budget_epochs, const std::vector<int64_t>& marks) {
  const auto n_cfg = static_cast<double>(curves.accuracy.size());
  auto space = SearchSpace::Create({{.name = "cfg", .kind = ParamKind::kInt, .low = 0, .high = n_cfg - 1}});
  Study study(*space, Direction::kMaximize, std::make_unique<RandomSampler>(), *MakePruner(pruner), seed);
  LcBenchSearch out;
  int64_t epochs = 0;
  while (epochs < budget_epochs) {
    const Trial& trial = study.Ask();
    const int64_t number = trial.number;
    const auto cfg = static_cast<size_t>(trial.params[0]);
    const std::vector<double>& acc = curves.accuracy[cfg];
    bool stopped = false;
    for (int e = 0; e < kEpochs; ++e) {
      ++epochs;
      for (size_t m = out.best_at.size(); m < marks.size() && epochs >= marks[m]; ++m) out.best_at.push_back(out.best);
      const bool prune = *study.Report(number, e + 1, acc[e]);
      if (e + 1 < kEpochs && (epochs >= budget_epochs || prune)) {
        out.gpu_seconds += curves.seconds[cfg][e];
        (void)study.Prune(number);
        stopped = true;
        break;
      }
    }
    if (!stopped) {
      out.gpu_seconds += curves.seconds[cfg].back();
      out.best = std::max(out.best, acc.back());
      (void)study.Tell(number, acc.back());
    }
  }
  while (out.best_at.size() < marks.size()) out.best_at.push_back(out.best);
  out.trials = study.trials();
  return out;
}

}  // namespace gpugeek::hpo::testing
