#include "data/chunker.h"

#include <array>
#include <bit>

#include <fmt/format.h>

namespace gpugeek::data {
namespace {

// The gear table: 256 fixed pseudo-random 64-bit words (splitmix64 from seed 0x6765617200000001), so cut
// points, and so digests of chunks, are the same in every build and every version of gpugeek.
constexpr std::array<uint64_t, 256> MakeGear() {
  std::array<uint64_t, 256> gear{};
  uint64_t state = 0x6765617200000001ULL;
  for (uint64_t& g : gear) {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    g = z ^ (z >> 31);
  }
  return gear;
}
constexpr std::array<uint64_t, 256> kGear = MakeGear();

// A mask of the top `bits` bits: a position is a cut when (hash & mask) == 0, probability 2^-bits.
constexpr uint64_t TopBits(int bits) { return bits <= 0 ? 0 : ~uint64_t{0} << (64 - bits); }

}  // namespace

absl::Status ValidateChunkerOptions(const ChunkerOptions& o) {
  if (o.min_bytes < 64) return absl::InvalidArgumentError(fmt::format("chunk min_bytes {} < 64", o.min_bytes));
  if (!(o.min_bytes < o.normal_bytes && o.normal_bytes < o.max_bytes)) {
    return absl::InvalidArgumentError(
        fmt::format("chunk sizes must grow: min {} < normal {} < max {}", o.min_bytes, o.normal_bytes, o.max_bytes));
  }
  if (!std::has_single_bit(o.normal_bytes)) {
    return absl::InvalidArgumentError(fmt::format("chunk normal_bytes {} is not a power of two", o.normal_bytes));
  }
  if (o.max_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(fmt::format("chunk max_bytes {} > 1 GiB", o.max_bytes));
  }
  return absl::OkStatus();
}

size_t NextChunkLength(std::string_view bytes, const ChunkerOptions& o) {
  const size_t n = bytes.size();
  if (n <= o.min_bytes) return n;
  const size_t end = n < o.max_bytes ? n : o.max_bytes;
  const size_t normal = end < o.normal_bytes ? end : o.normal_bytes;
  const int bits = std::countr_zero(o.normal_bytes);
  // Normalisation level 2: cuts are 4x less likely before the normal size and 4x more likely after it,
  // which narrows the spread of chunk sizes around normal_bytes (FastCDC section 3.3).
  const uint64_t hard = TopBits(bits + 2);
  const uint64_t easy = TopBits(bits - 2);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  uint64_t hash = 0;
  size_t i = o.min_bytes;
  for (; i < normal; ++i) {
    hash = (hash << 1) + kGear[p[i]];
    if ((hash & hard) == 0) return i + 1;
  }
  for (; i < end; ++i) {
    hash = (hash << 1) + kGear[p[i]];
    if ((hash & easy) == 0) return i + 1;
  }
  return end;
}

}  // namespace gpugeek::data
