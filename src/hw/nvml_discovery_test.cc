// End-to-end tests of the NVML path without a GPU: NvmlDiscovery loads the fake libnvidia-ml
// built from testing/fake_nvml.c (GPUGEEK_FAKE_NVML_PATH) and reads scripted answers.
#include "hw/nvml_discovery.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/units.h"
#include "hw/testing/script_file.h"
#include "hw/topology.h"

namespace gpugeek::hw {
namespace {

using testing::ScriptFile;

constexpr char kScriptEnv[] = "GPUGEEK_FAKE_NVML_SCRIPT";

NvmlDiscoveryOptions FakeOptions() {
  NvmlDiscoveryOptions o;
  o.library_path = GPUGEEK_FAKE_NVML_PATH;
  o.host_paths.sys_root = "/nonexistent-sys";  // NUMA must come from NVML, not this host
  return o;
}

std::string Hgx8H100Script() {
  std::string s = "driver version=550.54.15 cuda=12040\n";
  const char* buses[] = {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"};
  for (int i = 0; i < 8; ++i) {
    s += "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-0000000" + std::to_string(i) +
         "-aaaa-bbbb-cccc-dddddddddddd bus=00000000:" + buses[i] +
         ":00.0 mem_total=85520809984 mem_used=566231040 numa=" + std::to_string(i / 4) + " switch_links=18\n";
  }
  return s;
}

TEST(NvmlDiscovery, Hgx8H100ThroughNvSwitch) {
  ScriptFile script(kScriptEnv, Hgx8H100Script());
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_TRUE(ValidateInventory(*inv).ok()) << ValidateInventory(*inv);
  ASSERT_EQ(inv->gpus.size(), 8u);
  EXPECT_TRUE(inv->problems.empty()) << inv->problems.front();
  const GpuDevice& g = inv->gpus[1];
  EXPECT_EQ(g.vendor, Vendor::kNvidia);
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.model_id, "H100-SXM-80GB");
  EXPECT_EQ(g.uuid, "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd");
  EXPECT_EQ(g.pci_bus_id, "0000:2a:00.0");  // normalised from NVML's 00000000:2A:00.0
  EXPECT_EQ(g.memory_total_bytes, 85520809984u);
  EXPECT_EQ(g.driver_version, "550.54.15");
  EXPECT_EQ(g.runtime_version, "12.4");
  EXPECT_EQ(g.source, "nvml");
  EXPECT_EQ(inv->gpus[5].numa_node, 1);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      if (i == j) continue;
      EXPECT_EQ(LinkCellLabel(inv->links[i][j]), "NV18") << i << "-" << j;
      EXPECT_EQ(inv->links[i][j].bytes_per_second, 900 * kGB);
    }
  }
  EXPECT_EQ(inv->links[0][1].pcie, LinkKind::kNode);  // the fake's default for one NUMA node
  EXPECT_EQ(inv->links[0][4].pcie, LinkKind::kSys);
}

TEST(NvmlDiscovery, DirectNvLinkBridgesAndPciePaths) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"NVIDIA A100 80GB PCIe\" uuid=GPU-a0 bus=00000000:17:00.0 mem_total=85899345920 numa=0\n"
                    "gpu name=\"NVIDIA A100 80GB PCIe\" uuid=GPU-a1 bus=00000000:18:00.0 mem_total=85899345920 numa=0\n"
                    "gpu name=\"NVIDIA A100 80GB PCIe\" uuid=GPU-a2 bus=00000000:CA:00.0 mem_total=85899345920 numa=1\n"
                    "gpu name=\"NVIDIA A100 80GB PCIe\" uuid=GPU-a3 bus=00000000:CB:00.0 mem_total=85899345920 numa=1\n"
                    "nvlink a=0 b=1 links=12\n"
                    "nvlink a=2 b=3 links=12\n"
                    "path a=0 b=1 level=10\n"
                    "path a=2 b=3 level=20\n"
                    "path a=0 b=2 level=50\n"
                    "path a=1 b=3 level=30\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_TRUE(ValidateInventory(*inv).ok());
  EXPECT_EQ(LinkCellLabel(inv->links[0][1]), "NV12");
  EXPECT_EQ(inv->links[0][1].bytes_per_second, 600 * kGB);
  EXPECT_EQ(inv->links[0][1].pcie, LinkKind::kPix);
  EXPECT_EQ(LinkCellLabel(inv->links[3][2]), "NV12");
  EXPECT_EQ(inv->links[2][3].pcie, LinkKind::kPxb);
  EXPECT_EQ(LinkCellLabel(inv->links[0][2]), "SYS");
  EXPECT_EQ(LinkCellLabel(inv->links[1][3]), "PHB");  // scripted, though the NUMA nodes differ
  EXPECT_EQ(inv->links[0][2].bytes_per_second, 64 * kGB);
}

TEST(NvmlDiscovery, UnknownModelIsReportedNotDropped) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"NVIDIA Future X1\" uuid=GPU-f0 bus=00000000:41:00.0 mem_total=206158430208 numa=0\n"
                    "gpu name=\"Tesla T4\" uuid=GPU-t4 bus=00000000:42:00.0 mem_total=16106127360 numa=0\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].name, "NVIDIA Future X1");
  EXPECT_EQ(inv->gpus[0].model_id, "");
  EXPECT_EQ(inv->gpus[0].memory_total_bytes, 206158430208u);  // the measured size is kept
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-f0");
  EXPECT_EQ(inv->gpus[1].model_id, "T4");
  EXPECT_EQ(inv->links[0][1].kind, LinkKind::kNode);
  EXPECT_EQ(inv->links[0][1].bytes_per_second, 0u);  // unknown without the model's PCIe generation
}

TEST(NvmlDiscovery, InitFailureIsAFailedPreconditionWithNvmlsReason) {
  ScriptFile script(kScriptEnv, "init error=9\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(inv.status().message().find("nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)"), std::string::npos)
      << inv.status();
  EXPECT_EQ(nvml.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NvmlDiscovery, DeviceCountFailureIsReported) {
  ScriptFile script(kScriptEnv, "count error=4\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_NE(inv.status().message().find("Insufficient Permissions"), std::string::npos) << inv.status();
}

TEST(NvmlDiscovery, MissingLibraryIsNotFound) {
  NvmlDiscoveryOptions o = FakeOptions();
  o.library_path = "/nonexistent/libnvidia-ml.so.1";
  NvmlDiscovery nvml(o);
  auto inv = nvml.Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(inv.status().message().find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos);
}

TEST(NvmlDiscovery, LibraryWithoutNvmlIsInternal) {
  NvmlDiscoveryOptions o = FakeOptions();
  o.library_path = GPUGEEK_FAKE_ROCM_SMI_PATH;  // loads, but exports no nvml* symbols
  NvmlDiscovery nvml(o);
  auto inv = nvml.Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(inv.status().message().find("lacks nvmlInit_v2"), std::string::npos) << inv.status();
}

TEST(NvmlDiscovery, LibraryPathComesFromTheEnvironment) {
  setenv(kNvmlLibraryEnv, "/from/env/libnvidia-ml.so.1", 1);
  NvmlDiscovery from_env;
  unsetenv(kNvmlLibraryEnv);
  NvmlDiscovery by_default;
  EXPECT_EQ(from_env.library_path(), "/from/env/libnvidia-ml.so.1");
  EXPECT_EQ(by_default.library_path(), "libnvidia-ml.so.1");
}

TEST(NvmlDiscovery, GpuLostOnTheSecondSample) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-ok bus=00000000:18:00.0 mem_total=85520809984 "
                    "mem_used=1048576 util=35 temp=41 power_mw=250000\n"
                    "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-dies bus=00000000:2A:00.0 mem_total=85520809984 "
                    "util=90 lost_after=1\n");
  NvmlDiscovery nvml(FakeOptions());
  ASSERT_TRUE(nvml.Discover().ok());
  auto first = nvml.Sample();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].telemetry.utilization_percent, 35u);
  EXPECT_EQ((*first)[0].telemetry.memory_used_bytes, 1048576u);
  EXPECT_EQ((*first)[0].telemetry.temperature_celsius, 41);
  EXPECT_EQ((*first)[0].telemetry.power_milliwatts, 250000u);
  EXPECT_EQ((*first)[1].telemetry.utilization_percent, 90u);
  EXPECT_TRUE((*first)[1].health.Healthy());

  auto second = nvml.Sample();
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->size(), 2u);
  EXPECT_TRUE((*second)[0].health.Healthy());
  const GpuSample& lost = (*second)[1];
  EXPECT_TRUE(lost.health.lost);
  EXPECT_EQ(lost.health.Summary(), "lost");
  EXPECT_NE(lost.health.error.find("GPU is lost"), std::string::npos) << lost.health.error;
  EXPECT_FALSE(lost.telemetry.utilization_percent.has_value());
  EXPECT_FALSE(lost.telemetry.power_milliwatts.has_value());
}

TEST(NvmlDiscovery, HealthCountersAndXidEvents) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"Tesla V100-SXM2-32GB\" uuid=GPU-v0 bus=00000000:06:00.0 mem_total=34359738368 "
                    "ecc_unc=2 retired_sbe=1 retired_dbe=3 pending=1 xid=79\n"
                    "gpu name=\"NVIDIA A100-SXM4-80GB\" uuid=GPU-a0 bus=00000000:07:00.0 mem_total=85899345920 "
                    "retired_sbe=na retired_dbe=na pending=na util=na temp=na power_mw=na ecc_unc=na\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->gpus[0].model_id, "V100-SXM2-32GB");
  auto first = nvml.Sample();
  ASSERT_TRUE(first.ok());
  const GpuHealth& v100 = (*first)[0].health;
  EXPECT_EQ(v100.ecc_uncorrected, 2u);
  EXPECT_EQ(v100.retired_pages, 4u);
  EXPECT_EQ(v100.retirement_pending, true);
  EXPECT_EQ(v100.xid_errors, (std::vector<uint64_t>{79}));
  EXPECT_FALSE(v100.Healthy());
  // NOT_SUPPORTED leaves fields empty and is not an error.
  const GpuSample& a100 = (*first)[1];
  EXPECT_FALSE(a100.telemetry.utilization_percent.has_value());
  EXPECT_FALSE(a100.telemetry.temperature_celsius.has_value());
  EXPECT_FALSE(a100.telemetry.power_milliwatts.has_value());
  EXPECT_FALSE(a100.health.ecc_uncorrected.has_value());
  EXPECT_FALSE(a100.health.retired_pages.has_value());
  EXPECT_FALSE(a100.health.retirement_pending.has_value());
  EXPECT_TRUE(a100.health.error.empty()) << a100.health.error;
  EXPECT_TRUE(a100.health.Healthy());

  auto second = nvml.Sample();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)[0].health.xid_errors.empty());  // each XID is reported once
}

TEST(NvmlDiscovery, UuidFailureKeepsTheDeviceAndSaysWhy) {
  ScriptFile script(kScriptEnv,
                    "gpu name=\"NVIDIA L4\" uuid=GPU-x bus=00000000:01:00.0 mem_total=24152899584 uuid_error=3\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), 1u);
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-nvml-index-0");
  ASSERT_EQ(inv->problems.size(), 1u);
  EXPECT_EQ(inv->problems[0], "nvml: GPU 0: UUID: Not Supported (NVML error 3)");
}

TEST(NvmlDiscovery, NoDevicesIsAnEmptyInventory) {
  ScriptFile script(kScriptEnv, "driver version=550.54.15 cuda=12040\n");
  NvmlDiscovery nvml(FakeOptions());
  auto inv = nvml.Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->gpus.empty());
  EXPECT_TRUE(inv->links.empty());
  auto samples = nvml.Sample();
  ASSERT_TRUE(samples.ok());
  EXPECT_TRUE(samples->empty());
}

}  // namespace
}  // namespace gpugeek::hw
