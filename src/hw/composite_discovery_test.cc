#include "hw/composite_discovery.h"

#include <gtest/gtest.h>

#include "hw/emulated_discovery.h"
#include "hw/nvml_discovery.h"
#include "hw/rocm_smi_discovery.h"
#include "hw/testing/script_file.h"
#include "hw/topology.h"

namespace gpugeek::hw {
namespace {

using testing::ScriptFile;

std::unique_ptr<Discovery> FakeNvml(const std::string& path = GPUGEEK_FAKE_NVML_PATH) {
  NvmlDiscoveryOptions o;
  o.library_path = path;
  return std::make_unique<NvmlDiscovery>(o);
}

std::unique_ptr<Discovery> FakeRocm(const std::string& path = GPUGEEK_FAKE_ROCM_SMI_PATH) {
  RocmSmiDiscoveryOptions o;
  o.library_path = path;
  o.rocm_root = "/nonexistent-rocm";
  return std::make_unique<RocmSmiDiscovery>(o);
}

TEST(CompositeDiscovery, HostWithBothVendorsReportsBoth) {
  ScriptFile nvml_script("GPUGEEK_FAKE_NVML_SCRIPT",
                         "gpu name=\"NVIDIA L40S\" uuid=GPU-n0 bus=00000000:17:00.0 mem_total=48305799168 numa=0\n"
                         "gpu name=\"NVIDIA L40S\" uuid=GPU-n1 bus=00000000:65:00.0 mem_total=48305799168 numa=0 "
                         "lost_after=1\n");
  ScriptFile rocm_script("GPUGEEK_FAKE_ROCM_SMI_SCRIPT",
                         "gpu name=\"AMD Instinct MI210\" unique_id=0x51 bdf=0000:b1:00.0 vram_total=68702699520 "
                         "numa=1\n"
                         "gpu name=\"AMD Instinct MI210\" unique_id=0x52 bdf=0000:b2:00.0 vram_total=68702699520 "
                         "numa=0\n"
                         "link a=0 b=1 type=xgmi hops=1\n");
  std::vector<std::unique_ptr<Discovery>> backends;
  backends.push_back(FakeNvml());
  backends.push_back(FakeRocm());
  CompositeDiscovery all(std::move(backends));
  EXPECT_EQ(all.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
  auto inv = all.Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_TRUE(ValidateInventory(*inv).ok()) << ValidateInventory(*inv);
  ASSERT_EQ(inv->gpus.size(), 4u);
  EXPECT_TRUE(inv->problems.empty());
  EXPECT_EQ(inv->gpus[0].vendor, Vendor::kNvidia);
  EXPECT_EQ(inv->gpus[2].vendor, Vendor::kAmd);
  EXPECT_EQ(inv->gpus[2].index, 2);
  EXPECT_EQ(inv->gpus[2].source_index, 0);
  EXPECT_EQ(inv->gpus[3].model_id, "MI210");
  EXPECT_EQ(LinkCellLabel(inv->links[0][1]), "NODE");  // within NVML
  EXPECT_EQ(LinkCellLabel(inv->links[2][3]), "XGMI");  // within ROCm SMI
  EXPECT_EQ(LinkCellLabel(inv->links[0][2]), "SYS");   // across vendors, by NUMA node
  EXPECT_EQ(LinkCellLabel(inv->links[3][1]), "NODE");

  auto first = all.Sample();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 4u);
  ASSERT_TRUE(ApplySamples(*first, *inv).ok());
  auto second = all.Sample();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)[1].health.lost);
  EXPECT_FALSE((*second)[2].health.lost);
}

TEST(CompositeDiscovery, MissingAndFailingLibrariesBecomeProblems) {
  ScriptFile rocm_script("GPUGEEK_FAKE_ROCM_SMI_SCRIPT", "init error=8\n");
  std::vector<std::unique_ptr<Discovery>> backends;
  backends.push_back(FakeNvml("/nonexistent/libnvidia-ml.so.1"));
  backends.push_back(FakeRocm());
  CompositeDiscovery all(std::move(backends));
  auto inv = all.Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->gpus.empty());
  ASSERT_EQ(inv->problems.size(), 2u);
  EXPECT_TRUE(inv->problems[0].starts_with("nvml: cannot load /nonexistent/libnvidia-ml.so.1")) << inv->problems[0];
  EXPECT_TRUE(inv->problems[1].starts_with("rocm_smi: rsmi_init failed")) << inv->problems[1];
  auto samples = all.Sample();
  ASSERT_TRUE(samples.ok());
  EXPECT_TRUE(samples->empty());
}

// A backend whose Sample fails outright (here: one that never discovered).
class BrokenSampler final : public Discovery {
 public:
  std::string_view name() const override { return "broken"; }
  absl::StatusOr<NodeInventory> Discover() override { return inner_->Discover(); }
  absl::StatusOr<std::vector<GpuSample>> Sample() override { return absl::UnavailableError("sampler wedged"); }

 private:
  std::unique_ptr<EmulatedDiscovery> inner_ =
      *EmulatedDiscovery::Create({"2xL4", "h", HostInfo{"h", 1, 1, 1, ""}, nullptr});
};

TEST(CompositeDiscovery, FailedBackendSampleMarksItsDevices) {
  std::vector<std::unique_ptr<Discovery>> backends;
  backends.push_back(std::make_unique<BrokenSampler>());
  backends.push_back(*EmulatedDiscovery::Create({"1xT4", "h", HostInfo{"h", 1, 1, 1, ""}, nullptr}));
  CompositeDiscovery all(std::move(backends));
  auto inv = all.Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), 3u);
  auto samples = all.Sample();
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 3u);
  EXPECT_EQ((*samples)[0].health.error, "broken: sampler wedged");
  EXPECT_EQ((*samples)[1].health.error, "broken: sampler wedged");
  EXPECT_TRUE((*samples)[2].health.Healthy());
}

}  // namespace
}  // namespace gpugeek::hw
