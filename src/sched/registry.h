#pragma once
// Registry: the one place where plugins and placement policies are named. Adding a policy is a new
// file with its plugin plus one line in registry.cc.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sched/plugin.h"

namespace gpugeek::sched {

// A placement policy: which score plugins, with which weights (the GPU choice comes from the first).
struct PolicySpec {
  std::string name;                                     // e.g. "FGD"
  std::string description;                              // one line
  std::vector<std::pair<std::string, int64_t>> scores;  // (score plugin, weight)
  bool needs_typical_pods = false;
};

class Registry {
 public:
  // All built-in plugins and policies. Lives forever; immutable, safe to share between threads.
  static const Registry& Builtin();

  // Errors: NotFound for an unknown name.
  absl::StatusOr<std::unique_ptr<FilterPlugin>> NewFilter(std::string_view name) const;
  absl::StatusOr<std::unique_ptr<ScorePlugin>> NewScore(std::string_view name, const PluginContext& context) const;
  // nullptr when unknown. Names compare case-insensitively.
  const PolicySpec* FindPolicy(std::string_view name) const;
  const std::vector<PolicySpec>& policies() const { return policies_; }
  // The filters every policy runs, in order.
  const std::vector<std::string>& default_filters() const { return default_filters_; }

 private:
  Registry();
  using FilterFactory = std::function<std::unique_ptr<FilterPlugin>()>;
  using ScoreFactory = std::function<std::unique_ptr<ScorePlugin>(const PluginContext&)>;
  std::vector<std::pair<std::string, FilterFactory>> filters_;
  std::vector<std::pair<std::string, ScoreFactory>> scores_;
  std::vector<PolicySpec> policies_;
  std::vector<std::string> default_filters_;
};

}  // namespace gpugeek::sched
