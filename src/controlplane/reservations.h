#pragma once
// Reserved capacity: `gpus` GPUs of one model held for a tenant on whole nodes for a term, at a price per
// GPU-hour agreed with the operator (`gpugeek reservation create --tenant team-a --gpu nvidia-h100-80gb
// --gpus 16 --days 365 --price 1.20`), like a cloud's reserved instances or a Slurm reservation.
//
// Holding. From the term's start the reservation controller (controllers/reservation.h) picks whole
// on-demand nodes of the model (free ones first) until they hold exactly `gpus` GPUs, and the scheduler sees
// them as reserved for the tenant (sched::kReservedForLabel, and kReservationLabel naming the reservation):
// nobody else is placed there, and the tenant's jobs try them first (controllers/scheduling.h). A held node
// that goes down is replaced by another when one is free. Work of others already running on a node it
// takes runs on to its end.
//
// Money. Each hour of the term is charged at its close (the last, partial one prorated) for the GPUs held
// then ("reservation/RSV/hN/NODE", capacity type "reserved", paid to the node's provider less the platform's
// fee), used or not: the tenant's segments on held nodes cost nothing more (usage.h, capacity "reserved").
// A node down at an hour's close is not charged for it.
//
// Report. GPU time reserved (the term so far x gpus), held (charged), used (the tenant's metered segments on
// held nodes, open ones included) and unused (held - used): `gpugeek reservations`, GET /v1/reservations.
//
// Kept in the store (store::ReservationRecord): the operator's columns (the term; a cancel ends it now) and
// the writer's (nodes, hours charged, GPU time) apart. Store first, then memory; no lock across the store.
// Time: the term on the wall clock (TimePoint). Thread-safety: every method may be called concurrently.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "store/store.h"

namespace gpugeek::controlplane {

// The node label the scheduler sees on a node a reservation holds: the reservation's id.
inline constexpr char kReservationLabel[] = "reservation";
// The longest term: three years and a day (reserved terms are sold for one or three years).
inline constexpr Duration kMaxReservationTerm = std::chrono::hours(24 * (3 * 365 + 1));

class Reservations {
 public:
  // Loads every stored reservation. Errors: the store's.
  static absl::StatusOr<std::unique_ptr<Reservations>> Open(store::Store& store, Clock& clock);
  absl::Status Reload();

  // Stores a new reservation (its id, "rsv-NNNNNNNN", and created_at set here; the writer's columns
  // cleared). InvalidArgument naming the field: tenant and gpu_model non-empty, gpus 1..100000,
  // price_micros >= 1 per GPU-hour with gpus x hours x price <= 10^15 (ledger::kMaxPostingMicros), a start
  // from now (a minute's slack) to kMaxReservationTerm ahead, a term of 1 h to kMaxReservationTerm.
  absl::StatusOr<store::ReservationRecord> Create(store::ReservationRecord r);
  // Ends the term of `id` now (or leaves it, when it ended before; one not begun ends at its start, charged
  // nothing): charged up to now, its nodes given back by the next pass. NotFound for an unknown id.
  absl::StatusOr<store::ReservationRecord> Cancel(const std::string& id);
  // Every reservation of `tenant` ("" = every tenant's), by id.
  std::vector<store::ReservationRecord> List(const std::string& tenant) const;
  std::optional<store::ReservationRecord> Find(const std::string& id) const;

  // Writer's pass: stores the writer's columns of `r` (nodes, charged_hours, held and used GPU time).
  absl::Status SetProgress(const store::ReservationRecord& r);
  // Writer's pass: adds a metered segment's milli-GPU-seconds on a node `id` held to its used GPU time.
  absl::Status AddUsed(const std::string& id, int64_t gpu_milli_seconds);
  // Writer's pass: the open segments' milli-GPU-seconds on held nodes now, by reservation id (memory only).
  void SetOpenUsed(std::map<std::string, int64_t> open);
  int64_t OpenUsed(const std::string& id) const;

 private:
  Reservations(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}
  store::Store& store_;
  Clock& clock_;
  mutable Mutex mu_;
  std::vector<store::ReservationRecord> reservations_ ABSL_GUARDED_BY(mu_);  // by id
  std::map<std::string, int64_t> open_used_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;  // taken before the store write: a failed one leaves a gap
};

}  // namespace gpugeek::controlplane
