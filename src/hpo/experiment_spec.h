#pragma once
// The experiment spec: a search space, an objective, a budget and the job each trial runs.
//
//   name: gpt-tune
//   objective: {metric: val_loss, direction: minimize}
//   space:
//     - {name: lr, type: float, low: 1e-4, high: 3e-2, log: true}
//     - {name: width, type: int, low: 32, high: 128}
//   budget: {trials: 40, gpu_time: 8h}        # trials required; gpu_time optional (GPU-seconds of all trials)
//   parallelism: 4                            # trials running at once (default 1)
//   sampler: auto                             # auto, random, tpe, tpe-multivariate, cmaes, gp
//   pruner: {name: asha, min_resource: 2, max_resource: 20, reduction_factor: 3}
//   seed: 7
//   trial:                                    # a job spec, as `gpugeek submit` takes
//     resources: {accelerators: "A100-80GB:1"}
//     run: python3 train.py --lr {{lr}} --width {{width}}
//
// `{{NAME}}` in the trial's `run` becomes the parameter's value, shell-quoted ('' when inactive); every
// placeholder must name a parameter. Each trial's job is named NAME-tN; its members get GPUGEEK_EXPERIMENT
// (the experiment's id), GPUGEEK_TRIAL_ID (N) and GPUGEEK_PARAMS (the point as compact JSON) beside the platform's
// other GPUGEEK_* variables (a spec's own env may not set GPUGEEK_*). The trial spec's own `name` may be left out.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "api/job_spec.h"
#include "hpo/pruner.h"
#include "hpo/space.h"
#include "hpo/study.h"

namespace gpugeek::hpo {

struct ExperimentSpec {
  std::string name;
  std::string metric = "loss";  // what trials report; shown in tables
  Direction direction = Direction::kMinimize;
  SearchSpace space;
  int trials = 0;               // 1..10,000
  int64_t max_gpu_seconds = 0;  // 0: no limit
  int parallelism = 1;          // 1..256, at most `trials`
  std::string sampler = "auto";
  PrunerConfig pruner;
  uint64_t seed = 0;
  api::JobSpec trial;
};

inline constexpr int kMaxExperimentTrials = 10'000;
inline constexpr int kMaxParallelism = 256;

// Parses and validates an experiment spec from YAML: the bounds of api/bounded_yaml.h, then every field,
// each error an InvalidArgument naming it ("budget.trials: must be 1..10000"). The trial spec is checked as
// `gpugeek submit` checks a job spec, its fields named under `trial.`.
absl::StatusOr<ExperimentSpec> ParseExperimentSpec(std::string_view yaml_text,
                                                   const hw::GpuCatalog& catalog = hw::GpuCatalog::Builtin());

// The job of trial `number` at `point` (a point of spec.space): the trial spec named NAME-tN with the
// placeholders of `run` filled.
api::JobSpec TrialJob(const ExperimentSpec& spec, int64_t number, const Point& point);
// The variables the platform gives that trial's members: GPUGEEK_EXPERIMENT (`experiment_id`, e.g.
// "x-000003"), GPUGEEK_TRIAL_ID (`number`), GPUGEEK_PARAMS (the point as compact JSON).
std::map<std::string, std::string> TrialEnv(const ExperimentSpec& spec, const std::string& experiment_id,
                                            int64_t number, const Point& point);

}  // namespace gpugeek::hpo
