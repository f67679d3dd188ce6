#include "models/quantize.h"

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::models {
namespace {

using ::testing::HasSubstr;

std::vector<float> Gaussian(size_t n, uint32_t seed, float sigma = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> w(n);
  for (float& x : w) x = d(rng);
  return w;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), 4 * v.size());
}

float ScaleOf(const QuantizedMatrix& m, size_t g) {
  if (m.scales.dtype == Dtype::kF32) {
    float s = 0;
    std::memcpy(&s, m.scale_bytes.data() + 4 * g, 4);
    return s;
  }
  uint16_t h = 0;
  std::memcpy(&h, m.scale_bytes.data() + 2 * g, 2);
  return HalfToFloat(h);
}

TEST(QuantizeTest, HalfConversionsAreExactAndScalesRoundUp) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(*HalfAtLeast(1.0f), 0x3c00);
  EXPECT_EQ(*HalfAtLeast(std::nextafter(1.0f, 2.0f)), 0x3c01);  // never below x
  EXPECT_EQ(*HalfAtLeast(0.0f), 0x0000);
  EXPECT_EQ(*HalfAtLeast(1e-7f), 0x0002);  // 1e-7 lies between 1 and 2 subnormal steps of 2^-24
  EXPECT_FALSE(HalfAtLeast(65505.0f).has_value());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(0.0f, 60000.0f);
  for (int i = 0; i < 100000; ++i) {
    float x = d(rng) * (i % 2 == 0 ? 1.0f : 1e-6f);
    uint16_t h = *HalfAtLeast(x);
    ASSERT_GE(HalfToFloat(h), x);
    ASSERT_TRUE(h == 0 || HalfToFloat(static_cast<uint16_t>(h - 1)) < x) << x;  // the smallest such
  }
}

// Per element, |w - q s| <= s / 2 for the scale of the element's group (round to nearest, nothing clipped).
TEST(QuantizeTest, EveryElementIsWithinHalfItsScaleUnderEveryScheme) {
  const int64_t rows = 16;
  const int64_t cols = 96;
  std::vector<float> w = Gaussian(rows * cols, 1);
  w[5] = 0.5f;  // an outlier: its row's (or block's) scale grows, nothing clips
  for (int64_t c = 0; c < cols; ++c) w[3 * cols + c] = 0.0f;  // an all-zero row decodes to zeros
  for (QuantScheme scheme : {QuantScheme::kInt8Row, QuantScheme::kInt8Block32, QuantScheme::kInt4Block32}) {
    absl::StatusOr<QuantizedMatrix> m = QuantizeMatrix(w, rows, cols, scheme);
    ASSERT_TRUE(m.ok()) << m.status();
    std::vector<float> back = DequantizeMatrix(*m, scheme);
    const int64_t group = scheme == QuantScheme::kInt8Row ? cols : kQuantBlock;
    for (size_t i = 0; i < w.size(); ++i) {
      float s = ScaleOf(*m, i / group);
      ASSERT_LE(std::fabs(w[i] - back[i]), s / 2 * (1 + 1e-6f)) << SchemeName(scheme) << " element " << i;
    }
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(back[3 * cols + c], 0.0f);
    if (scheme == QuantScheme::kInt8Row) {
      EXPECT_EQ(back[5], 0.5f);  // max |w| = 127 * s exactly (fp32 scale)
    }
  }
}

// Sizes as computed in quantize.h: per-row INT8 is 75% - 1/K smaller than fp32; block-32 is 8.5 and 4.5 bits
// per weight (llama.cpp's Q8_0: 34 bytes per 32 weights).
TEST(QuantizeTest, SizesAreExactlyAsComputed) {
  const int64_t rows = 64;
  const int64_t cols = 256;
  std::vector<float> w = Gaussian(rows * cols, 2);
  QuantizedMatrix row = *QuantizeMatrix(w, rows, cols, QuantScheme::kInt8Row);
  double reduction = 1.0 - static_cast<double>(row.q_bytes.size() + row.scale_bytes.size()) / (4.0 * rows * cols);
  EXPECT_DOUBLE_EQ(reduction, 0.75 - 1.0 / cols);
  QuantizedMatrix q8 = *QuantizeMatrix(w, rows, cols, QuantScheme::kInt8Block32);
  EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(q8.q_bytes.size() + q8.scale_bytes.size()) / (rows * cols), 8.5);
  QuantizedMatrix q4 = *QuantizeMatrix(w, rows, cols, QuantScheme::kInt4Block32);
  EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(q4.q_bytes.size() + q4.scale_bytes.size()) / (rows * cols), 4.5);
  EXPECT_EQ(q4.q.shape, (std::vector<int64_t>{rows, cols / 2}));
  EXPECT_EQ(q4.scales.shape, (std::vector<int64_t>{rows, cols / kQuantBlock}));
}

TEST(QuantizeTest, Int4PacksTheEvenElementInTheLowNibble) {
  // One block: max |w| = 7 gives the scale 7 / 7 = 1, so q = round(w): -7 -> 1, 3 -> 11 (q + 8).
  std::vector<float> w(32, 0.0f);
  w[0] = -7.0f;
  w[1] = 3.0f;
  w[2] = 7.0f;
  w[3] = 2.5f;  // round half to even: 2
  QuantizedMatrix m = *QuantizeMatrix(w, 1, 32, QuantScheme::kInt4Block32);
  EXPECT_EQ(static_cast<uint8_t>(m.q_bytes[0]), 1 | (11 << 4));
  EXPECT_EQ(static_cast<uint8_t>(m.q_bytes[1]), 15 | (10 << 4));
  EXPECT_EQ(static_cast<uint8_t>(m.q_bytes[2]), 8 | (8 << 4));
  EXPECT_EQ(ScaleOf(m, 0), 1.0f);
}

TEST(QuantizeTest, RefusesNonFiniteWeightsAndBadShapes) {
  std::vector<float> w(64, 0.1f);
  w[33] = NAN;
  EXPECT_THAT(std::string(QuantizeMatrix(w, 2, 32, QuantScheme::kInt8Row).status().message()),
              HasSubstr("row 1, column 1 is nan"));
  EXPECT_THAT(
      std::string(QuantizeMatrix(std::vector<float>(40, 1.0f), 2, 20, QuantScheme::kInt8Block32).status().message()),
      HasSubstr("20 columns: int8-block32 needs a multiple of 32"));
  EXPECT_FALSE(QuantizeMatrix(std::vector<float>(3), 2, 2, QuantScheme::kInt8Row).ok());
  std::vector<float> big(32, 1e9f);
  EXPECT_THAT(std::string(QuantizeMatrix(big, 1, 32, QuantScheme::kInt4Block32).status().message()),
              HasSubstr("use int8 (fp32 scales)"));
  EXPECT_TRUE(QuantizeMatrix(big, 1, 32, QuantScheme::kInt8Row).ok());
}

class QuantizeFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / "gpugeek-quantize-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(QuantizeFileTest, QuantisesTheMatricesKeepsTheRestAndSaysWhy) {
  std::vector<float> attn = Gaussian(64 * 128, 3);
  std::vector<float> embed = Gaussian(100 * 64, 4);
  std::vector<float> odd = Gaussian(8 * 40, 5);
  std::vector<TensorData> tensors = {
      {.spec = {.name = "wte.weight", .dtype = Dtype::kF32, .shape = {100, 64}}, .bytes = Bytes(embed)},
      {.spec = {.name = "h.0.attn.weight", .dtype = Dtype::kF32, .shape = {64, 128}}, .bytes = Bytes(attn)},
      {.spec = {.name = "h.0.ln.weight", .dtype = Dtype::kF32, .shape = {64}},
       .bytes = Bytes(std::vector<float>(64, 1.0f))},
      {.spec = {.name = "h.0.odd.weight", .dtype = Dtype::kF32, .shape = {8, 40}}, .bytes = Bytes(odd)},
      {.spec = {.name = "step", .dtype = Dtype::kI64, .shape = {}}, .bytes = std::string(8, '\0')},
  };
  ASSERT_TRUE(WriteSafetensors(dir_ + "/in.safetensors", tensors, {{"format", "pt"}}).ok());
  QuantizeOptions options{.scheme = QuantScheme::kInt8Block32, .skip_embeddings = true};
  absl::StatusOr<QuantizeReport> report =
      QuantizeSafetensors(dir_ + "/in.safetensors", dir_ + "/out.safetensors", options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->tensors.size(), 5u);
  EXPECT_EQ(report->tensors[0].kept_reason, "an embedding table (--skip embeddings)");
  EXPECT_EQ(report->tensors[1].scheme, "int8-block32");
  EXPECT_EQ(report->tensors[1].bytes_after, 64u * 128 + 2 * 64 * 4);
  EXPECT_GT(report->tensors[1].sqnr_db, 35.0);  // ~ 6.02 * 8 - 10 dB for Gaussian weights in 32-blocks
  EXPECT_LE(report->tensors[1].max_abs_error, report->tensors[1].max_scale / 2 * (1 + 1e-6));
  EXPECT_EQ(report->tensors[2].kept_reason, "1-D (a bias or a norm): small, and its errors cost the most accuracy");
  EXPECT_EQ(report->tensors[3].kept_reason, "40 columns are not a multiple of the 32-element block");
  EXPECT_EQ(report->tensors[4].kept_reason, "dtype I64: only F32, F16 and BF16 weights are quantised");
  EXPECT_EQ(report->quantised_bytes_before, 4u * 64 * 128);
  uint64_t before = 4 * (100 * 64 + 64 * 128 + 64 + 8 * 40) + 8;
  EXPECT_EQ(report->bytes_before, before);
  EXPECT_EQ(report->bytes_after, before - 4 * 64 * 128 + 64 * 128 + 2 * 64 * 4);

  absl::StatusOr<SafetensorsFile> out = SafetensorsFile::Open(dir_ + "/out.safetensors");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->header().metadata.at("format"), "pt");
  EXPECT_EQ(out->header().metadata.at(std::string(kQuantMetadataKey)),
            R"({"format":1,"tensors":{"h.0.attn.weight":{"dtype":"F32","scheme":"int8-block32"}}})");
  EXPECT_EQ(out->header().Find("h.0.attn.weight")->dtype, Dtype::kI8);
  EXPECT_EQ(out->header().Find("h.0.attn.weight.qscale")->shape, (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(*out->Read("wte.weight"), Bytes(embed));  // kept tensors are copied byte for byte
  EXPECT_EQ(*out->Read("h.0.odd.weight"), Bytes(odd));

  absl::Status again = QuantizeSafetensors(dir_ + "/out.safetensors", dir_ + "/again.safetensors", options).status();
  EXPECT_THAT(std::string(again.message()), HasSubstr("already quantised"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/again.safetensors"));
}

TEST_F(QuantizeFileTest, ReadsHalfAndBfloat16WeightsAndRefusesANanNamingTheTensor) {
  std::string half(2 * 2 * 32, '\0');
  for (size_t i = 0; i < half.size(); i += 2) half[i + 1] = 0x3c;  // every weight 1.0
  std::string bf16(2 * 2 * 32, '\0');
  for (size_t i = 0; i < bf16.size(); i += 2)
    bf16[i + 1] = static_cast<char>(0xbf), bf16[i] = static_cast<char>(0x80);  // -1.0
  ASSERT_TRUE(WriteSafetensors(dir_ + "/in.safetensors",
                               {{.spec = {.name = "a", .dtype = Dtype::kF16, .shape = {2, 32}}, .bytes = half},
                                {.spec = {.name = "b", .dtype = Dtype::kBF16, .shape = {2, 32}}, .bytes = bf16}})
                  .ok());
  absl::StatusOr<QuantizeReport> r = QuantizeSafetensors(dir_ + "/in.safetensors", dir_ + "/out.safetensors", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensors[0].max_abs_error, 0.0);  // 1.0 = 127 * (1/127) in fp32 rounds back exactly
  EXPECT_TRUE(std::isinf(r->tensors[1].sqnr_db) || r->tensors[1].sqnr_db > 100);
  EXPECT_EQ(r->tensors[0].bytes_after, 2u * 32 + 4 * 2);

  std::vector<float> bad = Gaussian(2 * 32, 6);
  bad[40] = INFINITY;
  ASSERT_TRUE(
      WriteSafetensors(dir_ + "/nan.safetensors", {{.spec = {.name = "w", .shape = {2, 32}}, .bytes = Bytes(bad)}})
          .ok());
  absl::Status s = QuantizeSafetensors(dir_ + "/nan.safetensors", dir_ + "/nan-out.safetensors", {}).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor w: the value at row 1, column 8 is inf"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/nan-out.safetensors"));
}

}  // namespace
}  // namespace gpugeek::models
