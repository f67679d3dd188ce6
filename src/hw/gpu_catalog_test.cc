#include "hw/gpu_catalog.h"

#include <gtest/gtest.h>

#include <set>

#include "common/units.h"

namespace gpugeek::hw {
namespace {

const GpuCatalog& Cat() { return GpuCatalog::Builtin(); }

TEST(GpuCatalog, HoldsEveryModelTheIssueNames) {
  for (const char* id : {"V100-SXM2-16GB",
                         "V100-SXM2-32GB",
                         "T4",
                         "A10",
                         "A10G",
                         "L4",
                         "L40S",
                         "A100-PCIe-40GB",
                         "A100-PCIe-80GB",
                         "A100-SXM-40GB",
                         "A100-SXM-80GB",
                         "H100-PCIe-80GB",
                         "H100-SXM-80GB",
                         "H100-NVL-94GB",
                         "H200-SXM-141GB",
                         "GH200-96GB",
                         "B200-180GB",
                         "RTX-3090",
                         "RTX-4090",
                         "MI100",
                         "MI210",
                         "MI250",
                         "MI250X",
                         "MI300X",
                         "MI325X"}) {
    EXPECT_NE(Cat().FindById(id), nullptr) << id;
  }
  EXPECT_GE(Cat().models().size(), 24u);
}

TEST(GpuCatalog, IntegrityIdsUniqueSourcesPresentFiguresPlausible) {
  std::set<std::string> ids;
  for (const GpuModel& m : Cat().models()) {
    EXPECT_TRUE(ids.insert(NormalizeModelName(m.id)).second) << m.id;
    ASSERT_FALSE(m.sources.empty()) << m.id;
    for (const auto& s : m.sources) EXPECT_TRUE(s.starts_with("https://")) << m.id << " " << s;
    if (!m.disclosed) continue;
    EXPECT_GE(m.memory_bytes, 16 * kGiB) << m.id;
    EXPECT_LE(m.memory_bytes, 256 * kGiB) << m.id;
    EXPECT_GE(m.memory_bandwidth_bytes_per_second, 300e9) << m.id;
    ASSERT_TRUE(m.PeakOps(Precision::kFp32).has_value()) << m.id;
    // Tensor paths are never slower than plain FP32 where they exist.
    for (Precision p : {Precision::kFp16, Precision::kBf16, Precision::kFp8}) {
      if (auto v = m.PeakOps(p)) {
        EXPECT_GE(*v, *m.PeakOps(Precision::kFp32)) << m.id << " " << PrecisionName(p);
      }
    }
    // FP8 doubles the 16-bit rate on Hopper, Ada, Blackwell and CDNA3.
    if (auto fp8 = m.PeakOps(Precision::kFp8)) {
      EXPECT_NEAR(*fp8 / *m.PeakOps(Precision::kFp16), 2.0, 0.05) << m.id;
    }
    EXPECT_GT(m.tdp_watts, 0) << m.id;
    EXPECT_GE(m.interconnect.pcie_generation, 3) << m.id;
  }
}

TEST(GpuCatalog, DatasheetFiguresForFlagshipParts) {
  // NVIDIA H100 datasheet (SXM5): 80 GB HBM3, 3.35 TB/s, 989 TFLOP/s dense BF16, NVLink 900 GB/s, 700 W.
  const GpuModel* h100 = Cat().FindById("H100-SXM-80GB");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->memory_bytes, 80 * kGiB);
  EXPECT_EQ(h100->memory_bandwidth_bytes_per_second, 3'350'000'000'000u);
  EXPECT_DOUBLE_EQ(*h100->PeakOps(Precision::kBf16), 989.4e12);
  EXPECT_EQ(h100->interconnect.nvlink_generation, 4);
  EXPECT_EQ(h100->interconnect.nvlink_bytes_per_second, 900'000'000'000u);
  EXPECT_EQ(h100->tdp_watts, 700);
  // AMD MI300X data sheet: 192 GB HBM3, 5.3 TB/s, 1307.4 TFLOP/s dense FP16, 7 XGMI links, 750 W.
  const GpuModel* mi300x = Cat().FindById("MI300X");
  ASSERT_NE(mi300x, nullptr);
  EXPECT_EQ(mi300x->vendor, Vendor::kAmd);
  EXPECT_EQ(mi300x->memory_bytes, 192 * kGiB);
  EXPECT_DOUBLE_EQ(*mi300x->PeakOps(Precision::kFp16), 1307.4e12);
  EXPECT_EQ(mi300x->interconnect.xgmi_links, 7);
  // V100 has no BF16 path (Volta datasheet lists FP16 tensor only).
  EXPECT_FALSE(Cat().FindById("V100-SXM2-32GB")->PeakOps(Precision::kBf16).has_value());
}

TEST(GpuCatalog, ResolvesNamesVendorLibrariesReport) {
  struct Case {
    const char* reported;
    const char* id;
  };
  // Strings as nvmlDeviceGetName / rsmi_dev_name_get / nvidia-smi print them.
  for (const Case& c :
       {Case{"NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"}, Case{"NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"},
        Case{"NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"}, Case{"NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"},
        Case{"NVIDIA H100 80GB HBM3", "H100-SXM-80GB"}, Case{"NVIDIA H100 PCIe", "H100-PCIe-80GB"},
        Case{"NVIDIA H100 NVL", "H100-NVL-94GB"}, Case{"NVIDIA H200", "H200-SXM-141GB"},
        Case{"NVIDIA GH200 480GB", "GH200-96GB"}, Case{"NVIDIA B200", "B200-180GB"},
        Case{"Tesla V100-SXM2-32GB", "V100-SXM2-32GB"}, Case{"Tesla T4", "T4"}, Case{"NVIDIA L40S", "L40S"},
        Case{"NVIDIA GeForce RTX 4090", "RTX-4090"}, Case{"AMD Instinct MI300X", "MI300X"},
        Case{"AMD Instinct MI250X/MI250", "MI250X"}, Case{"AMD Instinct MI210", "MI210"},
        Case{"Instinct MI325X", "MI325X"}}) {
    const GpuModel* m = Cat().Resolve(c.reported);
    ASSERT_NE(m, nullptr) << c.reported;
    EXPECT_EQ(m->id, c.id) << c.reported;
  }
}

TEST(GpuCatalog, ResolvesAlibabaTraceCodesAndKeepsUndisclosedOpaque) {
  EXPECT_EQ(Cat().Resolve("V100M16")->id, "V100-SXM2-16GB");
  EXPECT_EQ(Cat().Resolve("V100M32")->id, "V100-SXM2-32GB");
  EXPECT_EQ(Cat().Resolve("P100")->id, "P100-PCIe-16GB");
  EXPECT_EQ(Cat().Resolve("T4")->id, "T4");
  EXPECT_EQ(Cat().Resolve("A10")->id, "A10");
  for (const char* code : {"G1", "G2", "G3"}) {
    const GpuModel* m = Cat().Resolve(code);
    ASSERT_NE(m, nullptr) << code;
    EXPECT_FALSE(m->disclosed);
    EXPECT_EQ(m->memory_bytes, 0u);
    EXPECT_FALSE(m->PeakOps(Precision::kFp32).has_value());
  }
}

TEST(GpuCatalog, UnknownNameResolvesToNull) {
  EXPECT_EQ(Cat().Resolve("NVIDIA Quantum Accelerator 9000"), nullptr);
  EXPECT_EQ(Cat().Resolve(""), nullptr);
}

TEST(GpuCatalogParse, ErrorsNameTheEntryAndField) {
  auto bad = GpuCatalog::Parse(R"({"models":[{"id":"X","display_name":"X","vendor":"nvidia",
      "architecture":"A","memory_gib":80,"memory_bandwidth_gbps":3.35,"dense_tflops":{"fp32":60},
      "interconnect":{"pcie_generation":5},"tdp_watts":700,"form_factor":"SXM","sources":["https://x"]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("models[0] (X): field 'memory_bandwidth_gbps'"), std::string::npos)
      << bad.status();

  auto typo = GpuCatalog::Parse(R"({"models":[{"id":"X","displayname":"X"}]})");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("'displayname' is not a known field"), std::string::npos);

  auto no_source = GpuCatalog::Parse(R"({"models":[{"id":"G9","display_name":"G9","vendor":"undisclosed",
      "disclosed":false}]})");
  ASSERT_FALSE(no_source.ok());
  EXPECT_NE(no_source.status().message().find("'sources'"), std::string::npos);

  EXPECT_FALSE(GpuCatalog::Parse("{not json").ok());
  EXPECT_FALSE(GpuCatalog::Parse("[]").ok());
}

TEST(GpuCatalogParse, RejectsDuplicateAliasAcrossModels) {
  auto dup = GpuCatalog::Parse(R"({"models":[
      {"id":"G8","display_name":"a","vendor":"undisclosed","disclosed":false,"sources":["https://x"],"trace_codes":["Z"]},
      {"id":"G9","display_name":"b","vendor":"undisclosed","disclosed":false,"sources":["https://x"],"aliases":["z"]}]})");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("already used by G8"), std::string::npos) << dup.status();
}

TEST(Interconnect, PcieBandwidthDoublesPerGeneration) {
  Interconnect ic;
  ic.pcie_generation = 4;
  EXPECT_EQ(ic.PcieBytesPerSecond(), 64'000'000'000u);
  ic.pcie_generation = 5;
  EXPECT_EQ(ic.PcieBytesPerSecond(), 128'000'000'000u);
  ic.pcie_generation = 3;
  EXPECT_EQ(ic.PcieBytesPerSecond(), 32'000'000'000u);
}

}  // namespace
}  // namespace gpugeek::hw
