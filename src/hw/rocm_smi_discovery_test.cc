// End-to-end tests of the ROCm SMI path without a GPU: RocmSmiDiscovery loads the fake
// librocm_smi64 built from testing/fake_rocm_smi.c (GPUGEEK_FAKE_ROCM_SMI_PATH).
#include "hw/rocm_smi_discovery.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "common/units.h"
#include "hw/testing/script_file.h"
#include "hw/topology.h"

namespace gpugeek::hw {
namespace {

using testing::ScriptFile;

constexpr char kScriptEnv[] = "GPUGEEK_FAKE_ROCM_SMI_SCRIPT";

RocmSmiDiscoveryOptions FakeOptions() {
  RocmSmiDiscoveryOptions o;
  o.library_path = GPUGEEK_FAKE_ROCM_SMI_PATH;
  o.rocm_root = "/nonexistent-rocm";
  o.host_paths.sys_root = "/nonexistent-sys";
  return o;
}

std::string Mi300xScript() {
  std::string s = "driver version=6.7.0\n";
  const char* buses[] = {"0c", "22", "38", "5c", "9f", "af", "bf", "df"};
  for (int i = 0; i < 8; ++i) {
    s += "gpu name=\"AMD Instinct MI300X\" unique_id=0x" + std::to_string(1000 + i) +
         "abcdef0123 bdf=0000:" + buses[i] +
         ":00.0 vram_total=206141652992 vram_used=298844160 numa=" + std::to_string(i / 4) +
         " temp_edge=na temp_junction=45000 power_uw=na socket_power_uw=152000000\n";
  }
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b)
      s += "link a=" + std::to_string(a) + " b=" + std::to_string(b) + " type=xgmi hops=1\n";
  }
  return s;
}

TEST(RocmSmiDiscovery, Mi300xPlatformIsAnXgmiMesh) {
  ScriptFile script(kScriptEnv, Mi300xScript());
  RocmSmiDiscovery rsmi(FakeOptions());
  auto inv = rsmi.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_TRUE(ValidateInventory(*inv).ok()) << ValidateInventory(*inv);
  ASSERT_EQ(inv->gpus.size(), 8u);
  EXPECT_TRUE(inv->problems.empty());
  const GpuDevice& g = inv->gpus[2];
  EXPECT_EQ(g.vendor, Vendor::kAmd);
  EXPECT_EQ(g.name, "AMD Instinct MI300X");
  EXPECT_EQ(g.model_id, "MI300X");
  EXPECT_EQ(g.uuid, "GPU-001002abcdef0123");  // zero-padded to 16 digits, as rocminfo prints it
  EXPECT_EQ(g.pci_bus_id, "0000:38:00.0");
  EXPECT_EQ(g.memory_total_bytes, 206141652992u);
  EXPECT_EQ(g.driver_version, "6.7.0");
  EXPECT_EQ(g.runtime_version, "rocm-smi 7.3.0");  // no ROCm install to read the release from
  EXPECT_EQ(g.source, "rocm_smi");
  EXPECT_EQ(inv->gpus[6].numa_node, 1);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      if (i == j) continue;
      EXPECT_EQ(inv->links[i][j].kind, LinkKind::kXgmi);
      EXPECT_EQ(inv->links[i][j].links, 1);
      EXPECT_EQ(inv->links[i][j].bytes_per_second, 128 * kGB);
    }
  }
  EXPECT_EQ(inv->links[0][5].pcie, LinkKind::kSys);

  auto samples = rsmi.Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  const GpuSample& s = (*samples)[0];
  EXPECT_EQ(s.telemetry.temperature_celsius, 45);    // junction: MI300X has no edge sensor
  EXPECT_EQ(s.telemetry.power_milliwatts, 152000u);  // current socket power, from microwatts
  EXPECT_EQ(s.telemetry.memory_used_bytes, 298844160u);
  EXPECT_EQ(s.telemetry.utilization_percent, 0u);
  EXPECT_EQ(s.health.ecc_uncorrected, 0u);
  EXPECT_EQ(s.health.retired_pages, 0u);
  EXPECT_EQ(s.health.retirement_pending, false);
  EXPECT_TRUE(s.health.Healthy()) << s.health.error;
}

TEST(RocmSmiDiscovery, PcieCardsAndUnknownModels) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"AMD Instinct MI210\" unique_id=0x11 bdf=0000:03:00.0 vram_total=68702699520 numa=0\n"
                    "gpu name=\"AMD Radeon Future\" bdf=0000:83:00.0 vram_total=17163091968 numa=1\n");
  RocmSmiDiscovery rsmi(FakeOptions());
  auto inv = rsmi.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].model_id, "MI210");
  EXPECT_EQ(inv->gpus[1].model_id, "");
  EXPECT_EQ(inv->gpus[1].name, "AMD Radeon Future");
  EXPECT_EQ(inv->gpus[1].memory_total_bytes, 17163091968u);
  EXPECT_EQ(inv->gpus[1].uuid, "GPU-pci-0000:83:00.0");  // no unique id on this card
  EXPECT_EQ(LinkCellLabel(inv->links[0][1]), "SYS");
}

TEST(RocmSmiDiscovery, HealthAndLostDevice) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"AMD Instinct MI250X\" unique_id=0x21 bdf=0000:c1:00.0 vram_total=68702699520 "
                    "busy=88 ecc_unc=3 reserved_pages=2 pending_pages=1\n"
                    "gpu name=\"AMD Instinct MI250X\" unique_id=0x22 bdf=0000:c6:00.0 vram_total=68702699520 "
                    "lost_after=1\n"
                    "link a=0 b=1 type=xgmi hops=1\n");
  RocmSmiDiscovery rsmi(FakeOptions());
  auto inv = rsmi.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(LinkCellLabel(inv->links[0][1]), "XGMI");
  auto first = rsmi.Sample();
  ASSERT_TRUE(first.ok());
  const GpuSample& sick = (*first)[0];
  EXPECT_EQ(sick.telemetry.utilization_percent, 88u);
  EXPECT_EQ(sick.telemetry.temperature_celsius, 30);  // the edge sensor, where there is one
  EXPECT_EQ(sick.telemetry.power_milliwatts, 100000u);
  EXPECT_EQ(sick.health.ecc_uncorrected, 3u);
  EXPECT_EQ(sick.health.retired_pages, 2u);
  EXPECT_EQ(sick.health.retirement_pending, true);
  EXPECT_EQ(sick.health.Summary(), "ecc:3");
  EXPECT_TRUE((*first)[1].health.Healthy());

  auto second = rsmi.Sample();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)[1].health.lost);
  EXPECT_NE((*second)[1].health.error.find("RSMI_STATUS_FILE_ERROR"), std::string::npos) << (*second)[1].health.error;
  EXPECT_FALSE((*second)[0].health.lost);
}

TEST(RocmSmiDiscovery, InitFailureAndMissingLibrary) {
  {
    ScriptFile script(kScriptEnv, "init error=8\n");
    RocmSmiDiscovery rsmi(FakeOptions());
    auto inv = rsmi.Discover();
    ASSERT_FALSE(inv.ok());
    EXPECT_EQ(inv.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(inv.status().message().find("rsmi_init failed: RSMI_STATUS_INIT_ERROR"), std::string::npos)
        << inv.status();
    EXPECT_EQ(rsmi.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  RocmSmiDiscoveryOptions o = FakeOptions();
  o.library_path = "/nonexistent/librocm_smi64.so.1";
  RocmSmiDiscovery missing(o);
  auto inv = missing.Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(inv.status().message().find("no ROCm on this host?"), std::string::npos);
}

TEST(RocmSmiDiscovery, RuntimeVersionIsTheRocmRelease) {
  std::string root = ::testing::TempDir() + "gpugeek_fake_rocm_root_" + std::to_string(getpid());
  std::filesystem::create_directories(root + "/.info");
  std::ofstream(root + "/.info/version") << "6.2.4-120\n";
  ScriptFile script(kScriptEnv, "gpu name=\"AMD Instinct MI300X\" unique_id=0x1 bdf=0000:0c:00.0 vram_total=1\n");
  RocmSmiDiscoveryOptions o = FakeOptions();
  o.rocm_root = root;
  RocmSmiDiscovery rsmi(o);
  auto inv = rsmi.Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->gpus[0].runtime_version, "6.2.4-120");
}

}  // namespace
}  // namespace gpugeek::hw
