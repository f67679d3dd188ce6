#include "controlplane/reservations.h"

#include <algorithm>

#include <fmt/format.h>

#include "absl/numeric/int128.h"
#include "absl/strings/numbers.h"
#include "common/status_macros.h"
#include "ledger/money.h"

namespace gpugeek::controlplane {

absl::StatusOr<std::unique_ptr<Reservations>> Reservations::Open(store::Store& store, Clock& clock) {
  auto reservations = std::unique_ptr<Reservations>(new Reservations(store, clock));
  RETURN_IF_ERROR(reservations->Reload());
  return reservations;
}

absl::Status Reservations::Reload() {
  ASSIGN_OR_RETURN(std::vector<store::ReservationRecord> stored, store_.ListReservations());
  int64_t next = 1;
  for (const store::ReservationRecord& r : stored) {
    int64_t n = 0;
    if (r.id.size() > 4 && absl::SimpleAtoi(r.id.substr(4), &n)) next = std::max(next, n + 1);
  }
  MutexLock lock(&mu_);
  reservations_ = std::move(stored);
  next_id_ = std::max(next_id_, next);
  open_used_.clear();
  return absl::OkStatus();
}

absl::StatusOr<store::ReservationRecord> Reservations::Create(store::ReservationRecord r) {
  const TimePoint now = clock_.Now();
  if (r.tenant.empty()) return absl::InvalidArgumentError("tenant: name the tenant the capacity is reserved for");
  if (r.gpu_model.empty()) {
    return absl::InvalidArgumentError("gpu_model: name the GPU model to reserve, e.g. nvidia-h100-80gb");
  }
  if (r.gpus < 1 || r.gpus > 100'000) return absl::InvalidArgumentError("gpus: must be 1..100000");
  if (r.price_micros < 1 || r.price_micros > ledger::kMaxPostingMicros) {
    return absl::InvalidArgumentError("price: per GPU-hour, above 0 and at most 1000000000.00");
  }
  if (r.start < now - std::chrono::minutes(1) || r.start > now + kMaxReservationTerm) {
    return absl::InvalidArgumentError("start: from now to 3 years and a day ahead");
  }
  if (r.end - r.start < std::chrono::hours(1) || r.end - r.start > kMaxReservationTerm) {
    return absl::InvalidArgumentError("term: from 1 hour to 3 years and a day (end after start)");
  }
  // The whole term's cost is one amount the ledger can post (so is every hour's charge, and the report's sum).
  const int64_t term_hours = std::chrono::ceil<std::chrono::hours>(r.end - r.start).count();
  if (absl::int128(r.price_micros) * r.gpus * term_hours > ledger::kMaxPostingMicros) {
    return absl::InvalidArgumentError("price: gpus x hours x price must be at most 1000000000.00");
  }
  r.created_at = now;
  r.nodes.clear();
  r.charged_hours = 0;
  r.held_gpu_milli_seconds = 0;
  r.used_gpu_milli_seconds = 0;
  {
    MutexLock lock(&mu_);
    r.id = fmt::format("rsv-{:08d}", next_id_++);
  }
  RETURN_IF_ERROR(store_.InsertReservation(r));
  MutexLock lock(&mu_);
  auto it = std::lower_bound(reservations_.begin(), reservations_.end(), r.id,
                             [](const store::ReservationRecord& a, const std::string& id) { return a.id < id; });
  if (it == reservations_.end() || it->id != r.id) reservations_.insert(it, r);  // a Reload may have loaded it
  return r;
}

absl::StatusOr<store::ReservationRecord> Reservations::Cancel(const std::string& id) {
  const TimePoint now = clock_.Now();
  RETURN_IF_ERROR(store_.EndReservation(id, now));
  MutexLock lock(&mu_);
  for (store::ReservationRecord& r : reservations_) {
    if (r.id != id) continue;
    r.end = std::max(std::min(r.end, now), r.start);  // as the store: a term not begun ends at its start
    return r;
  }
  return absl::NotFoundError(fmt::format("no reservation '{}'", id));
}

std::vector<store::ReservationRecord> Reservations::List(const std::string& tenant) const {
  MutexLock lock(&mu_);
  std::vector<store::ReservationRecord> out;
  for (const store::ReservationRecord& r : reservations_) {
    if (tenant.empty() || r.tenant == tenant) out.push_back(r);
  }
  return out;
}

std::optional<store::ReservationRecord> Reservations::Find(const std::string& id) const {
  MutexLock lock(&mu_);
  for (const store::ReservationRecord& r : reservations_) {
    if (r.id == id) return r;
  }
  return std::nullopt;
}

absl::Status Reservations::SetProgress(const store::ReservationRecord& r) {
  RETURN_IF_ERROR(store_.UpdateReservationProgress(r));
  MutexLock lock(&mu_);
  for (store::ReservationRecord& mine : reservations_) {
    if (mine.id != r.id) continue;
    mine.nodes = r.nodes;
    mine.charged_hours = r.charged_hours;
    mine.held_gpu_milli_seconds = r.held_gpu_milli_seconds;
    mine.used_gpu_milli_seconds = r.used_gpu_milli_seconds;
  }
  return absl::OkStatus();
}

absl::Status Reservations::AddUsed(const std::string& id, int64_t gpu_milli_seconds) {
  std::optional<store::ReservationRecord> r = Find(id);
  if (!r) return absl::NotFoundError(fmt::format("no reservation '{}'", id));
  r->used_gpu_milli_seconds += std::max<int64_t>(0, gpu_milli_seconds);
  return SetProgress(*r);
}

void Reservations::SetOpenUsed(std::map<std::string, int64_t> open) {
  MutexLock lock(&mu_);
  open_used_ = std::move(open);
}

int64_t Reservations::OpenUsed(const std::string& id) const {
  MutexLock lock(&mu_);
  auto it = open_used_.find(id);
  return it == open_used_.end() ? 0 : it->second;
}

}  // namespace gpugeek::controlplane
