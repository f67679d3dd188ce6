#pragma once
// The routes of reserved capacity (reservations.h; access.h says who may call each). Amounts are integer
// micro-units ("..._micros") with the same amount as text beside them; request amounts are text ("1.20").
// GPU time in GPU-hours (milli-GPU-seconds / 3,600,000).
//
//   GET  /v1/reservations?tenant=&after=&limit=   viewer  {reservations: [Reservation], next_after}, by id; a
//        member or viewer sees its own tenant's, an admin every tenant's (or ?tenant=). A Reservation:
//        {id, tenant, gpu_model, gpus, price_micros, price (per GPU-hour), start, end, state
//        (scheduled|active|ended), created_by, created_at, nodes, charged_hours, reserved_gpu_hours (gpus x the
//        term so far), held_gpu_hours (charged), used_gpu_hours (the tenant's segments on held nodes, open
//        ones too), unused_gpu_hours (held - used), used_percent (of held), charged_micros, charged}.
//   GET  /v1/reservations/{id}                     viewer  one (404 for another tenant's)
//   POST /v1/reservations {tenant, gpu_model, gpus, price, hours, start?}   admin  201 + the Reservation;
//        start (RFC 3339) defaults to now and may not lie in the past; 409 when the pool has fewer GPUs of
//        the model on on-demand nodes than `gpus` plus what reservations overlapping the term hold.
//   POST /v1/reservations/{id}/cancel              admin   ends the term now (charged up to now)
//
// Errors: 400 naming the field; 404 for an unknown tenant or reservation.

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "http/server.h"

namespace gpugeek::controlplane {

void RegisterReservationRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts);

}  // namespace gpugeek::controlplane
