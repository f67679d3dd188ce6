#pragma once
// ReservationController: holds, charges and reports reserved capacity (reservations.h) each pass.
//
// For every reservation: (1) each hour of its term that has closed is charged, once (by id: a retried hour is
// not charged again), for the GPUs its nodes held at that moment, never more than reserved (a node suspect or
// down then is not charged), "reservation/RSV/hN/NODE" at hour end; the hours charged are stored in the same
// pass transaction, and a charge that fails leaves its hour to the next pass; (2) within the term it keeps
// whole nodes of its GPU model holding exactly its GPUs where the pool allows: held nodes that left the pool
// (removed, down, cordoned) are dropped, and free ones added, on-demand nodes only and none an operator
// reserved to other tenants, those least used by other tenants first, then larger, then by name; outside the
// term it holds none. State::reserved follows, and the scheduler's pool is rebuilt when it changes. (3) A
// running member whose open segment is priced under a reservation its node no longer has for the job's
// tenant, or that now runs on a node its tenant reserves, has its segment ended (at the term's end when that
// is why, with no minimum rental) and a new one begun (controllers/metering.h).
// (4) The open segments on held nodes are counted as used so far (Reservations::SetOpenUsed).

#include <map>
#include <string>

#include "controlplane/controllers/context.h"
#include "controlplane/reservations.h"

namespace gpugeek::controlplane {

// The nodes `reservations` in their term at `wall` hold, as stored (State::reserved after a load, before the
// first pass: so a segment begun then is priced under its reservation).
std::map<std::string, State::ReservationHold> HeldNodes(const Reservations& reservations, TimePoint wall);

class ReservationController {
 public:
  void Reconcile(ControllerContext& ctx, MonoTime now);
};

}  // namespace gpugeek::controlplane
