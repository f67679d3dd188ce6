#include "hw/emulate_spec.h"

#include <gtest/gtest.h>

#include <string>

namespace gpugeek::hw {
namespace {

std::string ErrorOf(std::string_view text) {
  auto spec = ParseEmulateSpec(text);
  EXPECT_FALSE(spec.ok()) << text;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(spec.status().message());
}

TEST(EmulateSpec, ParsesCountsModelsAndLists) {
  struct Case {
    const char* text;
    const char* canonical;
    int total;
  } cases[] = {
      {"8xH100-SXM-80GB", "8xH100-SXM-80GB", 8},
      {"4xA100-PCIe-80GB", "4xA100-PCIe-80GB", 4},
      {"8xMI300X", "8xMI300X", 8},
      {"2xT4", "2xT4", 2},
      {"MI300X", "1xMI300X", 1},
      {"8X h100", "8xH100-SXM-80GB", 8},
      {" 8 x H100-SXM-80GB , 2xL4 ", "8xH100-SXM-80GB,2xL4", 10},
      {"8xNVIDIA H100 80GB HBM3", "8xH100-SXM-80GB", 8},
      {"2xAMD Instinct MI300X", "2xMI300X", 2},
      {"4xV100M32", "4xV100-SXM2-32GB", 4},
      {"64xL4", "64xL4", 64},
      {"32xT4,32xL4", "32xT4,32xL4", 64},
  };
  for (const Case& c : cases) {
    auto spec = ParseEmulateSpec(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status();
    EXPECT_EQ(spec->Canonical(), c.canonical) << c.text;
    EXPECT_EQ(spec->TotalGpus(), c.total) << c.text;
  }
}

TEST(EmulateSpec, ErrorsNameTheFix) {
  EXPECT_NE(ErrorOf("").find("empty emulate spec; expected e.g. 8xH100-SXM-80GB"), std::string::npos);
  EXPECT_NE(ErrorOf("   ").find("empty emulate spec"), std::string::npos);
  EXPECT_NE(ErrorOf("0xH100").find("count must be 1..64"), std::string::npos);
  EXPECT_NE(ErrorOf("65xH100").find("count must be 1..64"), std::string::npos);
  EXPECT_NE(ErrorOf("99999999999999999999xH100").find("count must be 1..64"), std::string::npos);
  EXPECT_NE(ErrorOf("8xH200000").find("unknown GPU model 'H200000'; see `gpugeek catalog`"), std::string::npos);
  EXPECT_NE(ErrorOf("8x").find("missing GPU model after '8x'"), std::string::npos);
  EXPECT_NE(ErrorOf("8H100").find("expected COUNTxMODEL"), std::string::npos);
  EXPECT_NE(ErrorOf("8xH100,").find("entry 2 of the emulate spec is empty"), std::string::npos);
  EXPECT_NE(ErrorOf(",2xL4").find("entry 1 of the emulate spec is empty"), std::string::npos);
  EXPECT_NE(ErrorOf("8xH100,,2xL4").find("entry 2"), std::string::npos);
  EXPECT_NE(ErrorOf("40xT4,40xL4").find("at most 64 per node"), std::string::npos);
  EXPECT_NE(ErrorOf("4xG2").find("no published figures"), std::string::npos);
}

TEST(EmulateSpec, LongGarbageIsEchoedShortAndPrintable) {
  std::string garbage(500, 'Z');
  garbage[3] = '\x01';
  std::string msg = ErrorOf("1x" + garbage);
  EXPECT_LT(msg.size(), 200u);
  EXPECT_EQ(msg.find('\x01'), std::string::npos);
}

}  // namespace
}  // namespace gpugeek::hw
