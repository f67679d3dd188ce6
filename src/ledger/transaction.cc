#include "ledger/transaction.h"

#include <array>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace gpugeek::ledger {
namespace {

constexpr std::array<std::pair<Kind, std::string_view>, 6> kKinds = {{{Kind::kGrant, "grant"},
                                                                      {Kind::kTopUp, "top-up"},
                                                                      {Kind::kCharge, "charge"},
                                                                      {Kind::kRefund, "refund"},
                                                                      {Kind::kPayout, "payout"},
                                                                      {Kind::kExpire, "expire"}}};

bool PrintableToken(std::string_view s) {
  for (char c : s) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

int64_t ToMs(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
TimePoint FromMs(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

// An integer that fits int64 (an unsigned JSON number above 2^63 - 1 does not: it would wrap).
bool GetInt64(const nlohmann::json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  } else if (!v.is_number_integer()) {
    return false;
  }
  out = v.get<int64_t>();
  return true;
}

}  // namespace

std::string_view KindName(Kind kind) {
  for (const auto& [k, name] : kKinds) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<Kind> KindFromName(std::string_view name) {
  for (const auto& [k, n] : kKinds) {
    if (n == name) return k;
  }
  return std::nullopt;
}

absl::Status Validate(const Transaction& txn) {
  if (txn.id.empty() || txn.id.size() > kMaxIdBytes || !PrintableToken(txn.id)) {
    return absl::InvalidArgumentError(fmt::format(
        "ledger: transaction id '{}' must be 1..{} printable characters without spaces", txn.id, kMaxIdBytes));
  }
  if (txn.postings.size() < 2 || txn.postings.size() > kMaxPostings) {
    return absl::InvalidArgumentError(fmt::format("ledger: transaction {} has {} postings; it needs 2..{}", txn.id,
                                                  txn.postings.size(), kMaxPostings));
  }
  if (txn.memo.size() > kMaxMemoBytes) {
    return absl::InvalidArgumentError(fmt::format("ledger: transaction {}: memo over {} bytes", txn.id, kMaxMemoBytes));
  }
  if (txn.carry < 0 || txn.carry >= kProrateDenominator || txn.gpu_milli_seconds < 0 || txn.on_demand_micros < 0 ||
      txn.on_demand_micros > kMaxPostingMicros || txn.idle_gpu_milli_seconds < 0 ||
      txn.idle_gpu_milli_seconds > txn.gpu_milli_seconds || txn.requests < 0 || txn.tokens < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "ledger: transaction {}: carry, gpu_milli_seconds, idle_gpu_milli_seconds, requests or tokens out of range",
        txn.id));
  }
  std::set<std::string_view> accounts;
  int64_t sum = 0;  // |amount| <= 10^15 and at most 64 postings: no overflow
  for (const Posting& p : txn.postings) {
    if (p.account.empty() || p.account.size() > kMaxAccountBytes || !PrintableToken(p.account) ||
        p.account.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("ledger: transaction {}: account '{}' must be 'kind:name...' (printable, at most {} bytes)",
                      txn.id, p.account, kMaxAccountBytes));
    }
    if (!accounts.insert(p.account).second) {
      return absl::InvalidArgumentError(
          fmt::format("ledger: transaction {}: account {} is posted twice; merge its postings", txn.id, p.account));
    }
    if (p.amount.micros == 0 || std::llabs(p.amount.micros) > kMaxPostingMicros) {
      return absl::InvalidArgumentError(fmt::format(
          "ledger: transaction {}: posting to {} of {} micro-units; it must be non-zero and at most {} in size", txn.id,
          p.account, p.amount.micros, kMaxPostingMicros));
    }
    sum += p.amount.micros;
  }
  if (sum != 0) {
    return absl::InvalidArgumentError(
        fmt::format("ledger: transaction {}: postings sum to {} micro-units, not 0 (double entry)", txn.id, sum));
  }
  return absl::OkStatus();
}

std::string ToText(const Transaction& txn) {
  nlohmann::json postings = nlohmann::json::array();
  for (const Posting& p : txn.postings) postings.push_back(nlohmann::json::array({p.account, p.amount.micros}));
  nlohmann::json j = {{"id", txn.id},   {"kind", KindName(txn.kind)}, {"at_ms", ToMs(txn.at)}, {"tenant", txn.tenant},
                      {"job", txn.job}, {"memo", txn.memo},           {"postings", postings}};
  if (!txn.user.empty()) j["user"] = txn.user;
  if (txn.expires_at) j["expires_at_ms"] = ToMs(*txn.expires_at);
  if (txn.carry != 0) j["carry"] = txn.carry;
  if (txn.gpu_milli_seconds != 0) j["gpu_milli_seconds"] = txn.gpu_milli_seconds;
  if (txn.on_demand_micros != 0) j["on_demand_micros"] = txn.on_demand_micros;
  if (txn.idle_gpu_milli_seconds != 0) j["idle_gpu_milli_seconds"] = txn.idle_gpu_milli_seconds;
  if (!txn.gpu_model.empty()) j["gpu_model"] = txn.gpu_model;
  if (!txn.capacity_type.empty()) j["capacity_type"] = txn.capacity_type;
  if (txn.requests != 0) j["requests"] = txn.requests;
  if (txn.tokens != 0) j["tokens"] = txn.tokens;
  return j.dump();
}

absl::StatusOr<Transaction> FromText(std::string_view text) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(text, {.max_bytes = 64 * 1024, .max_depth = 4});
  if (!parsed.ok()) return absl::DataLossError("ledger: stored transaction: " + std::string(parsed.status().message()));
  const nlohmann::json& j = *parsed;
  const auto bad = [](std::string_view what) {
    return absl::DataLossError(fmt::format("ledger: stored transaction: {}", what));
  };
  if (!j.is_object()) return bad("not a JSON object");
  const auto string_field = [&](const char* key, std::string& out) -> bool {
    auto it = j.find(key);
    if (it == j.end()) return true;
    if (!it->is_string()) return false;
    out = it->get<std::string>();
    return true;
  };
  const auto int_field = [&](const char* key, int64_t& out) -> bool {
    auto it = j.find(key);
    if (it == j.end()) return true;
    return GetInt64(*it, out);
  };
  Transaction txn;
  std::string kind;
  int64_t at_ms = 0;
  if (!string_field("id", txn.id) || !string_field("kind", kind) || !string_field("tenant", txn.tenant) ||
      !string_field("job", txn.job) || !string_field("user", txn.user) || !string_field("memo", txn.memo) ||
      !string_field("gpu_model", txn.gpu_model) || !string_field("capacity_type", txn.capacity_type) ||
      !int_field("at_ms", at_ms) || !int_field("carry", txn.carry) ||
      !int_field("gpu_milli_seconds", txn.gpu_milli_seconds) || !int_field("on_demand_micros", txn.on_demand_micros) ||
      !int_field("idle_gpu_milli_seconds", txn.idle_gpu_milli_seconds) || !int_field("requests", txn.requests) ||
      !int_field("tokens", txn.tokens)) {
    return bad("a field has the wrong type");
  }
  std::optional<Kind> k = KindFromName(kind);
  if (!k) return bad("unknown kind '" + kind + "'");
  txn.kind = *k;
  // TimePoint counts nanoseconds in 64 bits: times past the year 2255 do not fit.
  constexpr int64_t kMaxMs = 9'000'000'000'000;
  if (at_ms < 0 || at_ms > kMaxMs) return bad("at_ms out of range");
  txn.at = FromMs(at_ms);
  if (auto it = j.find("expires_at_ms"); it != j.end()) {
    int64_t ms = 0;
    if (!GetInt64(*it, ms) || ms < 0 || ms > kMaxMs) return bad("expires_at_ms is not a time");
    txn.expires_at = FromMs(ms);
  }
  auto postings = j.find("postings");
  if (postings == j.end() || !postings->is_array()) return bad("postings is not an array");
  for (const nlohmann::json& p : *postings) {
    int64_t micros = 0;
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !GetInt64(p[1], micros)) {
      return bad("a posting is not [account, micros]");
    }
    txn.postings.push_back({p[0].get<std::string>(), Money::Micros(micros)});
  }
  if (absl::Status st = Validate(txn); !st.ok()) return bad(std::string(st.message()));
  return txn;
}

}  // namespace gpugeek::ledger
