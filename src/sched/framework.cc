#include "sched/framework.h"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "common/status_macros.h"
#include "sched/registry.h"

namespace gpugeek::sched {

absl::StatusOr<std::unique_ptr<Framework>> Framework::Create(const FrameworkOptions& options, Cluster* cluster) {
  const Registry& registry = Registry::Builtin();
  const PolicySpec* spec = registry.FindPolicy(options.policy);
  if (spec == nullptr) return absl::NotFoundError(fmt::format("unknown placement policy '{}'", options.policy));
  if (spec->needs_typical_pods && options.context.typical_pods.empty()) {
    return absl::InvalidArgumentError(fmt::format("policy '{}' needs the workload's typical pods", spec->name));
  }
  std::unique_ptr<Framework> fw(new Framework(cluster, options.seed));
  fw->policy_ = spec->name;
  fw->explain_ = options.explain_unschedulable;
  for (const std::string& name : registry.default_filters()) {
    ASSIGN_OR_RETURN(auto filter, registry.NewFilter(name));
    fw->filters_.push_back(std::move(filter));
  }
  for (const auto& [name, weight] : spec->scores) {
    ASSIGN_OR_RETURN(auto plugin, registry.NewScore(name, options.context));
    fw->scores_.push_back({std::move(plugin), weight});
  }
  if (options.topology_weight > 0) {
    ASSIGN_OR_RETURN(auto plugin, registry.NewScore("NvlinkTopology", options.context));
    fw->scores_.push_back({std::move(plugin), options.topology_weight});
  }
  // Tie order: a seeded permutation of the nodes, drawn first so it depends on the seed alone.
  const size_t n = cluster->size();
  std::vector<uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  for (size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[fw->rng_.Uniform(i)]);
  fw->rank_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) fw->rank_[perm[i]] = static_cast<uint32_t>(i);
  fw->candidates_.reserve(n);
  fw->raw_.reserve(n);
  fw->total_.reserve(n);
  return fw;
}

bool Framework::PlaceOne(const PodShape& shape, std::span<const Placement> exclude, const GangDomain& domain,
                         Placement* out) {
  const size_t n = cluster_->size();
  candidates_.resize(n);
  std::iota(candidates_.begin(), candidates_.end(), NodeIndex{0});
  for (const auto& f : filters_) {
    f->Filter(shape, *cluster_, candidates_);
    if (candidates_.empty()) return false;
  }
  if (!exclude.empty()) {
    std::erase_if(candidates_, [&](NodeIndex c) {
      return std::any_of(exclude.begin(), exclude.end(), [c](const Placement& p) { return p.node == c; });
    });
    if (candidates_.empty()) return false;
  }
  if (domain.label != nullptr) {
    std::erase_if(candidates_, [&](NodeIndex c) {
      const std::string_view value = LabelValue(c, *domain.label);
      return domain.pin ? value != *domain.pin : domain.tried->contains(value);
    });
    if (candidates_.empty()) return false;
  }
  const size_t m = candidates_.size();
  total_.assign(m, 0);
  raw_.resize(m);
  CycleState state{&rng_};
  for (auto& [plugin, weight] : scores_) {
    plugin->Score(shape, *cluster_, candidates_, raw_, state);
    if (plugin->normalize()) {
      // The FGD simulator's NormalizeScore: integer min-max rescale to [0, 100]; all equal -> 0.
      const auto [lo_it, hi_it] = std::minmax_element(raw_.begin(), raw_.end());
      const int64_t lo = *lo_it, range = *hi_it - *lo_it;
      for (int64_t& s : raw_) s = range == 0 ? kMinNodeScore : (s - lo) * (kMaxNodeScore - kMinNodeScore) / range;
    }
    for (size_t i = 0; i < m; ++i) total_[i] += weight * raw_[i];
  }
  size_t best = 0;
  for (size_t i = 1; i < m; ++i) {
    if (total_[i] > total_[best] || (total_[i] == total_[best] && rank_[candidates_[i]] < rank_[candidates_[best]])) {
      best = i;
    }
  }
  const NodeIndex node = candidates_[best];
  GpuChoice gpus;
  if (shape.uses_gpu()) {
    gpus = scores_.empty() ? BestFitGpus(shape, *cluster_, node)
                           : scores_[0].plugin->SelectGpus(shape, *cluster_, node, state);
  }
  out->node = node;
  out->cpu_milli = shape.cpu_milli;
  out->memory_bytes = shape.memory_bytes;
  out->gpu_milli = shape.gpu_milli;
  out->num_gpus = gpus.num;
  out->gpus = gpus.gpus;
  // Reserve: the snapshot takes the placement now, so later gang members and requests see it.
  cluster_->Bind(*out);
  return true;
}

void Framework::Explain(const PodShape& shape, std::vector<NodeReason>* reasons) const {
  reasons->clear();
  for (size_t i = 0; i < cluster_->size(); ++i) {
    const auto node = static_cast<NodeIndex>(i);
    for (const auto& f : filters_) {
      std::string why = f->Explain(shape, *cluster_, node);
      if (!why.empty()) {
        reasons->push_back({node, std::string(f->name()), std::move(why)});
        break;
      }
    }
  }
}

bool Framework::PlaceGang(const Request& request, const ResourceShape& alternative, Decision* d) {
  const PodShape shape = Compile(alternative, *cluster_, &request);
  const bool pinned = request.gang_size > 1 && !request.gang_label.empty();
  std::set<std::string, std::less<>> tried;  // gang_label values the gang did not fit in
  // The explanation of the attempt that placed the most members (the others' say less).
  std::vector<NodeReason> best_reasons;
  int32_t best_placed = -1;
  // Members placed before this request (an elastic gang's survivors) pin the gang's label value.
  std::optional<std::string> placed_pin;
  if (!request.gang_label.empty() && !request.placed.empty()) {
    placed_pin = std::string(LabelValue(request.placed.front().node, request.gang_label));
  }
  std::vector<Placement> exclude;  // distinct_nodes: the nodes of the members placed so far
  while (true) {
    d->placements.clear();
    GangDomain domain{
        .label = pinned || placed_pin ? &request.gang_label : nullptr, .pin = placed_pin, .tried = &tried};
    bool all = true;
    for (int32_t member = 0; member < request.gang_size; ++member) {
      Placement p;
      std::span<const Placement> off;  // no copy unless members were placed before this request
      if (request.distinct_nodes && request.placed.empty()) {
        off = d->placements;
      } else if (request.distinct_nodes) {
        exclude.assign(request.placed.begin(), request.placed.end());
        exclude.insert(exclude.end(), d->placements.begin(), d->placements.end());
        off = exclude;
      }
      if (!PlaceOne(shape, off, domain, &p)) {
        all = false;
        break;
      }
      d->placements.push_back(p);
      if (pinned && member == 0 && !domain.pin)
        domain.pin = std::string(LabelValue(p.node, request.gang_label));  // the rest follow it
    }
    if (all) return true;
    // Explain with the reserved members still in place (why the next member did not fit), then unreserve
    // them: a gang is all or nothing.
    const auto placed = static_cast<int32_t>(d->placements.size());
    if (placed > best_placed) {
      if (explain_) Explain(shape, &best_reasons);
      best_placed = placed;
    }
    Release(d->placements);
    d->placements.clear();
    // With gang_label: no first member fits in any value left either; beside placed members, no other value.
    if (!pinned || placed == 0 || placed_pin) {
      d->reasons = std::move(best_reasons);
      d->members_placed = best_placed;
      return false;
    }
    tried.insert(*domain.pin);
  }
}

std::string_view Framework::LabelValue(NodeIndex n, const std::string& label) const {
  const auto& labels = cluster_->spec(n).labels;
  const auto it = labels.find(label);
  return it == labels.end() ? std::string_view() : std::string_view(it->second);
}

absl::StatusOr<Decision> Framework::Schedule(const Request& request, Binder& binder) {
  RETURN_IF_ERROR(Validate(request));
  Decision d;
  for (size_t a = 0; a < request.alternatives.size(); ++a) {
    if (!PlaceGang(request, request.alternatives[a], &d)) continue;
    // Permit: the whole gang is reserved. Bind.
    if (absl::Status s = binder.Bind(request, d.placements); !s.ok()) {
      Release(d.placements);
      return s;
    }
    d.scheduled = true;
    d.alternative = static_cast<int>(a);
    d.reasons.clear();
    return d;
  }
  return d;
}

void Framework::Release(std::span<const Placement> placements) {
  for (const Placement& p : placements) cluster_->Release(p);
}

Placement Framework::Hold(NodeIndex n) {
  Placement p;
  p.node = n;
  p.cpu_milli = cluster_->cpu_free(n);
  p.memory_bytes = cluster_->memory_free(n);
  // Whole free GPUs (a Placement has one gpu_milli for all its GPUs). A GPU partly held by a member
  // still on the node stays as it is; with the node's CPU and memory held, nothing needing either fits.
  const std::span<const int32_t> free = cluster_->gpu_free(n);
  for (size_t g = 0; g < free.size(); ++g) {
    if (free[g] == kMilliPerGpu) p.gpus[p.num_gpus++] = static_cast<uint8_t>(g);
  }
  p.gpu_milli = p.num_gpus > 0 ? kMilliPerGpu : 0;
  cluster_->Bind(p);
  return p;
}

}  // namespace gpugeek::sched
