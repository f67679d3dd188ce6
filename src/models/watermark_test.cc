#include "models/watermark.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::models {
namespace {

using ::testing::HasSubstr;

std::vector<float> Gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float& x : w) x = d(rng);
  return w;
}

// Zeroes the smallest half of |w| (magnitude pruning).
void PruneHalf(std::vector<float>& w) {
  std::vector<float> mags(w.size());
  for (size_t i = 0; i < w.size(); ++i) mags[i] = std::fabs(w[i]);
  std::nth_element(mags.begin(), mags.begin() + mags.size() / 2, mags.end());
  float cut = mags[mags.size() / 2];
  for (float& x : w) x = std::fabs(x) < cut ? 0.0f : x;
}

TEST(WatermarkTest, TheMessageIsSha256OfTheKeyInCounterMode) {
  // hashlib.sha256(b"k" + b"gpugeek-watermark/v1/b" + (0).to_bytes(8, "big") * 2), bits LSB first.
  std::vector<uint8_t> m = WatermarkMessage("k", 16);
  EXPECT_EQ(m, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1}));
  EXPECT_NE(WatermarkMessage("k2", 256), WatermarkMessage("k", 256));
}

TEST(WatermarkTest, EmbedsWithZeroErrorsAndASmallChangeAndSurvivesInt8AndPruning) {
  const int64_t rows = 256;
  const int64_t cols = 1024;
  std::vector<float> w = Gaussian(rows * cols, 1);
  WatermarkReading before = ReadWatermark("secret", w, 256);
  EXPECT_GT(before.ber, 0.35);  // an unmarked tensor reads at random
  EXPECT_LT(before.ber, 0.65);
  absl::StatusOr<EmbedResult> r = EmbedWatermark("secret", w, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->after.errors, 0);
  EXPECT_GE(r->after.min_margin, 0.5 * (1 - 1e-4));
  // Relative change about sqrt(T / n x ((s^2 + 1) Phi(s) + s phi(s))) for s = 0.5 (watermark.h): 3.19%.
  const double s = 0.5;
  const double phi = std::exp(-s * s / 2) / std::sqrt(2 * M_PI);
  const double cdf = 0.5 * std::erfc(-s / std::sqrt(2.0));
  EXPECT_NEAR(r->relative_change, std::sqrt(256.0 / (rows * cols) * ((s * s + 1) * cdf + s * phi)), 0.003);
  EXPECT_NEAR(r->after.false_match, std::pow(2.0, -256), 1e-80);  // P[Bin(256, 1/2) = 256]
  EXPECT_GT(ReadWatermark("another key", w, 256).ber, 0.35);

  QuantizedMatrix q = *QuantizeMatrix(w, rows, cols, QuantScheme::kInt8Row);
  EXPECT_EQ(ReadWatermark("secret", DequantizeMatrix(q, QuantScheme::kInt8Row), 256).errors, 0);
  QuantizedMatrix q4 = *QuantizeMatrix(w, rows, cols, QuantScheme::kInt4Block32);
  EXPECT_EQ(ReadWatermark("secret", DequantizeMatrix(q4, QuantScheme::kInt4Block32), 256).errors, 0);
  std::vector<float> pruned = w;
  PruneHalf(pruned);
  WatermarkReading after_pruning = ReadWatermark("secret", pruned, 256);
  EXPECT_LE(after_pruning.ber, 0.1);
  EXPECT_LT(after_pruning.false_match, 1e-40);
}

TEST(WatermarkTest, RefusesWhatCannotCarryAMark) {
  std::vector<float> small(100, 0.1f);
  EXPECT_THAT(std::string(EmbedWatermark("k", small, {}).status().message()), HasSubstr("too few for 256 bits"));
  std::vector<float> zeros(4096, 0.0f);
  EXPECT_THAT(std::string(EmbedWatermark("k", zeros, {}).status().message()), HasSubstr("all zeros"));
  EXPECT_THAT(std::string(EmbedWatermark("", zeros, {}).status().message()), HasSubstr("key: empty"));
  EXPECT_FALSE(EmbedWatermark("k", zeros, {.bits = 0}).ok());
}

TEST(WatermarkTest, MarksAFileAndReadsItBackFromTheQuantisedCopy) {
  std::string dir = (std::filesystem::temp_directory_path() / "gpugeek-watermark-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  std::vector<float> big = Gaussian(128 * 256, 2);
  std::vector<float> bias = Gaussian(128, 3);
  ASSERT_TRUE(
      WriteSafetensors(dir + "/m.safetensors",
                       {{.spec = {.name = "fc.weight", .dtype = Dtype::kBF16, .shape = {128, 256}},
                         .bytes = FloatsToTensor(Dtype::kBF16, big)},
                        {.spec = {.name = "fc.bias", .shape = {128}}, .bytes = FloatsToTensor(Dtype::kF32, bias)}})
          .ok());
  absl::StatusOr<FileEmbedResult> e =
      EmbedWatermarkInFile(dir + "/m.safetensors", dir + "/marked.safetensors", "key", "", {});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->tensor, "fc.weight");     // the largest matrix
  EXPECT_EQ(e->result.after.errors, 0);  // read from the written BF16 values
  ASSERT_TRUE(QuantizeSafetensors(dir + "/marked.safetensors", dir + "/int8.safetensors", {}).ok());
  absl::StatusOr<FileReading> read = ReadWatermarkInFile(dir + "/int8.safetensors", "key", "", 256);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->tensor, "fc.weight");
  EXPECT_EQ(read->reading.errors, 0);
  absl::StatusOr<FileReading> plain = ReadWatermarkInFile(dir + "/m.safetensors", "key", "fc.weight", 256);
  EXPECT_GT(plain->reading.ber, 0.3);
  EXPECT_THAT(std::string(ReadWatermarkInFile(dir + "/m.safetensors", "key", "nope", 256).status().message()),
              HasSubstr("no tensor named nope"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek::models
