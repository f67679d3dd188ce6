#include "sched/scheduling_queue.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace gpugeek::sched {

SchedulingQueue::SchedulingQueue(SchedulingQueueOptions options) : options_(options) {}

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
  if (e.state == QueueState::kInFlight) {
    e.item = item;
    return absl::OkStatus();
  }
  Unlink(e);
  e.item = item;
  if (e.state == QueueState::kParked && !shape_changed) {
    parked_.insert(OrderOf(e.item));
  } else if (e.state == QueueState::kBackoff) {
    backoff_.emplace(e.backoff_until, OrderOf(e.item));
  } else {
    Activate(e);
  }
  return absl::OkStatus();
}

void SchedulingQueue::BeginCycle() {
  ++cycle_;
  for (const Order& o : deferred_) items_.at(o.key).deferred = false;
  active_.merge(deferred_);
  failed_shapes_.clear();
}

std::optional<SchedulingQueue::Popped> SchedulingQueue::Pop(MonoTime now) {
  while (!backoff_.empty() && std::get<0>(*backoff_.begin()) <= now) {
    Entry& e = items_.at(std::get<1>(*backoff_.begin()).key);
    backoff_.erase(backoff_.begin());
    Activate(e);
  }
  if (active_.empty()) return std::nullopt;
  auto node = active_.extract(active_.begin());
  Entry& e = items_.at(node.value().key);
  e.attempted_cycle = cycle_;
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
  // Only a failure in this cycle speaks for the rest of it (BeginCycle forgets the shapes).
  if (e.attempted_cycle == cycle_) failed_shapes_.try_emplace(e.item.shape_key, e.reason);
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

void SchedulingQueue::CapacityChanged() {
  ++generation_;
  failed_shapes_.clear();
  std::set<Order> woken;
  woken.swap(parked_);
  for (const Order& o : woken) Activate(items_.at(o.key));
}

absl::StatusOr<CycleStats> SchedulingQueue::RunCycle(MonoTime now, const AttemptFn& attempt,
                                                     const ParkedFn& on_parked) {
  BeginCycle();
  CycleStats stats;
  while (std::optional<Popped> p = Pop(now)) {
    if (!p->attempt) {
      ++stats.parked_by_shape;
      if (on_parked) on_parked(p->item, p->reason);
      continue;
    }
    const uint64_t generation = generation_;
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

std::optional<MonoTime> SchedulingQueue::NextBackoffExpiry() const {
  if (backoff_.empty()) return std::nullopt;
  return std::get<0>(*backoff_.begin());
}

void SchedulingQueue::Unlink(Entry& e) {
  const Order o = OrderOf(e.item);
  switch (e.state) {
    case QueueState::kActive:
      (e.deferred ? deferred_ : active_).erase(o);
      e.deferred = false;
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
  }
}

void SchedulingQueue::Activate(Entry& e) {
  e.state = QueueState::kActive;
  e.deferred = e.attempted_cycle == cycle_;
  (e.deferred ? deferred_ : active_).insert(OrderOf(e.item));
}

}  // namespace gpugeek::sched
