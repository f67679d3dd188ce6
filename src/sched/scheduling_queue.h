#pragma once
// SchedulingQueue: which waiting request is attempted next, and which are not worth attempting.
//
// The problem: a scheduler attempts pending requests again and again. Attempting one that cannot fit
// costs a search over every node, and with thousands waiting most attempts are futile: nothing
// placed since a request failed gives capacity back, so it fails again until capacity returns (a job
// ends, a node joins or is uncordoned). A request whose binding failed (a store error) should be
// retried, but not in a tight loop.
//
// The model is Kubernetes' scheduling queue (pkg/scheduler/backend/queue): an active queue ordered by
// (priority desc, sequence asc, key asc); unschedulable items parked until a capacity event
// (CapacityChanged), which moves them all back to active; items whose binding failed in a backoff
// queue, each for initial_backoff x 2^(consecutive errors - 1), capped at max_backoff, back to active
// when that time has passed. Within one cycle (BeginCycle ... Pop until empty) each item is attempted
// at most once, and an item whose shape key equals that of an item found unschedulable earlier in the
// cycle, at the same capacity generation, is parked without an attempt (equal shapes fit or fail
// alike, and capacity has only been taken since).
//
// Each item is in exactly one state: active (waiting for Pop), in flight (Pop returned it for an
// attempt; the caller reports exactly one outcome: Done, Unschedulable, Backoff or OverQuota),
// parked, backing off, or over quota. An active item attempted in the current cycle (woken by
// CapacityChanged, or returned by an Unschedulable whose generation is stale) waits for the next
// BeginCycle.
//
// Pure: time is passed in (MonoTime); no clock, I/O or threads. Deterministic: every order is total.
// Cost: Add, Remove, Update and each outcome O(log n); Pop O(t + log n) for the t tenants with
// active items; CapacityChanged and BeginCycle O(k log n) for the k items they move (BeginCycle also
// O(t') for the t' tenants with items over quota). Thread-safety: none; one scheduling loop owns it.
//
// Tenants, quotas and fair share (quota.h). The queue owns a TenantLedger. Active items are kept per
// tenant (QueueItem::tenant, "" = the default tenant); Pop takes the tenant of lowest normalised
// usage (TenantLedger::NormalizedUsage: decayed usage / weight, Slurm's fair-share order), ties to the
// tenant whose first item comes first, and from it its first item by (priority desc, sequence asc,
// key asc). With one tenant, or none configured, the order is exactly the one above. Before an
// attempt, an item whose tenant is over quota (TenantLedger::CheckBeforeAttempt: running jobs, or
// milli-GPU for its QueueItem::min_gpu_milli) is parked "over quota" without an attempt; the caller's
// attempt may find it over quota too (ScheduleWithinQuota, then AttemptOutcome::kOverQuota). Either
// way it waits in its own set, and the items behind it, of its tenant or of others, are attempted
// in the same pass: an over-quota item never blocks another. It becomes active again (from the next
// BeginCycle) once its tenant may have room: the ledger's generation for the tenant changed (one of
// its jobs was released, its quota changed). Capacity events do not wake it.
//
// The same queue runs in the control plane and in the simulator (sim/simulator.h), both through
// RunCycle, so a queueing policy measured in simulation is the one in production.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sched/quota.h"

namespace gpugeek::sched {

struct QueueItem {
  std::string key;        // unique in the queue (a job id, a pod name)
  int priority = 0;       // higher is attempted first
  uint64_t sequence = 0;  // submission order: lower first among equal priorities
  std::string shape_key;  // what decides where it fits: equal keys fit or fail alike ("" is a shape too)
  uint64_t payload = 0;   // opaque to the queue (e.g. an index into the caller's list)
  std::string tenant;     // owner, for quotas and fair share ("" = the default tenant)
  // The least milli-GPU the job holds once placed, over its alternatives (gang x GPUs x milli per
  // GPU); lets the queue park it over quota without an attempt. 0: unknown (the attempt decides).
  int64_t min_gpu_milli = 0;
};

struct SchedulingQueueOptions {
  std::chrono::nanoseconds initial_backoff = std::chrono::milliseconds(100);  // after the first error
  std::chrono::nanoseconds max_backoff = std::chrono::seconds(10);            // cap of the doubling
  TenantLedgerOptions ledger;                                                 // fair-share half-life
};

// kParked: did not fit, waits for a capacity change. kOverQuota: its tenant's quota has no room,
// waits for the tenant to release something or its quota to change.
enum class QueueState { kActive, kInFlight, kParked, kBackoff, kOverQuota };

// What the caller's attempt at one item came to (RunCycle applies it).
struct AttemptOutcome {
  enum class Kind {
    kPlaced,         // Done: it leaves the queue
    kUnschedulable,  // Unschedulable: parked until capacity changes
    kError,          // Backoff: retried after the backoff (e.g. the store failed while binding)
    kDropped,        // it leaves the queue unplaced (the FGD protocol: a failure is final)
    kOverQuota,      // OverQuota: its tenant's quota admits none of it (QuotaAttempt::over_quota)
  };
  Kind kind = Kind::kPlaced;
  std::string reason;  // kUnschedulable, kError, kOverQuota: the pending reason shown for it
};

// What one RunCycle did, by count.
struct CycleStats {
  size_t attempted = 0;        // attempt calls
  size_t placed = 0;           // kPlaced
  size_t unschedulable = 0;    // kUnschedulable
  size_t parked_by_shape = 0;  // parked without an attempt (same shape failed earlier in the cycle)
  size_t errors = 0;           // kError
  size_t dropped = 0;          // kDropped
  size_t over_quota = 0;       // parked over quota: by the queue's check before an attempt, or kOverQuota
};

class SchedulingQueue {
 public:
  explicit SchedulingQueue(SchedulingQueueOptions options = {});

  // Inserts an active item. Errors: AlreadyExists when the key is queued (in any state).
  absl::Status Add(QueueItem item);
  // Takes the item out, whatever its state (an in-flight item's later outcome is then NotFound).
  // Returns false when the key is not queued.
  bool Remove(const std::string& key);
  // Replaces the fields of a queued item, keeping its state, reason and error count; a parked item
  // whose shape key changed, or an over-quota item whose tenant or min_gpu_milli changed, becomes
  // active (its failure said nothing about the new item). Errors: NotFound.
  absl::Status Update(const QueueItem& item);

  // Starts a pass: items deferred by the last one become active, and shapes found unschedulable are
  // forgotten. A pass then calls Pop until it returns nothing.
  void BeginCycle();

  // What Pop returns.
  struct Popped {
    QueueItem item;
    // True: the item is in flight; attempt it and report one outcome. False: it was parked without
    // an attempt because an item of the same shape was found unschedulable earlier in this cycle at
    // this capacity generation; `reason` is that item's reason (also its pending reason now), and
    // no outcome is expected. Also false, with over_quota true, when its tenant is over quota
    // (TenantLedger::CheckBeforeAttempt): it is parked over quota and `reason` says why.
    bool attempt = true;
    std::string reason;
    bool over_quota = false;
  };
  // First moves the backing-off items whose backoff ended at or before `now` back to active. Then
  // returns the first active item not yet attempted in this cycle: of the tenant of lowest
  // normalised usage (ties: the tenant whose first item comes first), its first item by (priority
  // desc, sequence asc, key asc); or nothing when there is none.
  std::optional<Popped> Pop(MonoTime now);

  // Outcomes of an in-flight item. Errors (all three): NotFound when the key is not queued,
  // FailedPrecondition when it is not in flight.
  //
  // Placed: the item leaves the queue.
  absl::Status Done(const std::string& key);
  // Did not fit. `capacity_generation` is capacity_generation() read before the attempt: when it is
  // current the item is parked until CapacityChanged, and its shape counts as failed for the rest of
  // the cycle (unless its tenant's quota may have narrowed the request: TenantLedger::MayNarrow);
  // when capacity changed since (stale), the failure proves nothing and the item is active again
  // (next cycle). The consecutive-error count is reset. Errors also: InvalidArgument for a
  // generation above the current one.
  absl::Status Unschedulable(const std::string& key, uint64_t capacity_generation, std::string reason);
  // An error while attempting or binding: the item backs off until `now` + initial_backoff x
  // 2^(consecutive errors - 1), at most max_backoff; then Pop moves it back to active.
  absl::Status Backoff(const std::string& key, MonoTime now, std::string reason);
  // Over its tenant's quota (the attempt's Admit found no alternative within it): parked over quota
  // until the ledger's generation for its tenant changes. The consecutive-error count is reset.
  absl::Status OverQuota(const std::string& key, std::string reason);

  // Capacity may have come back (a release, a node added or uncordoned): the generation goes up,
  // every parked item becomes active (those attempted in this cycle: from the next one), and the
  // shapes found unschedulable in this cycle are forgotten.
  void CapacityChanged();

  // One pass, the same for every caller: advances the ledger to `now` (usage decays and accrues),
  // BeginCycle, then each item Pop returns goes to `attempt` (items parked by shape or over quota go
  // to `on_parked`, when given, with the reason) and its outcome is applied, with the capacity
  // generation (and the tenant's ledger generation, for kOverQuota) read just before the attempt.
  // `attempt` may call CapacityChanged, Add or Remove (a removed item's outcome is ignored). An
  // error from `attempt` ends the pass at once: that item returns to active (for the next cycle) and
  // the error is returned.
  using AttemptFn = std::function<absl::StatusOr<AttemptOutcome>(const QueueItem& item)>;
  using ParkedFn = std::function<void(const QueueItem& item, const std::string& reason)>;
  absl::StatusOr<CycleStats> RunCycle(MonoTime now, const AttemptFn& attempt, const ParkedFn& on_parked = nullptr);

  // The last reason the item did not fit or failed ("" when none, or not queued).
  std::string Reason(const std::string& key) const;
  // The item's state; nothing when not queued.
  std::optional<QueueState> State(const std::string& key) const;
  bool Contains(const std::string& key) const { return items_.contains(key); }
  // The earliest end of a backoff, if any item is backing off (a caller with a virtual clock wakes
  // then).
  std::optional<MonoTime> NextBackoffExpiry() const;

  uint64_t capacity_generation() const { return generation_; }
  uint64_t cycle() const { return cycle_; }
  // Items by state; size() is their sum. active_size() counts deferred active items too.
  size_t size() const { return items_.size(); }
  size_t active_size() const { return active_count_ + deferred_.size(); }
  size_t in_flight_size() const { return in_flight_; }
  size_t parked_size() const { return parked_.size(); }
  size_t backoff_size() const { return backoff_.size(); }
  size_t over_quota_size() const { return over_quota_size_; }
  // Items of `tenant` waiting (active, parked, over quota or backing off; not in flight).
  size_t waiting_size(std::string_view tenant) const;

  // Quotas, weights, holdings and usage of the tenants (quota.h). The drivers configure it
  // (SetTenant), and record each placement and release in it (ScheduleWithinQuota binds;
  // TenantLedger::Release when a job ends); both may change it between and during passes.
  TenantLedger& ledger() { return ledger_; }
  const TenantLedger& ledger() const { return ledger_; }

 private:
  // (priority desc, sequence asc, key asc): the attempt order.
  struct Order {
    int neg_priority;
    uint64_t sequence;
    std::string key;
    auto operator<=>(const Order&) const = default;
  };
  struct Entry {
    QueueItem item;
    QueueState state = QueueState::kActive;
    bool deferred = false;          // active, but attempted in this cycle: waits for the next
    uint64_t attempted_cycle = 0;   // cycle_ of its last Pop (0: never; cycles start at 1)
    int errors = 0;                 // consecutive Backoff calls
    MonoTime backoff_until{};       // kBackoff
    uint64_t quota_generation = 0;  // kOverQuota: the ledger's generation of its tenant when parked
    std::string reason;
  };
  static Order OrderOf(const QueueItem& item) { return {-item.priority, item.sequence, item.key}; }

  // The items of one tenant over quota, and the oldest ledger generation of the tenant they were
  // parked at: when the ledger's moves past it, BeginCycle wakes them all.
  struct OverQuotaSet {
    uint64_t generation = 0;
    std::set<Order> items;
  };

  // Moves an entry out of whichever sub-queue holds it (none for in flight).
  void Unlink(Entry& e);
  // Makes an entry active: in active_, or in deferred_ when attempted in this cycle.
  void Activate(Entry& e);
  // Parks an entry (in no sub-queue) over quota, as found at the tenant's ledger `generation`.
  void ParkOverQuota(Entry& e, std::string reason, uint64_t generation);

  // Constant after construction.
  SchedulingQueueOptions options_;

  std::map<std::string, Entry> items_;
  // Active, may be popped in this cycle: by tenant (no empty sets), active_count_ in all.
  std::map<std::string, std::set<Order>, std::less<>> active_;
  size_t active_count_ = 0;
  std::set<Order> deferred_;  // active from the next BeginCycle
  std::set<Order> parked_;
  std::map<std::string, OverQuotaSet, std::less<>> over_quota_;  // by tenant (no empty sets)
  size_t over_quota_size_ = 0;
  std::set<std::tuple<MonoTime, Order>> backoff_;  // by end of backoff, then attempt order
  size_t in_flight_ = 0;
  std::map<std::string, std::string> failed_shapes_;  // this cycle, this generation: shape -> reason
  uint64_t generation_ = 0;
  uint64_t cycle_ = 1;
  TenantLedger ledger_;
};

}  // namespace gpugeek::sched
