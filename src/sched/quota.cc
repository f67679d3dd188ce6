#include "sched/quota.h"

#include <cmath>
#include <numbers>
#include <utility>

#include <fmt/format.h>

#include "common/status_macros.h"

namespace gpugeek::sched {
namespace {

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// The models an alternative may land on: its non-empty allowed models (Compile ignores empty
// entries), or, when none, every model of the cluster.
std::vector<std::string> CandidateModels(const ResourceShape& s, const Cluster& cluster) {
  std::vector<std::string> out;
  for (const std::string& m : s.allowed_models) {
    if (!m.empty()) out.push_back(m);
  }
  if (out.empty()) {
    for (int i = 0; i < cluster.num_models(); ++i) out.push_back(cluster.model_name(i));
  }
  return out;
}

int64_t ModelHeld(const Holding& h, const std::string& model) {
  auto it = h.gpu_milli_by_model.find(model);
  return it == h.gpu_milli_by_model.end() ? 0 : it->second;
}

}  // namespace

bool Quota::unlimited() const {
  if (max_gpu_milli > 0 || max_jobs > 0) return false;
  for (const auto& [model, gpus] : max_gpus_by_model) {
    if (gpus > 0) return false;
  }
  return true;
}

int64_t Holding::gpu_milli() const {
  int64_t sum = 0;
  for (const auto& [model, milli] : gpu_milli_by_model) sum += milli;
  return sum;
}

Holding HoldingOf(std::span<const Placement> placements, const Cluster& cluster) {
  Holding h;
  for (const Placement& p : placements) {
    if (p.num_gpus <= 0 || p.gpu_milli <= 0) continue;
    h.gpu_milli_by_model[cluster.spec(p.node).gpu_model] += int64_t{p.num_gpus} * p.gpu_milli;
  }
  return h;
}

TenantLedger::TenantLedger(TenantLedgerOptions options) : options_(options) {}

absl::Status TenantLedger::SetTenant(const std::string& tenant, TenantConfig config) {
  if (!std::isfinite(config.weight) || config.weight <= 0) {
    return absl::InvalidArgumentError(fmt::format("tenant '{}': weight {} is not > 0", tenant, config.weight));
  }
  if (config.quota.max_gpu_milli < 0 || config.quota.max_jobs < 0) {
    return absl::InvalidArgumentError(fmt::format("tenant '{}': a negative quota", tenant));
  }
  for (const auto& [model, gpus] : config.quota.max_gpus_by_model) {
    if (gpus < 0) {
      return absl::InvalidArgumentError(fmt::format("tenant '{}': negative GPU quota for model '{}'", tenant, model));
    }
  }
  Tenant& t = Get(tenant);
  if (t.config.quota != config.quota) ++t.generation;
  t.config = std::move(config);
  return absl::OkStatus();
}

absl::Status TenantLedger::SetHalfLife(Duration half_life) {
  if (half_life < Duration::zero()) return absl::InvalidArgumentError("negative half-life");
  options_.half_life = half_life;
  return absl::OkStatus();
}

absl::Status TenantLedger::RestoreUsage(const std::string& tenant, double usage) {
  if (!std::isfinite(usage) || usage < 0) {
    return absl::InvalidArgumentError(fmt::format("tenant '{}': usage {} is not >= 0", tenant, usage));
  }
  Get(tenant).usage = usage;
  return absl::OkStatus();
}

void TenantLedger::AdvanceTo(MonoTime now) {
  if (!now_) {
    now_ = now;
    return;
  }
  if (now <= *now_) return;
  const double dt = Seconds(now - *now_);
  now_ = now;
  const double h = Seconds(options_.half_life);
  if (h <= 0) {
    for (auto& [name, t] : tenants_) t.usage += static_cast<double>(t.held.gpu_milli()) * dt;
    return;
  }
  // decay = 2^(-dt/h); 1 - decay through expm1, exact for a dt tiny against h.
  const double decay = std::exp2(-dt / h);
  const double accrue = (h / std::numbers::ln2) * -std::expm1(-dt / h * std::numbers::ln2);
  for (auto& [name, t] : tenants_) t.usage = t.usage * decay + static_cast<double>(t.held.gpu_milli()) * accrue;
}

absl::Status TenantLedger::Bind(const std::string& key, const std::string& tenant, Holding holding, MonoTime now) {
  if (jobs_.contains(key)) return absl::AlreadyExistsError(fmt::format("'{}' is bound already", key));
  AdvanceTo(now);
  Tenant& t = Get(tenant);
  for (const auto& [model, milli] : holding.gpu_milli_by_model) t.held.gpu_milli_by_model[model] += milli;
  ++t.jobs;
  jobs_.emplace(key, Job{tenant, std::move(holding)});
  return absl::OkStatus();
}

bool TenantLedger::Release(const std::string& key, MonoTime now) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return false;
  AdvanceTo(now);
  Tenant& t = Get(it->second.tenant);
  for (const auto& [model, milli] : it->second.holding.gpu_milli_by_model) {
    auto held = t.held.gpu_milli_by_model.find(model);
    held->second -= milli;  // Bind added at least this much under the same model
    if (held->second == 0) t.held.gpu_milli_by_model.erase(held);
  }
  --t.jobs;
  ++t.generation;
  jobs_.erase(it);
  return true;
}

Admission TenantLedger::Admit(std::string_view tenant, const Request& request, const Cluster& cluster) const {
  Admission a;
  const Tenant* t = Find(tenant);
  if (t == nullptr || t->config.quota.unlimited()) return a;
  const Quota& q = t->config.quota;
  std::vector<std::string> clauses;
  if (q.max_jobs > 0 && t->jobs >= q.max_jobs) {
    clauses.push_back(fmt::format("{} of {} jobs running", t->jobs, q.max_jobs));
  } else {
    const int64_t held = t->held.gpu_milli();
    Request out = request;
    out.alternatives.clear();
    for (size_t i = 0; i < request.alternatives.size(); ++i) {
      const ResourceShape& s = request.alternatives[i];
      const int64_t need = s.num_gpus > 0 ? int64_t{request.gang_size} * s.num_gpus * s.gpu_milli : 0;
      const std::string which = request.alternatives.size() > 1 ? fmt::format("alternative {}: ", i) : "";
      if (need == 0) {
        out.alternatives.push_back(s);
        continue;
      }
      if (q.max_gpu_milli > 0 && held + need > q.max_gpu_milli) {
        clauses.push_back(fmt::format("{}{} of {} milli-GPU held, {} more needed", which, held, q.max_gpu_milli, need));
        a.narrowed = true;
        continue;
      }
      std::vector<std::string> kept, full;
      for (std::string& m : CandidateModels(s, cluster)) {
        auto cap = q.max_gpus_by_model.find(m);
        if (cap != q.max_gpus_by_model.end() && cap->second > 0 &&
            ModelHeld(t->held, m) + need > cap->second * kMilliPerGpu) {
          full.push_back(
              fmt::format("{} of {} milli-GPU of {} held", ModelHeld(t->held, m), cap->second * kMilliPerGpu, m));
        } else {
          kept.push_back(std::move(m));
        }
      }
      if (full.empty()) {
        out.alternatives.push_back(s);
        continue;
      }
      a.narrowed = true;
      if (kept.empty()) {
        clauses.push_back(fmt::format("{}{}, {} more needed", which, fmt::join(full, ", "), need));
        continue;
      }
      out.alternatives.push_back(s);
      out.alternatives.back().allowed_models = std::move(kept);
    }
    if (!out.alternatives.empty()) {
      if (a.narrowed) a.request = std::move(out);
      return a;
    }
  }
  a.admitted = false;
  a.narrowed = false;
  a.reason = fmt::format("over quota (tenant '{}'): {}", tenant, fmt::join(clauses, "; "));
  return a;
}

std::optional<std::string> TenantLedger::CheckBeforeAttempt(std::string_view tenant, int64_t min_gpu_milli) const {
  const Tenant* t = Find(tenant);
  if (t == nullptr) return std::nullopt;
  const Quota& q = t->config.quota;
  if (q.max_jobs > 0 && t->jobs >= q.max_jobs) {
    return fmt::format("over quota (tenant '{}'): {} of {} jobs running", tenant, t->jobs, q.max_jobs);
  }
  const int64_t held = t->held.gpu_milli();
  if (q.max_gpu_milli > 0 && min_gpu_milli > 0 && held + min_gpu_milli > q.max_gpu_milli) {
    return fmt::format("over quota (tenant '{}'): {} of {} milli-GPU held, {} more needed", tenant, held,
                       q.max_gpu_milli, min_gpu_milli);
  }
  return std::nullopt;
}

double TenantLedger::NormalizedUsage(std::string_view tenant) const {
  const Tenant* t = Find(tenant);
  return t == nullptr ? 0 : t->usage / t->config.weight;
}

bool TenantLedger::MayNarrow(std::string_view tenant) const {
  const Tenant* t = Find(tenant);
  if (t == nullptr) return false;
  if (t->config.quota.max_gpu_milli > 0) return true;
  for (const auto& [model, gpus] : t->config.quota.max_gpus_by_model) {
    if (gpus > 0) return true;
  }
  return false;
}

uint64_t TenantLedger::generation(std::string_view tenant) const {
  const Tenant* t = Find(tenant);
  return t == nullptr ? 0 : t->generation;
}

TenantUsage TenantLedger::Usage(std::string_view tenant) const {
  TenantUsage u;
  u.tenant = std::string(tenant);
  double usage_sum = 0, weight_sum = 0;
  for (const auto& [name, t] : tenants_) {
    usage_sum += t.usage;
    weight_sum += t.config.weight;
  }
  if (const Tenant* t = Find(tenant)) {
    u.config = t->config;
    u.held = t->held;
    u.jobs = t->jobs;
    u.usage = t->usage;
  } else {
    weight_sum += u.config.weight;  // counted as it would be once known
  }
  u.normalized_usage = usage_sum > 0 ? u.usage / usage_sum : 0;
  u.normalized_share = u.config.weight / weight_sum;
  u.fair_share_factor = std::exp2(-u.normalized_usage / u.normalized_share);
  return u;
}

std::vector<TenantUsage> TenantLedger::AllUsage() const {
  std::vector<TenantUsage> out;
  out.reserve(tenants_.size());
  for (const auto& [name, t] : tenants_) out.push_back(Usage(name));
  return out;
}

const TenantLedger::Tenant* TenantLedger::Find(std::string_view tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? nullptr : &it->second;
}

TenantLedger::Tenant& TenantLedger::Get(const std::string& tenant) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) it = tenants_.emplace(tenant, Tenant{}).first;
  return it->second;
}

absl::StatusOr<QuotaAttempt> ScheduleWithinQuota(TenantLedger& ledger, const std::string& key,
                                                 const std::string& tenant, const Request& request,
                                                 Framework& framework, Binder& binder, MonoTime now) {
  if (ledger.Holds(key)) return absl::AlreadyExistsError(fmt::format("'{}' is bound already", key));
  Admission admission = ledger.Admit(tenant, request, framework.cluster());
  QuotaAttempt out;
  if (!admission.admitted) {
    out.over_quota = true;
    out.reason = std::move(admission.reason);
    return out;
  }
  out.narrowed = admission.narrowed;
  ASSIGN_OR_RETURN(out.decision, framework.Schedule(admission.narrowed ? admission.request : request, binder));
  if (out.decision.scheduled) {
    // Cannot fail: Holds(key) was false above and nothing bound it since.
    RETURN_IF_ERROR(ledger.Bind(key, tenant, HoldingOf(out.decision.placements, framework.cluster()), now));
  }
  return out;
}

}  // namespace gpugeek::sched
