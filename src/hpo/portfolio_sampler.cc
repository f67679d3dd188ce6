#include "hpo/portfolio_sampler.h"

#include "fmt/format.h"
#include "hpo/cmaes_sampler.h"
#include "hpo/gp_sampler.h"
#include "hpo/random_sampler.h"
#include "hpo/tpe_sampler.h"

namespace gpugeek::hpo {
namespace {

constexpr int kGpMaxTrials = 400;
constexpr int kGpMaxInputs = 24;

int GpInputs(const SearchSpace& space) {
  int inputs = 0;
  for (const ParamSpec& p : space.params()) {
    inputs += p.kind == ParamKind::kCategorical ? static_cast<int>(p.choices.size()) : 1;
  }
  return inputs;
}

}  // namespace

std::unique_ptr<Sampler> PortfolioSampler::Choose(const SearchSpace& space) const {
  if (space.has_conditions()) return std::make_unique<TpeSampler>();
  if (space.all_numeric() && expected_trials_ <= kGpMaxTrials && GpInputs(space) <= kGpMaxInputs) {
    return std::make_unique<GpSampler>();
  }
  return std::make_unique<TpeSampler>(TpeOptions{.multivariate = true});
}

Point PortfolioSampler::Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const {
  return Choose(space)->Suggest(space, history, seed, number);
}

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(std::string_view name, int expected_trials) {
  if (name == "random") return std::make_unique<RandomSampler>();
  if (name == "tpe") return std::make_unique<TpeSampler>();
  if (name == "tpe-multivariate") return std::make_unique<TpeSampler>(TpeOptions{.multivariate = true});
  if (name == "cmaes") return std::make_unique<CmaEsSampler>();
  if (name == "gp") return std::make_unique<GpSampler>();
  if (name == "auto" || name.empty()) return std::make_unique<PortfolioSampler>(expected_trials);
  return absl::InvalidArgumentError(
      fmt::format("sampler {:?}: unknown; choose auto, random, tpe, tpe-multivariate, cmaes or gp", name));
}

}  // namespace gpugeek::hpo
