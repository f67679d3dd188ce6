#include "data/chunker.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/rng.h"

namespace gpugeek::data {
namespace {

std::string RandomBytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng.Uniform(256));
  return s;
}

std::vector<std::string> Chunks(std::string_view bytes, const ChunkerOptions& o) {
  std::vector<std::string> out;
  while (!bytes.empty()) {
    const size_t n = NextChunkLength(bytes, o);
    out.emplace_back(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  return out;
}

const ChunkerOptions kSmall{.min_bytes = 1024, .normal_bytes = 4096, .max_bytes = 16384};

TEST(Chunker, ShortInputIsOneChunk) {
  EXPECT_EQ(NextChunkLength("", kSmall), 0u);
  EXPECT_EQ(NextChunkLength(std::string(1024, 'a'), kSmall), 1024u);
}

TEST(Chunker, UniformBytesAreCutAtTheMaximum) {
  // On a run of one byte value b the gear hash settles at -gear[b] (2h + g = h), whose top bits are not
  // all zero for 'a': no cut point, so max-size chunks.
  const std::vector<std::string> chunks = Chunks(std::string(40000, 'a'), kSmall);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].size(), 16384u);
  EXPECT_EQ(chunks[1].size(), 16384u);
  EXPECT_EQ(chunks[2].size(), 40000u - 2 * 16384u);
}

TEST(Chunker, SizesStayWithinBoundsAndAverageNearNormal) {
  const std::string bytes = RandomBytes(size_t{4} << 20, 7);
  const std::vector<std::string> chunks = Chunks(bytes, kSmall);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_GE(chunks[i].size(), kSmall.min_bytes);
    EXPECT_LE(chunks[i].size(), kSmall.max_bytes);
  }
  const double mean = static_cast<double>(bytes.size()) / static_cast<double>(chunks.size());
  // Normalised chunking centres sizes a little above normal_bytes (min_bytes skipped, then a 2^-14 cut
  // chance up to normal, 2^-10 after): FastCDC's Table 3 reports averages near the target.
  EXPECT_GT(mean, 0.8 * kSmall.normal_bytes);
  EXPECT_LT(mean, 1.6 * kSmall.normal_bytes);
  // Pinned: the gear table and masks are part of the store's format (chunk digests depend on them).
  EXPECT_EQ(chunks.size(), 920u);
}

TEST(Chunker, AnInsertionChangesOnlyTheChunksAroundIt) {
  const std::string before = RandomBytes(size_t{2} << 20, 11);
  std::string after = before;
  after.insert(after.size() / 2, "inserted bytes");
  const std::vector<std::string> a = Chunks(before, kSmall);
  const std::vector<std::string> b = Chunks(after, kSmall);
  const std::set<std::string> old(a.begin(), a.end());
  size_t fresh = 0;
  for (const std::string& c : b) fresh += old.contains(c) ? 0 : 1;
  // Fixed-size blocks would change every block after the insertion (about half of them).
  EXPECT_LE(fresh, 2u);
  EXPECT_GE(fresh, 1u);
}

TEST(Chunker, OptionsAreValidated) {
  EXPECT_TRUE(ValidateChunkerOptions({}).ok());
  EXPECT_TRUE(ValidateChunkerOptions(kSmall).ok());
  EXPECT_EQ(ValidateChunkerOptions({.min_bytes = 8, .normal_bytes = 64, .max_bytes = 128}).message(),
            "chunk min_bytes 8 < 64");
  EXPECT_EQ(ValidateChunkerOptions({.min_bytes = 4096, .normal_bytes = 4096, .max_bytes = 8192}).message(),
            "chunk sizes must grow: min 4096 < normal 4096 < max 8192");
  EXPECT_EQ(ValidateChunkerOptions({.min_bytes = 1024, .normal_bytes = 3000, .max_bytes = 8192}).message(),
            "chunk normal_bytes 3000 is not a power of two");
}

}  // namespace
}  // namespace gpugeek::data
