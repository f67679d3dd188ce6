#pragma once
// Offers: what can be rented now, at what price (`gpugeek offers`, GET /v1/offers) - like `dstack offer`
// or `sky show-gpus`, but of this pool's own nodes: one row per (GPU model, capacity type, region,
// provider, price), with its ready nodes, their GPUs, the GPUs wholly free now and the most free on one
// node (the largest single-node job that fits now). Nodes reserved to other tenants (label
// sched::kReservedForLabel, or held by another tenant's reservation) are not offered to the caller; nodes its
// own reservation holds (reservations.h) show as capacity type "reserved" at price 0 (already paid for; an
// admin sees their price); suspect, cordoned, blocked and down nodes are not offered.
//
// Pure: computed from one published snapshot (state/snapshot.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controlplane/state/snapshot.h"

namespace gpugeek::controlplane {

struct Offer {
  std::string gpu_model;                  // catalog id
  std::string capacity_type;              // "on-demand" | "spot" | "reserved"
  std::string region;                     // "" = none
  std::string provider;                   // the nodes' provider (their join token's); "" = the platform's own
  int64_t price_micros_per_gpu_hour = 0;  // 0 = not priced
  int64_t min_rental_s = 0;               // the shortest rental charged (api::Registration); 0 = per second
  int nodes = 0;
  int gpus = 0;
  int gpus_free = 0;  // GPUs with nothing placed on them
  int max_gpus_free_on_node = 0;
  bool operator==(const Offer&) const = default;
};

struct OfferFilter {
  std::string gpu;                           // "" = any; else a case-insensitive substring of the model id
  std::optional<std::string> capacity_type;  // "spot", "on-demand", "reserved"
  std::string region;                        // "" = any
  int min_gpus_free = 0;                     // only rows with at least this many on one node
  std::string tenant;                        // the caller: nodes reserved to other tenants are left out
  bool admin = false;                        // an admin sees every node
};

// Rows sorted by price (unpriced last), then model, capacity type, region, provider.
std::vector<Offer> Offers(const Snapshot& snap, const OfferFilter& filter);

}  // namespace gpugeek::controlplane
