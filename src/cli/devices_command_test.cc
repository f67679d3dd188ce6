// End-to-end tests of `gpugeek devices`: run the built binary and read what it prints.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "hw/inventory_json.h"
#include "hw/topology.h"

namespace gpugeek::cli {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `env gpugeek args` through the shell, capturing stdout and stderr.
Result RunGpugeek(const std::string& env, const std::string& args) {
  static int calls = 0;
  const std::string err_path =
      ::testing::TempDir() + "gpugeek_devices_stderr_" + std::to_string(getpid()) + "_" + std::to_string(calls++);
  std::string cmd = env + " " + GPUGEEK_BINARY + " " + args + " 2>" + err_path;
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

// Real discovery must not find this machine's GPUs, if it has any, nor a system ROCm.
const char kNoVendorLibraries[] =
    "GPUGEEK_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 GPUGEEK_ROCM_SMI_LIBRARY=/nonexistent/librocm_smi64.so.1";

TEST(DevicesCommand, EmulatedHgxAsJson) {
  Result r = RunGpugeek("", "devices --emulate 8xH100-SXM-80GB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto inv = hw::ParseInventoryJson(r.out);
  ASSERT_TRUE(inv.ok()) << inv.status() << "\n" << r.out;
  ASSERT_EQ(inv->gpus.size(), 8u);
  EXPECT_EQ(inv->gpus[3].model_id, "H100-SXM-80GB");
  EXPECT_EQ(hw::LinkCellLabel(inv->links[3][6]), "NV18");
  EXPECT_EQ(inv->gpus[0].telemetry.utilization_percent, 0u);  // sampled before printing
  EXPECT_TRUE(inv->gpus[0].health.Healthy());
}

TEST(DevicesCommand, EmulatedTableHasDevicesMatrixAndLegend) {
  Result r = RunGpugeek("", "devices --emulate 4xA100-PCIe-80GB,2xL4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want :
       {"A100-PCIe-80GB", "L4", "80.0 GiB", "GPU-emu-", "NV12", "SYS", "Legend:", "NUMA", "HEALTH", "ok"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(DevicesCommand, BadSpecFailsWithTheFix) {
  Result r = RunGpugeek("", "devices --emulate 8xNoSuchGpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("gpugeek devices: unknown GPU model 'NoSuchGpu'; see `gpugeek catalog`"), std::string::npos)
      << r.err;
  r = RunGpugeek("", "devices --emulate 0xH100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("count must be 1..64"), std::string::npos) << r.err;
}

TEST(DevicesCommand, HostWithoutGpusSaysSoAndSucceeds) {
  Result r = RunGpugeek(kNoVendorLibraries, "devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("No GPUs found on this host."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nvml: cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rocm_smi: cannot load /nonexistent/librocm_smi64.so.1"), std::string::npos) << r.out;

  r = RunGpugeek(kNoVendorLibraries, "devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto inv = hw::ParseInventoryJson(r.out);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->gpus.empty());
  EXPECT_EQ(inv->problems.size(), 2u);
}

TEST(DevicesCommand, RealDiscoveryThroughTheNvmlLoader) {
  const std::string script = ::testing::TempDir() + "gpugeek_devices_nvml_script_" + std::to_string(getpid());
  std::ofstream(script)
      << "driver version=550.54.15 cuda=12040\n"
         "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-11111111-2222-3333-4444-555555555555 "
         "bus=00000000:18:00.0 mem_total=85520809984 util=12 temp=44 power_mw=301000 switch_links=18\n"
         "gpu name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-66666666-7777-8888-9999-000000000000 "
         "bus=00000000:2A:00.0 mem_total=85520809984 switch_links=18 ecc_unc=1\n";
  Result r =
      RunGpugeek(std::string("GPUGEEK_NVML_LIBRARY=") + GPUGEEK_FAKE_NVML_PATH + " GPUGEEK_FAKE_NVML_SCRIPT=" + script +
                     " GPUGEEK_ROCM_SMI_LIBRARY=/nonexistent/librocm_smi64.so",
                 "devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"GPU-11111111-2222-3333-4444-555555555555", "0000:2a:00.0", "H100-SXM-80GB", "12%", "44 C",
                           "301 W", "ecc:1", "NV18", "nvml: driver 550.54.15, runtime 12.4"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("rocm_smi: cannot load"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpugeek::cli
