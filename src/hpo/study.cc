#include "hpo/study.h"

#include <cmath>

#include "fmt/format.h"

namespace gpugeek::hpo {

Study::Study(SearchSpace space, Direction direction, std::unique_ptr<Sampler> sampler, std::unique_ptr<Pruner> pruner,
             uint64_t seed)
    : space_(std::move(space)),
      direction_(direction),
      sampler_(std::move(sampler)),
      pruner_(pruner ? std::move(pruner) : std::make_unique<NopPruner>()),
      seed_(seed) {}

absl::Status Study::Restore(std::vector<Trial> trials) {
  for (size_t i = 0; i < trials.size(); ++i) {
    Trial& t = trials[i];
    if (t.number != static_cast<int64_t>(i)) {
      return absl::InvalidArgumentError(fmt::format("trial {}: numbers must run 0..n-1 in order", t.number));
    }
    if (t.params.size() != space_.size()) {
      return absl::InvalidArgumentError(
          fmt::format("trial {}: {} parameters, the space has {}", t.number, t.params.size(), space_.size()));
    }
    if (t.value) t.value = LossOf(*t.value);
    for (auto& [step, v] : t.intermediate) v = LossOf(v);
  }
  trials_ = std::move(trials);
  return absl::OkStatus();
}

const Trial& Study::Ask() {
  const auto number = static_cast<int64_t>(trials_.size());
  Point point = sampler_->Suggest(space_, trials_, seed_, number);
  trials_.push_back(Trial{.number = number, .state = TrialState::kRunning, .params = std::move(point)});
  return trials_.back();
}

absl::StatusOr<const Trial*> Study::Enqueue(Point point) {
  if (point.size() != space_.size()) return absl::InvalidArgumentError("point: wrong number of parameters");
  const nlohmann::json j = space_.PointToJson(point);
  auto checked = space_.PointFromJson(j);
  if (!checked.ok()) return checked.status();
  const auto number = static_cast<int64_t>(trials_.size());
  trials_.push_back(Trial{.number = number, .state = TrialState::kRunning, .params = *std::move(checked)});
  return &trials_.back();
}

absl::StatusOr<Trial*> Study::Running(int64_t number) {
  if (number < 0 || number >= static_cast<int64_t>(trials_.size())) {
    return absl::NotFoundError(fmt::format("trial {}: no such trial", number));
  }
  Trial& t = trials_[number];
  if (t.state != TrialState::kRunning) {
    return absl::FailedPreconditionError(fmt::format("trial {}: not running", number));
  }
  return &t;
}

absl::StatusOr<bool> Study::Report(int64_t number, int64_t step, double value) {
  auto t = Running(number);
  if (!t.ok()) return t.status();
  Trial& trial = **t;
  if (step < 0) return absl::InvalidArgumentError(fmt::format("step {}: must be >= 0", step));
  if (!trial.intermediate.empty() && step <= trial.intermediate.back().first) {
    return absl::InvalidArgumentError(fmt::format("step {}: trial {} already reported step {}; steps must increase",
                                                  step, number, trial.intermediate.back().first));
  }
  trial.intermediate.emplace_back(step, LossOf(value));
  return pruner_->ShouldPrune(trial, trials_, seed_);
}

absl::Status Study::Tell(int64_t number, double value) {
  auto t = Running(number);
  if (!t.ok()) return t.status();
  if (!std::isfinite(value)) {
    (*t)->state = TrialState::kFailed;
    return absl::OkStatus();
  }
  (*t)->state = TrialState::kComplete;
  (*t)->value = LossOf(value);
  return absl::OkStatus();
}

absl::Status Study::Prune(int64_t number) {
  auto t = Running(number);
  if (!t.ok()) return t.status();
  (*t)->state = TrialState::kPruned;
  return absl::OkStatus();
}

absl::Status Study::Fail(int64_t number) {
  auto t = Running(number);
  if (!t.ok()) return t.status();
  (*t)->state = TrialState::kFailed;
  return absl::OkStatus();
}

const Trial* Study::Best() const {
  const Trial* best = nullptr;
  for (const Trial& t : trials_) {
    if (t.state == TrialState::kComplete && t.value && (!best || *t.value < *best->value)) best = &t;
  }
  return best;
}

}  // namespace gpugeek::hpo
