#pragma once
// Which samples each data-parallel rank reads, epoch by epoch: a deterministic global order per (seed,
// epoch), cut among ranks so that every rank gets the same count, resumable mid-epoch and elastic. Pure: no
// I/O, no threads, no clock. examples/gpt/gpugeek_data.py implements the same functions; the two agree
// exactly (examples/gpt/tests/test_gpugeek_data.py).
//
// The problem. PyTorch's DistributedSampler pads a short epoch by repeating its first indices without
// saying so, so those samples count twice in distributed validation metrics (PyTorch issues 25162, 22584);
// samplers that give ranks unequal counts hang DDP at the epoch's end (webdataset issues 188, 225). Here
// the remainder is either dropped (kDrop) or padded with entries flagged is_padding (kPad), and every rank
// gets exactly the same count.
//
// The epoch order (EpochOrder) depends only on (shard record counts, seed, epoch, window), never on the world
// size, so a run can resume with another world size (as MosaicML Streaming's elastic resumption). It is
// shard-aware: the shard order is shuffled, then the samples of each group of `window_shards` consecutive
// shards (in that shuffled order) are shuffled among themselves, so at any moment the ranks read from a few
// shards and each shard is read start to end within one window (WebDataset's sequential shard reads, with
// more mixing). With one shard, or window_shards >= the shard count, it is a uniform permutation.
//
// Randomness: splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
// 2014; the constants of Vigna's reference splitmix64.c), Fisher-Yates from the last position down
// (Knuth TAOCP vol. 2, 3.4.2 Algorithm P) with unbiased bounded draws by rejection: a 64-bit draw r is kept
// when r >= (2^64 - bound) mod bound and gives r mod bound. All arithmetic is modulo 2^64, so any language
// reproduces it. The stream of an epoch starts from state EpochSeed(seed, epoch).
//
// Rank assignment: a position (seed, epoch, consumed) means the first `consumed` entries of the epoch's
// order have been taken. The remainder order[consumed:] of R entries is cut, under the policy, to a multiple
// of the world size W (kDrop: its last R mod W entries are dropped; kPad: (W - R mod W) mod W padding
// entries are appended, pad j repeating order[j mod N]), and rank r takes the entries at positions
// r, r + W, r + 2W, ... of it. Global step k of a run with b samples per rank takes W b consecutive entries,
// so consumed after k steps is min(N, consumed0 + k W b): a single number, valid for any new world size.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace gpugeek::data {

// splitmix64: state += 0x9E3779B97F4A7C15, then the output mix of the new state.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next();
  // Uniform in [0, bound), unbiased (rejection as above). Requires bound > 0.
  uint64_t Bounded(uint64_t bound);

 private:
  uint64_t state_;
};

// splitmix64's output mix: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
// z ^= z >> 31.
uint64_t Mix64(uint64_t z);

// The initial splitmix64 state of an epoch: Mix64(seed + 0x9E3779B97F4A7C15 * (epoch + 1)) modulo 2^64.
uint64_t EpochSeed(uint64_t seed, uint64_t epoch);

inline constexpr uint32_t kDefaultWindowShards = 4;

// The epoch's order of global sample numbers 0..N-1, N = sum of shard_records (shard s holds samples
// [sum of the counts before s, + shard_records[s])). Steps, all drawing from one SplitMix64(EpochSeed):
// Fisher-Yates over the shard numbers; then for each group of window_shards consecutive shards of that
// order, their samples listed shard by shard (in the shuffled shard order, each in ascending sample order)
// and Fisher-Yates over that list; the groups' lists concatenated. window_shards = 0 counts as 1. Memory
// and time O(N).
std::vector<uint64_t> EpochOrder(std::span<const uint64_t> shard_records, uint64_t seed, uint64_t epoch,
                                 uint32_t window_shards = kDefaultWindowShards);
// A uniform permutation of 0..n-1: EpochOrder of one shard of n samples.
std::vector<uint64_t> EpochOrder(uint64_t n, uint64_t seed, uint64_t epoch);

enum class RemainderPolicy {
  kDrop,  // drop the last R mod W entries of the remainder; every entry is a distinct sample
  kPad,   // append (W - R mod W) mod W entries flagged is_padding, repeating the epoch's first samples
};

// "drop" / "pad"; ParseRemainderPolicy: InvalidArgument for other text.
std::string RemainderPolicyName(RemainderPolicy policy);
absl::StatusOr<RemainderPolicy> ParseRemainderPolicy(std::string_view text);

struct RankSample {
  uint64_t sample = 0;      // global sample (record) number
  bool is_padding = false;  // a repeat added by kPad: mask it out of losses and metrics
  bool operator==(const RankSample&) const = default;
};

// How many entries each rank gets from a remainder of `remaining` entries on `world` ranks (world > 0):
// floor(remaining / world) under kDrop, ceil(remaining / world) under kPad.
uint64_t PerRankCount(uint64_t remaining, uint32_t world, RemainderPolicy policy);

// Rank `rank`'s entries of order[consumed:] as described above, in the order it takes them; the same count
// on every rank (PerRankCount). InvalidArgument when world = 0, rank >= world, or consumed > order.size().
absl::StatusOr<std::vector<RankSample>> RankSamples(std::span<const uint64_t> order, uint64_t consumed, uint32_t world,
                                                    uint32_t rank, RemainderPolicy policy);

// Where a run stands in its data: the epoch's order is taken up to `consumed` entries.
struct SamplerState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t consumed = 0;  // entries of the epoch's order taken globally, in [0, N]
  bool operator==(const SamplerState&) const = default;

  // The state after every one of `world` ranks took `per_rank` more entries: consumed + world * per_rank,
  // capped at n (the padding of the last step takes nothing real). Does not move to the next epoch.
  SamplerState Advanced(uint64_t per_rank, uint32_t world, uint64_t n) const;
};

// {"seed": S, "epoch": E, "consumed": C}; seeds are full 64-bit unsigned integers.
nlohmann::json SamplerStateToJson(const SamplerState& state);
// InvalidArgument naming the field for a missing, unknown or non-integer (negative, fractional) field, or
// consumed > n ("consumed: 120 is past the epoch's 100 samples; was the state saved for another dataset?").
absl::StatusOr<SamplerState> SamplerStateFromJson(const nlohmann::json& j, uint64_t n);

}  // namespace gpugeek::data
