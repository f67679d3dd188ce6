#include "sched/scheduling_queue.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace gpugeek::sched {

SchedulingQueue::SchedulingQueue(SchedulingQueueOptions options) : options_(options), ledger_(options.ledger) {}

absl::Status SchedulingQueue::Add(QueueItem item) {
  auto [it, inserted] = items_.try_emplace(item.key);
  if (!inserted) return absl::AlreadyExistsError(fmt::format("'{}' is already queued", item.key));
  it->second.item = std::move(item);
  Activate(it->second);
  return absl::OkStatus();
}

bool SchedulingQueue::Remove(const std::string& key) {
  auto it = items_.find(key);
  if (it == items_.end()) return false;
  Unlink(it->second);
  items_.erase(it);
  return true;
}

absl::Status SchedulingQueue::Update(const QueueItem& item) {
  auto it = items_.find(item.key);
  if (it == items_.end()) return absl::NotFoundError(fmt::format("'{}' is not queued", item.key));
  Entry& e = it->second;
  const bool shape_changed = e.item.shape_key != item.shape_key;
  const bool quota_changed = e.item.tenant != item.tenant || e.item.min_gpu_milli != item.min_gpu_milli;
  if (e.state == QueueState::kInFlight) {
    e.item = item;
    return absl::OkStatus();
  }
  Unlink(e);
  e.item = item;
  if (e.state == QueueState::kParked && !shape_changed) {
    parked_.insert(OrderOf(e.item));
  } else if (e.state == QueueState::kOverQuota && !quota_changed) {
    ParkOverQuota(e, std::move(e.reason), e.quota_generation);
  } else if (e.state == QueueState::kBackoff) {
    backoff_.emplace(e.backoff_until, OrderOf(e.item));
  } else {
    Activate(e);
  }
  return absl::OkStatus();
}

void SchedulingQueue::BeginCycle() {
  ++cycle_;
  // Over-quota items whose tenant may have room again (its generation moved past theirs).
  for (auto it = over_quota_.begin(); it != over_quota_.end();) {
    if (ledger_.generation(it->first) == it->second.generation) {
      ++it;
      continue;
    }
    std::set<Order> woken = std::move(it->second.items);
    over_quota_size_ -= woken.size();
    it = over_quota_.erase(it);
    for (const Order& o : woken) Activate(items_.at(o.key));
  }
  for (const Order& o : deferred_) {
    Entry& e = items_.at(o.key);
    e.deferred = false;
    active_[e.item.tenant].insert(o);
  }
  active_count_ += deferred_.size();
  deferred_.clear();
  failed_shapes_.clear();
}

std::optional<SchedulingQueue::Popped> SchedulingQueue::Pop(MonoTime now) {
  while (!backoff_.empty() && std::get<0>(*backoff_.begin()) <= now) {
    Entry& e = items_.at(std::get<1>(*backoff_.begin()).key);
    backoff_.erase(backoff_.begin());
    Activate(e);
  }
  if (active_.empty()) return std::nullopt;
  // The tenant of lowest normalised usage; ties to the one whose first item comes first.
  auto best = active_.begin();
  if (active_.size() > 1) {
    double best_usage = ledger_.NormalizedUsage(best->first);
    for (auto it = std::next(best); it != active_.end(); ++it) {
      const double usage = ledger_.NormalizedUsage(it->first);
      if (usage < best_usage || (usage == best_usage && *it->second.begin() < *best->second.begin())) {
        best = it;
        best_usage = usage;
      }
    }
  }
  auto node = best->second.extract(best->second.begin());
  --active_count_;
  if (best->second.empty()) active_.erase(best);
  Entry& e = items_.at(node.value().key);
  e.attempted_cycle = cycle_;
  if (std::optional<std::string> why = ledger_.CheckBeforeAttempt(e.item.tenant, e.item.min_gpu_milli)) {
    ParkOverQuota(e, *why, ledger_.generation(e.item.tenant));
    return Popped{e.item, false, std::move(*why), true};
  }
  if (auto failed = failed_shapes_.find(e.item.shape_key); failed != failed_shapes_.end()) {
    e.state = QueueState::kParked;
    e.reason = failed->second;
    parked_.insert(std::move(node));
    return Popped{e.item, false, failed->second};
  }
  e.state = QueueState::kInFlight;
  ++in_flight_;
  return Popped{e.item, true, ""};
}

absl::Status SchedulingQueue::Done(const std::string& key) {
  auto it = items_.find(key);
  if (it == items_.end()) return absl::NotFoundError(fmt::format("'{}' is not queued", key));
  if (it->second.state != QueueState::kInFlight) {
    return absl::FailedPreconditionError(fmt::format("'{}' is not in flight", key));
  }
  --in_flight_;
  items_.erase(it);
  return absl::OkStatus();
}

absl::Status SchedulingQueue::Unschedulable(const std::string& key, uint64_t capacity_generation, std::string reason) {
  auto it = items_.find(key);
  if (it == items_.end()) return absl::NotFoundError(fmt::format("'{}' is not queued", key));
  Entry& e = it->second;
  if (e.state != QueueState::kInFlight) return absl::FailedPreconditionError(fmt::format("'{}' is not in flight", key));
  if (capacity_generation > generation_) {
    return absl::InvalidArgumentError(
        fmt::format("capacity generation {} of '{}' is above the current {}", capacity_generation, key, generation_));
  }
  --in_flight_;
  e.errors = 0;
  e.reason = std::move(reason);
  if (capacity_generation < generation_) {
    // Capacity came back during the attempt: it might fit now.
    Activate(e);
    return absl::OkStatus();
  }
  e.state = QueueState::kParked;
  parked_.insert(OrderOf(e.item));
  // Only a failure in this cycle speaks for the rest of it (BeginCycle forgets the shapes), and only
  // one of the request as submitted: a quota may have narrowed it to fewer models or alternatives.
  if (e.attempted_cycle == cycle_ && !ledger_.MayNarrow(e.item.tenant))
    failed_shapes_.try_emplace(e.item.shape_key, e.reason);
  return absl::OkStatus();
}

absl::Status SchedulingQueue::Backoff(const std::string& key, MonoTime now, std::string reason) {
  auto it = items_.find(key);
  if (it == items_.end()) return absl::NotFoundError(fmt::format("'{}' is not queued", key));
  Entry& e = it->second;
  if (e.state != QueueState::kInFlight) return absl::FailedPreconditionError(fmt::format("'{}' is not in flight", key));
  --in_flight_;
  e.reason = std::move(reason);
  // initial x 2^(errors-1), capped: double until the cap instead of shifting, so no overflow.
  std::chrono::nanoseconds delay = options_.initial_backoff;
  for (int i = 0; i < e.errors && delay < options_.max_backoff; ++i) delay *= 2;
  delay = std::min(delay, options_.max_backoff);
  ++e.errors;
  e.state = QueueState::kBackoff;
  e.backoff_until = now + delay;
  backoff_.emplace(e.backoff_until, OrderOf(e.item));
  return absl::OkStatus();
}

absl::Status SchedulingQueue::OverQuota(const std::string& key, std::string reason) {
  auto it = items_.find(key);
  if (it == items_.end()) return absl::NotFoundError(fmt::format("'{}' is not queued", key));
  Entry& e = it->second;
  if (e.state != QueueState::kInFlight) return absl::FailedPreconditionError(fmt::format("'{}' is not in flight", key));
  --in_flight_;
  e.errors = 0;
  ParkOverQuota(e, std::move(reason), ledger_.generation(e.item.tenant));
  return absl::OkStatus();
}

void SchedulingQueue::CapacityChanged() {
  ++generation_;
  failed_shapes_.clear();
  std::set<Order> woken;
  woken.swap(parked_);
  for (const Order& o : woken) Activate(items_.at(o.key));
}

absl::StatusOr<CycleStats> SchedulingQueue::RunCycle(MonoTime now, const AttemptFn& attempt,
                                                     const ParkedFn& on_parked) {
  ledger_.AdvanceTo(now);
  BeginCycle();
  CycleStats stats;
  while (std::optional<Popped> p = Pop(now)) {
    if (!p->attempt) {
      ++(p->over_quota ? stats.over_quota : stats.parked_by_shape);
      if (on_parked) on_parked(p->item, p->reason);
      continue;
    }
    const uint64_t generation = generation_;
    const uint64_t quota_generation = ledger_.generation(p->item.tenant);
    ++stats.attempted;
    absl::StatusOr<AttemptOutcome> outcome = attempt(p->item);
    auto it = items_.find(p->item.key);
    // Removed by the attempt, or removed and added again (then it is not in flight): nothing to apply.
    if (it == items_.end() || it->second.state != QueueState::kInFlight) continue;
    if (!outcome.ok()) {
      --in_flight_;
      Activate(it->second);
      return outcome.status();
    }
    switch (outcome->kind) {
      case AttemptOutcome::Kind::kPlaced:
        ++stats.placed;
        --in_flight_;
        items_.erase(it);
        break;
      case AttemptOutcome::Kind::kDropped:
        ++stats.dropped;
        --in_flight_;
        items_.erase(it);
        break;
      case AttemptOutcome::Kind::kUnschedulable:
        ++stats.unschedulable;
        // Cannot fail: the item is in flight and the generation was read from this queue.
        (void)Unschedulable(p->item.key, generation, std::move(outcome->reason));
        break;
      case AttemptOutcome::Kind::kError:
        ++stats.errors;
        (void)Backoff(p->item.key, now, std::move(outcome->reason));
        break;
      case AttemptOutcome::Kind::kOverQuota:
        ++stats.over_quota;
        --in_flight_;
        it->second.errors = 0;
        if (ledger_.generation(p->item.tenant) != quota_generation) {
          // Its tenant released something during the attempt: there may be room now.
          it->second.reason = std::move(outcome->reason);
          Activate(it->second);
        } else {
          ParkOverQuota(it->second, std::move(outcome->reason), quota_generation);
        }
        break;
    }
  }
  return stats;
}

std::string SchedulingQueue::Reason(const std::string& key) const {
  auto it = items_.find(key);
  return it == items_.end() ? "" : it->second.reason;
}

std::optional<QueueState> SchedulingQueue::State(const std::string& key) const {
  auto it = items_.find(key);
  if (it == items_.end()) return std::nullopt;
  return it->second.state;
}

size_t SchedulingQueue::waiting_size(std::string_view tenant) const {
  size_t n = 0;
  for (const auto& [key, e] : items_) n += e.item.tenant == tenant && e.state != QueueState::kInFlight;
  return n;
}

std::optional<MonoTime> SchedulingQueue::NextBackoffExpiry() const {
  if (backoff_.empty()) return std::nullopt;
  return std::get<0>(*backoff_.begin());
}

void SchedulingQueue::Unlink(Entry& e) {
  const Order o = OrderOf(e.item);
  switch (e.state) {
    case QueueState::kActive:
      if (e.deferred) {
        deferred_.erase(o);
        e.deferred = false;
      } else {
        auto t = active_.find(e.item.tenant);
        t->second.erase(o);
        --active_count_;
        if (t->second.empty()) active_.erase(t);
      }
      break;
    case QueueState::kInFlight:
      --in_flight_;
      break;
    case QueueState::kParked:
      parked_.erase(o);
      break;
    case QueueState::kBackoff:
      backoff_.erase({e.backoff_until, o});
      break;
    case QueueState::kOverQuota: {
      auto t = over_quota_.find(e.item.tenant);
      t->second.items.erase(o);
      --over_quota_size_;
      if (t->second.items.empty()) over_quota_.erase(t);
      break;
    }
  }
}

void SchedulingQueue::Activate(Entry& e) {
  e.state = QueueState::kActive;
  e.deferred = e.attempted_cycle == cycle_;
  if (e.deferred) {
    deferred_.insert(OrderOf(e.item));
  } else {
    active_[e.item.tenant].insert(OrderOf(e.item));
    ++active_count_;
  }
}

void SchedulingQueue::ParkOverQuota(Entry& e, std::string reason, uint64_t generation) {
  e.state = QueueState::kOverQuota;
  e.reason = std::move(reason);
  e.quota_generation = generation;
  auto [it, inserted] = over_quota_.try_emplace(e.item.tenant);
  // The set wakes when the tenant's generation moves past the oldest of its items'.
  if (inserted || e.quota_generation < it->second.generation) it->second.generation = e.quota_generation;
  it->second.items.insert(OrderOf(e.item));
  ++over_quota_size_;
}

}  // namespace gpugeek::sched
