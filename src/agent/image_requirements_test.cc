// Which images fit a node's GPU stack, from the images' labels and the node's discovered drivers.
#include "agent/image_requirements.h"

#include <gtest/gtest.h>

namespace gpugeek::agent {
namespace {

hw::GpuDevice Gpu(int index, hw::Vendor vendor, std::string driver, std::string runtime) {
  hw::GpuDevice g;
  g.index = index;
  g.vendor = vendor;
  g.driver_version = std::move(driver);
  g.runtime_version = std::move(runtime);
  return g;
}

hw::NodeInventory Node(std::vector<hw::GpuDevice> gpus) {
  hw::NodeInventory n;
  n.gpus = std::move(gpus);
  return n;
}

TEST(WhyImageDoesNotFit, CudaVersionsCompareAsNumbersOnEveryNvidiaGpu) {
  // NVML reports the CUDA version the driver supports, e.g. 12040 -> "12.4" (nvml_discovery.cc).
  const hw::NodeInventory h100 =
      Node({Gpu(0, hw::Vendor::kNvidia, "550.54.15", "12.4"), Gpu(1, hw::Vendor::kNvidia, "550.54.15", "12.4")});
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.1"}}, h100), std::nullopt);
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.4"}}, h100), std::nullopt);
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.6"}}, h100), "needs CUDA >= 12.6; the driver of GPU 0 supports 12.4");
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "11.8"}}, Node({Gpu(0, hw::Vendor::kNvidia, "450.80", "11.0")})),
            "needs CUDA >= 11.8; the driver of GPU 0 supports 11.0");
  // 12.10 is newer than 12.9.
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.9"}}, Node({Gpu(0, hw::Vendor::kNvidia, "580", "12.10")})),
            std::nullopt);
  EXPECT_EQ(WhyImageDoesNotFit({{kDriverLabel, "535.104"}}, h100), std::nullopt);
  EXPECT_EQ(WhyImageDoesNotFit({{kDriverLabel, "555"}}, h100),
            "needs a GPU driver >= 555; GPU 0 runs driver 550.54.15");
}

TEST(WhyImageDoesNotFit, TheStackMustBeTheNodesAndStateAVersion) {
  const hw::NodeInventory mi300 = Node({Gpu(0, hw::Vendor::kAmd, "6.7.0", "6.0.2-115")});
  const hw::NodeInventory emulated = Node({Gpu(0, hw::Vendor::kNvidia, "emulated", "emulated")});
  const hw::NodeInventory cpu_only = Node({});
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.1"}}, mi300), "needs an NVIDIA GPU (CUDA); the node has none");
  EXPECT_EQ(WhyImageDoesNotFit({{kRocmLabel, "6.0"}}, mi300), std::nullopt);
  EXPECT_EQ(WhyImageDoesNotFit({{kRocmLabel, "6.1"}}, mi300),
            "needs ROCm >= 6.1; the driver of GPU 0 supports 6.0.2-115");
  EXPECT_EQ(WhyImageDoesNotFit({{kAcceleratorLabel, "rocm"}}, cpu_only), "needs an AMD GPU (ROCm); the node has none");
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.1"}}, emulated),
            "needs CUDA >= 12.1; GPU 0 states no CUDA version ('emulated')");
  EXPECT_EQ(WhyImageDoesNotFit({{kAcceleratorLabel, "cuda"}}, emulated), std::nullopt);  // no version asked
  // CPU images and unlabelled ones run anywhere.
  EXPECT_EQ(WhyImageDoesNotFit({{kAcceleratorLabel, "cpu"}}, cpu_only), std::nullopt);
  EXPECT_EQ(WhyImageDoesNotFit({{"org.opencontainers.image.title", "x"}}, mi300), std::nullopt);
  // Labels built wrong are refused, naming the label.
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "twelve"}}, emulated),
            "label org.gpugeek.cuda='twelve' is not a version (write e.g. 12.1)");
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.1."}}, emulated),
            "label org.gpugeek.cuda='12.1.' is not a version (write e.g. 12.1)");
  EXPECT_EQ(WhyImageDoesNotFit({{kAcceleratorLabel, "tpu"}}, emulated),
            "label org.gpugeek.accelerator='tpu' is not cpu, cuda or rocm");
  EXPECT_EQ(WhyImageDoesNotFit({{kCudaLabel, "12.1"}, {kRocmLabel, "6.0"}}, mi300),
            "labels org.gpugeek.cuda and org.gpugeek.rocm both set: one image, one stack");
}

}  // namespace
}  // namespace gpugeek::agent
