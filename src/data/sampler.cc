#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include <fmt/format.h>

namespace gpugeek::data {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15;  // 2^64 / golden ratio, splitmix64's increment

template <typename T>
void FisherYates(std::vector<T>& v, SplitMix64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const uint64_t j = rng.Bounded(i);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::Next() { return Mix64(state_ += kGolden); }

uint64_t SplitMix64::Bounded(uint64_t bound) {
  // (2^64 - bound) mod bound, computed in 64 bits: the draws below it are the incomplete last block.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = Next();
    if (r >= threshold) return r % bound;
  }
}

uint64_t EpochSeed(uint64_t seed, uint64_t epoch) { return Mix64(seed + kGolden * (epoch + 1)); }

std::vector<uint64_t> EpochOrder(std::span<const uint64_t> shard_records, uint64_t seed, uint64_t epoch,
                                 uint32_t window_shards) {
  const size_t shards = shard_records.size();
  std::vector<uint64_t> first(shards);
  uint64_t n = 0;
  for (size_t s = 0; s < shards; ++s) {
    first[s] = n;
    n += shard_records[s];
  }
  SplitMix64 rng(EpochSeed(seed, epoch));
  std::vector<uint64_t> shard_order(shards);
  std::iota(shard_order.begin(), shard_order.end(), uint64_t{0});
  FisherYates(shard_order, rng);
  const size_t window = std::max<uint32_t>(window_shards, 1);
  std::vector<uint64_t> order;
  order.reserve(n);
  std::vector<uint64_t> block;
  for (size_t w = 0; w < shards; w += window) {
    block.clear();
    for (size_t i = w; i < std::min(shards, w + window); ++i) {
      const uint64_t s = shard_order[i];
      for (uint64_t k = 0; k < shard_records[s]; ++k) block.push_back(first[s] + k);
    }
    FisherYates(block, rng);
    order.insert(order.end(), block.begin(), block.end());
  }
  return order;
}

std::vector<uint64_t> EpochOrder(uint64_t n, uint64_t seed, uint64_t epoch) {
  const uint64_t shard[] = {n};
  return EpochOrder(std::span<const uint64_t>(shard, n == 0 ? 0 : 1), seed, epoch, 1);
}

std::string RemainderPolicyName(RemainderPolicy policy) { return policy == RemainderPolicy::kPad ? "pad" : "drop"; }

absl::StatusOr<RemainderPolicy> ParseRemainderPolicy(std::string_view text) {
  if (text == "pad") return RemainderPolicy::kPad;
  if (text == "drop") return RemainderPolicy::kDrop;
  return absl::InvalidArgumentError(fmt::format("policy \"{}\": expected pad or drop", text));
}

uint64_t PerRankCount(uint64_t remaining, uint32_t world, RemainderPolicy policy) {
  return policy == RemainderPolicy::kPad ? remaining / world + (remaining % world != 0) : remaining / world;
}

absl::StatusOr<std::vector<RankSample>> RankSamples(std::span<const uint64_t> order, uint64_t consumed, uint32_t world,
                                                    uint32_t rank, RemainderPolicy policy) {
  if (world == 0) return absl::InvalidArgumentError("world size 0: a run has at least one rank");
  if (rank >= world)
    return absl::InvalidArgumentError(fmt::format("rank {} is not below the world size {}", rank, world));
  if (consumed > order.size()) {
    return absl::InvalidArgumentError(
        fmt::format("consumed {} is past the epoch's {} samples; was the state saved for another dataset?", consumed,
                    order.size()));
  }
  const uint64_t n = order.size(), remaining = n - consumed;
  const uint64_t count = PerRankCount(remaining, world, policy);
  std::vector<RankSample> out;
  out.reserve(count);
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t at = rank + k * world;  // position in the remainder (padded under kPad)
    if (at < remaining) {
      out.push_back({.sample = order[consumed + at], .is_padding = false});
    } else {
      // Only kPad reaches here, and only with remaining > 0 (count > 0), so n > 0.
      out.push_back({.sample = order[(at - remaining) % n], .is_padding = true});
    }
  }
  return out;
}

SamplerState SamplerState::Advanced(uint64_t per_rank, uint32_t world, uint64_t n) const {
  SamplerState next = *this;
  const uint64_t left = n - std::min(consumed, n);
  next.consumed = (per_rank != 0 && left / per_rank < world) ? n : consumed + per_rank * world;
  return next;
}

nlohmann::json SamplerStateToJson(const SamplerState& state) {
  return {{"seed", state.seed}, {"epoch", state.epoch}, {"consumed", state.consumed}};
}

absl::StatusOr<SamplerState> SamplerStateFromJson(const nlohmann::json& j, uint64_t n) {
  if (!j.is_object()) return absl::InvalidArgumentError("sampler state: not a JSON object");
  for (const auto& item : j.items()) {
    if (item.key() != "seed" && item.key() != "epoch" && item.key() != "consumed") {
      return absl::InvalidArgumentError(
          fmt::format("sampler state: {}: unknown key; expected seed, epoch and consumed", item.key()));
    }
  }
  SamplerState state;
  for (auto [key, field] :
       {std::pair{"seed", &state.seed}, std::pair{"epoch", &state.epoch}, std::pair{"consumed", &state.consumed}}) {
    auto it = j.find(key);
    if (it == j.end()) return absl::InvalidArgumentError(fmt::format("sampler state: {}: missing", key));
    if (!it->is_number_unsigned()) {
      return absl::InvalidArgumentError(
          fmt::format("sampler state: {}: {} is not a non-negative integer", key, it->dump()));
    }
    *field = it->get<uint64_t>();
  }
  if (state.consumed > n) {
    return absl::InvalidArgumentError(fmt::format(
        "sampler state: consumed: {} is past the epoch's {} samples; was the state saved for another dataset?",
        state.consumed, n));
  }
  return state;
}

}  // namespace gpugeek::data
