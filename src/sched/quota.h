#pragma once
// TenantLedger: per-tenant quotas, what each tenant holds now, and fair share from decayed usage.
//
// The problem: tenants share one pool. A tenant may be capped (so many GPUs of a model, so much
// milli-GPU in all, so many running jobs), and when tenants compete for what is free, the one that
// has used least for its share should go first, with old usage counting less than recent usage.
// The ledger is the one place that knows all three; the scheduling queue consults it (order, and
// parking jobs over quota), and the two drivers (the control plane's scheduling controller and the
// simulator) keep it current: a job's holding is recorded when it is bound and given back when it
// is released.
//
// Quotas. A tenant's Quota caps, each 0 or absent = unlimited: whole GPUs of one model (counted in
// milli-GPU, so a 500-milli share counts as half a GPU), milli-GPU over all models, and running jobs.
// A job is admitted only when, with its holding added, every cap still holds.
//
// Fair share, after Slurm's multifactor priority plugin (slurm.conf PriorityDecayHalfLife;
// https://slurm.schedmd.com/priority_multifactor.html, "Fair-share Factor"). Each tenant's usage U,
// in milli-GPU-seconds, decays with half-life h and accrues what it holds:
//   U(t + dt) = U(t) * 2^(-dt/h) + a * (h / ln 2) * (1 - 2^(-dt/h)),
// the exact integral of a constant holding a (milli-GPU) over dt, each past second weighted by
// 2^(-age/h). So with nothing held U halves in exactly one half-life, and a tenant holding a forever
// tends to a * h / ln 2. h = 0 turns decay off (U += a * dt), as PriorityDecayHalfLife=0 does.
// With weight w (Slurm's shares), the normalised usage is U_n = U / sum(U) and the normalised share
// S_n = w / sum(w); the fair-share factor is Slurm's classic F = 2^(-U_n / S_n): 1 for a tenant
// with no usage, 0.5 for one that used exactly its share. The queue orders tenants by U / w
// ascending, which is the same order as F descending.
//
// Time: passed in as MonoTime (AdvanceTo, Bind, Release), never read from a clock. The first time
// seen is the origin; a time before the last one seen counts as no time passing.
// Tenants: any string ("" is the default tenant). A tenant never configured has weight 1, no limits.
// Pure; thread-safety: none (one scheduling loop owns it, inside its SchedulingQueue).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sched/cluster.h"
#include "sched/framework.h"
#include "sched/request.h"

namespace gpugeek::sched {

// Caps of one tenant; 0 (or a model absent from the map) means unlimited.
struct Quota {
  std::map<std::string, int64_t> max_gpus_by_model;  // whole GPUs per GPU model, e.g. {"A100-80GB": 8}
  int64_t max_gpu_milli = 0;                         // milli-GPU over all models (1000 = one GPU)
  int32_t max_jobs = 0;                              // jobs running at once
  bool unlimited() const;
  bool operator==(const Quota&) const = default;
};

// A tenant's configuration (e.g. one row of the control plane's quota table).
struct TenantConfig {
  double weight = 1;  // fair-share weight (Slurm's shares); > 0. Only ratios between tenants matter.
  Quota quota;
  bool operator==(const TenantConfig&) const = default;
};

// The GPUs one bound job holds, by GPU model. Build it with HoldingOf from the job's placements.
struct Holding {
  std::map<std::string, int64_t> gpu_milli_by_model;  // milli-GPU over all members, per model
  int64_t gpu_milli() const;                          // their sum
  bool operator==(const Holding&) const = default;
};

// What `placements` (a gang's members, as Framework::Schedule returned them) hold: per member,
// num_gpus x gpu_milli of its node's model (cluster.spec(node).gpu_model). CPU-only members hold none.
Holding HoldingOf(std::span<const Placement> placements, const Cluster& cluster);

// One tenant now: for `gpugeek quota` (use against limit) and for tests.
struct TenantUsage {
  std::string tenant;
  TenantConfig config;
  Holding held;                  // sum over its bound jobs
  int32_t jobs = 0;              // bound jobs
  double usage = 0;              // decayed usage U, milli-GPU-seconds, as of the ledger's now()
  double normalized_usage = 0;   // U / sum of all tenants' U (0 when the sum is 0)
  double normalized_share = 0;   // weight / sum of all known tenants' weights
  double fair_share_factor = 1;  // 2^(-normalized_usage / normalized_share)
};

// What the quota lets a request be (TenantLedger::Admit).
struct Admission {
  // False: no alternative of the request fits the quota; `reason` says why (one clause per
  // alternative) and the request must not be attempted.
  bool admitted = true;
  // True when `request` differs from the one given: alternatives over quota dropped, or an
  // alternative's models narrowed to those with room under a per-model cap. Attempt `request` then.
  bool narrowed = false;
  Request request;  // only when narrowed
  std::string reason;
};

struct TenantLedgerOptions {
  // Decay half-life of usage; 0 = no decay. Slurm's default PriorityDecayHalfLife is 7 days.
  Duration half_life = std::chrono::hours(24 * 7);
};

class TenantLedger {
 public:
  explicit TenantLedger(TenantLedgerOptions options = {});

  // Sets a tenant's weight and quota (replacing what it had; TenantConfig{} restores the defaults).
  // A changed quota wakes the tenant's jobs parked over quota. Errors: InvalidArgument for a weight
  // not finite and > 0, or a negative cap. Jobs already bound stay bound even if now over the cap.
  absl::Status SetTenant(const std::string& tenant, TenantConfig config);
  // Errors: InvalidArgument for a negative half-life. Usage accrued so far is kept.
  absl::Status SetHalfLife(Duration half_life);
  // Replaces a tenant's decayed usage (milli-GPU-seconds, as of now()), e.g. restored from storage
  // after a restart. Errors: InvalidArgument when negative or not finite.
  absl::Status RestoreUsage(const std::string& tenant, double usage);

  // Advances the ledger's time to `now`: decays usage and accrues holdings (see the file comment).
  // SchedulingQueue::RunCycle calls it; Bind and Release call it first.
  void AdvanceTo(MonoTime now);

  // Records that job `key` of `tenant` was bound at `now` and holds `holding` (HoldingOf its
  // placements) until Release(key). Call it exactly when a placement becomes live (after the
  // Binder succeeded); ScheduleWithinQuota does. Errors: AlreadyExists when `key` is held already.
  absl::Status Bind(const std::string& key, const std::string& tenant, Holding holding, MonoTime now);
  // Job `key` ended or was evicted at `now`: its holding goes back (and its tenant's jobs parked
  // over quota wake). Returns false when `key` holds nothing (never bound, or released already).
  bool Release(const std::string& key, MonoTime now);
  bool Holds(const std::string& key) const { return jobs_.contains(key); }

  // Whether `request` of `tenant` may run now, and as what (see Admission). Per alternative:
  // `gang_size x num_gpus x gpu_milli` milli-GPU must fit under max_gpu_milli, and under each capped
  // model it may land on (its allowed models, or every model of `cluster` when any); models without
  // room are taken out of the alternative's allowed models. The running-jobs cap counts this job.
  // A gang may span models, so each allowed capped model must have room for the whole gang.
  Admission Admit(std::string_view tenant, const Request& request, const Cluster& cluster) const;
  // The queue's check before an attempt, without the request: the running-jobs cap, and the
  // milli-GPU cap for a job that holds at least `min_gpu_milli` in every alternative. Returns the
  // reason when over quota, nothing when it may be attempted (Admit then decides the rest).
  std::optional<std::string> CheckBeforeAttempt(std::string_view tenant, int64_t min_gpu_milli) const;

  // U / weight: the queue attempts tenants by this, lowest first.
  double NormalizedUsage(std::string_view tenant) const;
  // True when the tenant's quota can narrow a request (a milli-GPU or per-model cap): then an
  // unschedulable outcome of its narrowed request says nothing about the request's shape.
  bool MayNarrow(std::string_view tenant) const;
  // Goes up whenever the tenant may have room again (a release of one of its jobs, a quota change).
  uint64_t generation(std::string_view tenant) const;

  // Use against limit of one tenant (a tenant never seen: defaults, nothing held), and of every
  // tenant configured or holding or with usage, by name.
  TenantUsage Usage(std::string_view tenant) const;
  std::vector<TenantUsage> AllUsage() const;

  // The last time seen (nothing before the first AdvanceTo, Bind or Release).
  std::optional<MonoTime> now() const { return now_; }
  Duration half_life() const { return options_.half_life; }

 private:
  struct Tenant {
    TenantConfig config;
    Holding held;
    int32_t jobs = 0;
    double usage = 0;
    uint64_t generation = 0;
  };
  struct Job {
    std::string tenant;
    Holding holding;
  };
  const Tenant* Find(std::string_view tenant) const;
  Tenant& Get(const std::string& tenant);

  TenantLedgerOptions options_;
  std::map<std::string, Tenant, std::less<>> tenants_;
  std::map<std::string, Job> jobs_;  // bound jobs by key
  std::optional<MonoTime> now_;
};

// What ScheduleWithinQuota came to.
struct QuotaAttempt {
  bool over_quota = false;  // the quota admits no alternative: nothing was attempted
  std::string reason;       // when over_quota
  bool narrowed = false;    // the quota narrowed the request before it was attempted
  Decision decision;        // when !over_quota: scheduled or not
};

// One attempt of job `key` of `tenant` within its quota: Admit, then Schedule the (possibly
// narrowed) request through `binder`, then, when placed, Bind the placements' holding in the
// ledger at `now`. The one call a driver needs per attempt (both drivers use it).
// Errors: AlreadyExists when `key` is held already (nothing attempted); Schedule's errors (the
// binder's: nothing bound, nothing recorded).
absl::StatusOr<QuotaAttempt> ScheduleWithinQuota(TenantLedger& ledger, const std::string& key,
                                                 const std::string& tenant, const Request& request,
                                                 Framework& framework, Binder& binder, MonoTime now);

}  // namespace gpugeek::sched
