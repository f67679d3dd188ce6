#include "data/sampler.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::data {
namespace {

using ::testing::ElementsAre;

constexpr RemainderPolicy kPolicies[] = {RemainderPolicy::kDrop, RemainderPolicy::kPad};
// Sample counts for the properties: empty, single, below and above world sizes, primes, powers of two.
constexpr uint64_t kSizes[] = {0, 1, 2, 3, 5, 7, 13, 31, 63, 64, 65, 97, 128, 130, 257};

std::vector<std::vector<RankSample>> AllRanks(const std::vector<uint64_t>& order, uint64_t consumed, uint32_t world,
                                              RemainderPolicy policy) {
  std::vector<std::vector<RankSample>> out;
  for (uint32_t r = 0; r < world; ++r) {
    absl::StatusOr<std::vector<RankSample>> s = RankSamples(order, consumed, world, r, policy);
    EXPECT_TRUE(s.ok()) << s.status();
    out.push_back(s.ok() ? *s : std::vector<RankSample>{});
  }
  return out;
}

TEST(SplitMix64Test, MatchesTheReferenceOutputs) {
  // Vigna's splitmix64.c from state 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xE220A8397B1DCDAFu);
  EXPECT_EQ(rng.Next(), 0x6E789E6AA1B965F4u);
  EXPECT_EQ(rng.Next(), 0x06C45D188009454Fu);
  EXPECT_EQ(EpochSeed(0, 0), 0xE220A8397B1DCDAFu);  // Mix64(0 + golden * 1): the first output from state 0
  EXPECT_EQ(EpochSeed(42, 7), 0xCCF635EE9E9E2FA4u);
}

TEST(SplitMix64Test, BoundedDrawsArePinnedAndInRange) {
  SplitMix64 rng(1);
  std::vector<uint64_t> draws;
  for (int i = 0; i < 8; ++i) draws.push_back(rng.Bounded(7));
  EXPECT_THAT(draws, ElementsAre(2, 0, 1, 0, 5, 2, 0, 3));
  SplitMix64 big(5);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(big.Bounded(0x8000000000000001u), 0x8000000000000001u);
  EXPECT_EQ(big.Bounded(1), 0u);
}

TEST(EpochOrderTest, PinnedPermutations) {
  // Computed independently by examples/gpt/gpugeek_data.py; a change of PRNG or shuffle breaks these.
  EXPECT_THAT(EpochOrder(10, 42, 0), ElementsAre(4, 6, 7, 0, 9, 5, 1, 2, 3, 8));
  EXPECT_THAT(EpochOrder(10, 42, 1), ElementsAre(5, 7, 3, 1, 8, 2, 9, 4, 0, 6));
  EXPECT_THAT(EpochOrder(10, 7, 0), ElementsAre(7, 6, 9, 2, 8, 4, 0, 3, 5, 1));
  // Shards of 3, 2, 4, 1, 5 records, windows of 2 shards: shards 4 and 0 (8 samples), then 1 and 2, then 3.
  const std::vector<uint64_t> shards = {3, 2, 4, 1, 5};
  EXPECT_THAT(EpochOrder(shards, 42, 0, 2), ElementsAre(14, 1, 0, 13, 2, 12, 10, 11, 4, 8, 6, 3, 5, 7, 9));
  EXPECT_TRUE(EpochOrder(0, 1, 0).empty());
  EXPECT_THAT(EpochOrder(1, 1, 0), ElementsAre(0));
}

TEST(EpochOrderTest, SameSeedAndEpochSameOrderOtherEpochOther) {
  for (uint64_t n : {2u, 13u, 257u, 1000u}) {
    const std::vector<uint64_t> a = EpochOrder(n, 9, 3);
    EXPECT_EQ(a, EpochOrder(n, 9, 3));
    std::vector<uint64_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> iota(n);
    std::iota(iota.begin(), iota.end(), uint64_t{0});
    EXPECT_EQ(sorted, iota) << "not a permutation of 0.." << n - 1;
    if (n >= 13) {  // 2 samples have 2 orders: a collision is likely, not a bug
      EXPECT_NE(a, EpochOrder(n, 9, 4));
      EXPECT_NE(a, EpochOrder(n, 10, 3));
    }
  }
}

TEST(EpochOrderTest, ShardAwareOrderKeepsWindowsTogether) {
  const std::vector<uint64_t> shards = {5, 1, 8, 3, 3, 7, 2};
  std::vector<uint64_t> shard_of;
  for (size_t s = 0; s < shards.size(); ++s) shard_of.insert(shard_of.end(), shards[s], s);
  for (uint64_t epoch = 0; epoch < 5; ++epoch) {
    // Window 1: each shard is read start to end before the next, in a shuffled shard order.
    const std::vector<uint64_t> one = EpochOrder(shards, 3, epoch, 1);
    ASSERT_EQ(one.size(), shard_of.size());
    std::vector<uint64_t> runs;
    for (uint64_t sample : one) {
      if (runs.empty() || runs.back() != shard_of[sample]) runs.push_back(shard_of[sample]);
    }
    EXPECT_EQ(runs.size(), shards.size()) << "a shard's samples are split in epoch " << epoch;
    // Window 3: the first 3 shards met make up the first block, exactly.
    const std::vector<uint64_t> three = EpochOrder(shards, 3, epoch, 3);
    std::set<uint64_t> first_window;
    uint64_t block = 0;
    for (size_t p = 0; p < three.size() && first_window.size() < 3; ++p) first_window.insert(shard_of[three[p]]);
    for (uint64_t s : first_window) block += shards[s];
    for (size_t p = 0; p < block; ++p) EXPECT_TRUE(first_window.contains(shard_of[three[p]]));
  }
  // window_shards >= shard count and 0 (as 1) are accepted.
  EXPECT_EQ(EpochOrder(shards, 3, 0, 100).size(), 29u);
  EXPECT_EQ(EpochOrder(shards, 3, 0, 0), EpochOrder(shards, 3, 0, 1));
}

// Per epoch, for world sizes 1..64 and many N: disjoint ranks, complete coverage, equal counts, flagged pads.
TEST(RankSamplesTest, DisjointCompleteAndEqualForWorldSizes1To64) {
  for (uint64_t n : kSizes) {
    const std::vector<uint64_t> order = EpochOrder(n, 11, 2);
    for (uint32_t world = 1; world <= 64; ++world) {
      for (RemainderPolicy policy : kPolicies) {
        SCOPED_TRACE(testing::Message() << "N=" << n << " W=" << world << " " << RemainderPolicyName(policy));
        const auto ranks = AllRanks(order, 0, world, policy);
        const uint64_t count = PerRankCount(n, world, policy);
        EXPECT_EQ(count, policy == RemainderPolicy::kPad ? (n + world - 1) / world : n / world);
        std::multiset<uint64_t> real;
        uint64_t pads = 0;
        for (const auto& rank : ranks) {
          ASSERT_EQ(rank.size(), count);
          for (const RankSample& s : rank) {
            ASSERT_LT(s.sample, n);
            if (s.is_padding) {
              ++pads;
            } else {
              real.insert(s.sample);
            }
          }
        }
        std::set<uint64_t> distinct(real.begin(), real.end());
        EXPECT_EQ(distinct.size(), real.size()) << "a sample reached two ranks, or one rank twice";
        if (policy == RemainderPolicy::kPad) {
          EXPECT_EQ(real.size(), n);
          EXPECT_EQ(pads, (world - n % world) % world);
        } else {
          EXPECT_EQ(real.size(), n - n % world);
          EXPECT_EQ(pads, 0u);
          // The dropped samples are the order's last N mod W.
          for (uint64_t p = n - n % world; p < n; ++p) EXPECT_FALSE(distinct.contains(order[p]));
        }
      }
    }
  }
}

TEST(RankSamplesTest, PadsAreFlaggedRepeatsOfTheEpochsFirstSamples) {
  // N = 10, W = 4 from consumed 3: remainder order[3:] = 0 9 5 1 2 3 8 (7 entries), one pad: order[0] = 4.
  const std::vector<uint64_t> order = EpochOrder(10, 42, 0);
  auto r1 = RankSamples(order, 3, 4, 1, RemainderPolicy::kPad);
  ASSERT_TRUE(r1.ok());
  EXPECT_THAT(*r1, ElementsAre(RankSample{9, false}, RankSample{3, false}));
  auto r3 = RankSamples(order, 3, 4, 3, RemainderPolicy::kPad);
  ASSERT_TRUE(r3.ok());
  EXPECT_THAT(*r3, ElementsAre(RankSample{1, false}, RankSample{4, true}));
  auto d3 = RankSamples(order, 3, 4, 3, RemainderPolicy::kDrop);  // 8 is dropped
  ASSERT_TRUE(d3.ok());
  EXPECT_THAT(*d3, ElementsAre(RankSample{1, false}));
  // N = 1 on 64 ranks: rank 0 has the sample, the other 63 a flagged repeat of it.
  const std::vector<uint64_t> one = {0};
  auto last = RankSamples(one, 0, 64, 63, RemainderPolicy::kPad);
  ASSERT_TRUE(last.ok());
  EXPECT_THAT(*last, ElementsAre(RankSample{0, true}));
}

TEST(RankSamplesTest, DroppedSamplesChangeFromEpochToEpoch) {
  std::set<std::vector<uint64_t>> dropped;
  for (uint64_t epoch = 0; epoch < 6; ++epoch) {
    const std::vector<uint64_t> order = EpochOrder(103, 5, epoch);
    dropped.insert({order.end() - 103 % 8, order.end()});
  }
  EXPECT_GT(dropped.size(), 1u);
}

TEST(RankSamplesTest, BadArgumentsAreErrors) {
  const std::vector<uint64_t> order = EpochOrder(5, 1, 0);
  EXPECT_EQ(RankSamples(order, 0, 0, 0, RemainderPolicy::kPad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RankSamples(order, 0, 4, 4, RemainderPolicy::kPad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RankSamples(order, 6, 4, 0, RemainderPolicy::kPad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RankSamples(order, 5, 4, 0, RemainderPolicy::kPad)->empty());
  EXPECT_FALSE(ParseRemainderPolicy("repeat").ok());
  EXPECT_EQ(*ParseRemainderPolicy("pad"), RemainderPolicy::kPad);
  EXPECT_EQ(*ParseRemainderPolicy("drop"), RemainderPolicy::kDrop);
}

// A run that stops at any step boundary and resumes from the saved state (same world size) gets exactly what
// the uninterrupted run had left; resumed with another world size, it covers the remainder exactly once.
TEST(ResumeTest, ExactMidEpochAndElastic) {
  for (uint64_t n : {0u, 1u, 7u, 31u, 64u, 97u, 130u}) {
    const std::vector<uint64_t> order = EpochOrder(n, 3, 1);
    for (uint32_t world : {1u, 2u, 3u, 8u, 13u, 64u}) {
      for (RemainderPolicy policy : kPolicies) {
        for (uint64_t per_step : {1u, 2u, 5u}) {
          SCOPED_TRACE(testing::Message()
                       << "N=" << n << " W=" << world << " b=" << per_step << " " << RemainderPolicyName(policy));
          const auto full = AllRanks(order, 0, world, policy);
          SamplerState state{.seed = 3, .epoch = 1, .consumed = 0};
          for (uint64_t taken = 0;;) {
            // Same world size: exactly the rest of each rank's uninterrupted list.
            const auto resumed = AllRanks(order, state.consumed, world, policy);
            for (uint32_t r = 0; r < world; ++r) {
              const std::vector<RankSample> rest(full[r].begin() + std::min<size_t>(taken, full[r].size()),
                                                 full[r].end());
              ASSERT_EQ(resumed[r], rest) << "rank " << r << " at consumed " << state.consumed;
            }
            // Elastic: another world size covers order[consumed:] exactly once (less the drop).
            for (uint32_t other : {1u, 5u, 16u, 63u}) {
              const uint64_t remaining = n - state.consumed;
              std::multiset<uint64_t> got;
              for (const auto& rank : AllRanks(order, state.consumed, other, policy)) {
                ASSERT_EQ(rank.size(), PerRankCount(remaining, other, policy));
                for (const RankSample& s : rank) {
                  if (!s.is_padding) got.insert(s.sample);
                }
              }
              const uint64_t kept = policy == RemainderPolicy::kPad ? remaining : remaining - remaining % other;
              const std::multiset<uint64_t> want(order.begin() + state.consumed, order.begin() + state.consumed + kept);
              ASSERT_EQ(got, want) << "elastic resume on " << other << " ranks at consumed " << state.consumed;
            }
            if (taken == full[0].size()) break;
            const uint64_t step = std::min<uint64_t>(per_step, full[0].size() - taken);  // the last may be short
            state = state.Advanced(step, world, n);
            taken += step;
          }
          EXPECT_EQ(state.consumed, full[0].empty() ? 0 : n - (policy == RemainderPolicy::kDrop ? n % world : 0));
        }
      }
    }
  }
}

TEST(SamplerStateTest, JsonRoundTripAndValidation) {
  const SamplerState s{.seed = 0xFFFFFFFFFFFFFFFFu, .epoch = 3, .consumed = 40};
  const nlohmann::json j = SamplerStateToJson(s);
  EXPECT_EQ(j.dump(), R"({"consumed":40,"epoch":3,"seed":18446744073709551615})");
  auto back = SamplerStateFromJson(j, 100);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  auto past = SamplerStateFromJson(j, 39);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(past.status().message()), testing::HasSubstr("consumed: 40 is past the epoch's 39"));
  EXPECT_THAT(
      std::string(
          SamplerStateFromJson(nlohmann::json::parse(R"({"seed":1,"epoch":-1,"consumed":0})"), 9).status().message()),
      testing::HasSubstr("epoch: -1 is not a non-negative integer"));
  EXPECT_THAT(std::string(SamplerStateFromJson(nlohmann::json::parse(R"({"seed":1,"epoch":1})"), 9).status().message()),
              testing::HasSubstr("consumed: missing"));
  EXPECT_THAT(std::string(SamplerStateFromJson(nlohmann::json::parse(R"({"seed":1,"epoch":1,"consumed":0,"x":1})"), 9)
                              .status()
                              .message()),
              testing::HasSubstr("x: unknown key"));
  EXPECT_FALSE(SamplerStateFromJson(nlohmann::json::parse(R"({"seed":1.5,"epoch":1,"consumed":0})"), 9).ok());
  EXPECT_FALSE(SamplerStateFromJson(nlohmann::json::array(), 9).ok());
}

TEST(SamplerStateTest, AdvancedCapsAtTheEpochsEnd) {
  const SamplerState s{.seed = 1, .epoch = 0, .consumed = 8};
  EXPECT_EQ(s.Advanced(2, 4, 100).consumed, 16u);
  EXPECT_EQ(s.Advanced(2, 4, 10).consumed, 10u);  // the last step's pads take nothing real
  EXPECT_EQ(s.Advanced(0, 4, 10).consumed, 8u);
}

}  // namespace
}  // namespace gpugeek::data
