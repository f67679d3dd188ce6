#include "hw/host_info.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "common/units.h"

namespace gpugeek::hw {
namespace {

TEST(HostInfo, ReadsAFakeProcAndSysTree) {
  namespace fs = std::filesystem;
  const std::string root = ::testing::TempDir() + "gpugeek_host_info_" + std::to_string(getpid());
  fs::remove_all(root);
  fs::create_directories(root + "/proc");
  fs::create_directories(root + "/sys/devices/system/node/node0");
  fs::create_directories(root + "/sys/devices/system/node/node1");
  fs::create_directories(root + "/sys/bus/pci/devices/0000:1a:00.0");
  std::ofstream(root + "/sys/devices/system/node/possible") << "0-1\n";  // not a node folder
  std::ofstream(root + "/proc/cpuinfo") << "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\n"
                                           "processor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\n"
                                           "processor\t: 2\n\nprocessor\t: 3\n";
  std::ofstream(root + "/proc/meminfo") << "MemTotal:       2113536000 kB\nMemFree:        1000 kB\n";
  std::ofstream(root + "/sys/bus/pci/devices/0000:1a:00.0/numa_node") << "1\n";

  HostPaths paths{root + "/proc", root + "/sys"};
  HostInfo host = ReadHostInfo(paths);
  EXPECT_EQ(host.cpu_cores, 4);
  EXPECT_EQ(host.cpu_model, "AMD EPYC 9654 96-Core Processor");
  EXPECT_EQ(host.memory_bytes, 2113536000ull * 1024);
  EXPECT_EQ(host.numa_nodes, 2);
  EXPECT_EQ(ReadPciNumaNode("00000000:1A:00.0", paths), 1);
  EXPECT_EQ(ReadPciNumaNode("0000:1b:00.0", paths), -1);
}

TEST(HostInfo, MissingFilesLeaveDefaults) {
  HostInfo host = ReadHostInfo({"/nonexistent/proc", "/nonexistent/sys"});
  EXPECT_EQ(host.cpu_cores, 0);
  EXPECT_EQ(host.memory_bytes, 0u);
  EXPECT_EQ(host.numa_nodes, 1);
}

TEST(HostInfo, ThisHostHasCpusAndMemory) {
  HostInfo host = ReadHostInfo();
  EXPECT_GT(host.cpu_cores, 0);
  EXPECT_GT(host.memory_bytes, 64 * kMiB);
  EXPECT_FALSE(host.hostname.empty());
}

TEST(HostInfo, NormalizesPciBusIds) {
  EXPECT_EQ(NormalizePciBusId("00000000:1A:00.0"), "0000:1a:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:c1:00.1"), "0000:c1:00.1");
  EXPECT_EQ(NormalizePciBusId("00000001:DB:1F.7"), "0001:db:1f.7");
  EXPECT_EQ(NormalizePciBusId("GARBAGE"), "garbage");
  EXPECT_EQ(NormalizePciBusId("0000:1a:00.0x"), "0000:1a:00.0x");
}

}  // namespace
}  // namespace gpugeek::hw
