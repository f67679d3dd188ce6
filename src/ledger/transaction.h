#pragma once
// A ledger transaction: a set of postings to named accounts that sum to zero (double entry), with an
// id that makes posting it idempotent.
//
// Accounts (wallet.h names them): "tenant:T:cash", "tenant:T:credit:GRANT", "provider:P:payable",
// "platform:fees", "platform:grants", "platform:refunds", "external:topups", "external:payouts". A
// posting's amount is signed: money moves from the accounts posted negative to those posted positive,
// and an account's balance is the sum of its postings. So every balance a tenant or provider holds is
// positive, the platform's and the outside world's sources are negative, and all balances sum to zero.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "ledger/money.h"

namespace gpugeek::ledger {

struct Posting {
  std::string account;
  Money amount;
  bool operator==(const Posting&) const = default;
};

// What a transaction records; the name is its JSON "kind".
enum class Kind { kGrant, kTopUp, kCharge, kRefund, kPayout, kExpire };
std::string_view KindName(Kind kind);
std::optional<Kind> KindFromName(std::string_view name);

struct Transaction {
  // Unique; the same id posted twice is the same transaction (an idempotency key), e.g.
  // "usage/j-00000042/e3/r0" for the charge of member 0 of a job's third placement.
  std::string id;
  Kind kind = Kind::kCharge;
  TimePoint at;        // wall clock, when it was posted (for bills by period)
  std::string tenant;  // the tenant it concerns, "" for a provider's payout
  std::string job;     // the job a charge or refund is for, else ""
  std::string user;    // who submitted that job ("" = none known): whose budget it counts against
  std::string memo;    // free text for people ("trial credit", "GPU time on node n1 (spot)")
  std::vector<Posting> postings;
  // A grant: when the credit account it opens expires (then Expire takes back what is left).
  std::optional<TimePoint> expires_at;
  // A charge: the payer's sub-micro remainder after it (money.h Prorate), carried to its next charge.
  int64_t carry = 0;
  // A charge: what was metered, for bills (milli-GPU x seconds, the GPU model and capacity type).
  int64_t gpu_milli_seconds = 0;
  // A charge: what the same GPU time costs at the on-demand reference price (controlplane/usage.h), so the
  // cost report can say what spot saved. 0 when not known.
  int64_t on_demand_micros = 0;
  // A charge: how much of gpu_milli_seconds its GPUs sat idle while allocated (controlplane/controllers/
  // metering.h), so the cost report can say what idle GPUs cost. 0..gpu_milli_seconds.
  int64_t idle_gpu_milli_seconds = 0;
  std::string gpu_model;
  std::string capacity_type;
  // A charge for a service's requests (wallet.h ChargeRequests; capacity_type "serverless"): how many requests,
  // and tokens, it is for.
  int64_t requests = 0;
  int64_t tokens = 0;
  bool operator==(const Transaction&) const = default;
};

// Limits on what a transaction may hold (stored rows are read back under the same limits).
inline constexpr size_t kMaxPostings = 64;
inline constexpr size_t kMaxIdBytes = 200;
inline constexpr size_t kMaxAccountBytes = 200;
inline constexpr size_t kMaxMemoBytes = 1000;

// OK when the transaction is well-formed: an id (1..kMaxIdBytes, printable ASCII without spaces), 2..kMaxPostings
// postings to distinct non-empty accounts (at most kMaxAccountBytes, "kind:..." form), each amount non-zero and
// |amount| <= kMaxPostingMicros, summing to exactly zero; memo at most kMaxMemoBytes. InvalidArgument
// naming the field otherwise.
absl::Status Validate(const Transaction& txn);

// The stored form: compact JSON {"id", "kind", "at_ms", "tenant", "job", "user"?, "memo", "postings": [[account,
// micros], ...], "expires_at_ms"?, "carry"?, "gpu_milli_seconds"?, "on_demand_micros"?,
// "idle_gpu_milli_seconds"?, "gpu_model"?, "capacity_type"?, "requests"?, "tokens"?}. Times
// in milliseconds since the Unix epoch.
std::string ToText(const Transaction& txn);
// DataLoss naming what is wrong for text that is not such JSON (or fails Validate); bounded (depth,
// size) like every parser of outside bytes.
absl::StatusOr<Transaction> FromText(std::string_view text);

}  // namespace gpugeek::ledger
