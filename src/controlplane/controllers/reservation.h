#pragma once
// ReservationController: holds, charges and reports reserved capacity (reservations.h) each pass.
//
// For every reservation: (1) each hour of its term that has closed is charged, once, for the GPUs its nodes
// held at that moment (a node down then is not), "reservation/RSV/hN/NODE" at hour end, and the hours charged
// are stored in the same pass transaction, so a SIGKILL neither skips nor repeats one; (2) within the term it
// keeps whole nodes of its GPU model holding exactly its GPUs where the pool allows: held nodes that left the
// pool (removed, down, cordoned) are dropped, and free ones added, on-demand nodes only, those least used by
// other tenants first, then larger, then by name; outside the term it holds none. State::reserved follows, and
// the scheduler's pool is rebuilt when it changes. (3) A running member whose open segment is priced under a
// reservation its node no longer has for the job's tenant, or that now runs on a node its tenant reserves, has
// its segment ended and a new one begun (controllers/metering.h): the price changes at the boundary.
// (4) The open segments on held nodes are counted as used so far (Reservations::SetOpenUsed).

#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

class ReservationController {
 public:
  void Reconcile(ControllerContext& ctx, MonoTime now);
};

}  // namespace gpugeek::controlplane
