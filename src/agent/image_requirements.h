#pragma once
// Which container images fit this node's GPU stack. An image states what it needs in its labels (set
// when it is built: scripts/build-pytorch-image.sh --cuda 12.1 / --rocm 6.0); the agent offers the
// scheduler only the images its driver and runtime satisfy, and reports the others with the reason
// (Registration::unfit_images, `gpugeek images`). The labels:
//
//   org.gpugeek.accelerator  cpu | cuda | rocm   cuda/rocm: the node needs an NVIDIA / AMD GPU (cpu: any
//                                                node, GPUs or not, as an image without the label)
//   org.gpugeek.cuda         MAJOR.MINOR         the CUDA version every NVIDIA GPU's driver supports must
//                                                be at least this (NVML's cudaDriverVersion, GpuDevice::
//                                                runtime_version "12.4"); implies accelerator cuda
//   org.gpugeek.rocm         MAJOR.MINOR[.PATCH] the node's ROCm release (/opt/rocm/.info/version) must be
//                                                at least this; implies accelerator rocm
//   org.gpugeek.driver       dotted numbers      every GPU's kernel driver (GpuDevice::driver_version,
//                                                "550.54.15") must be at least this
//
// Versions compare component by component as numbers (12.10 > 12.9). A GPU whose driver states no
// version (an emulated GPU: "emulated") satisfies no version requirement. A label value that is not a
// version makes the image unfit, naming the label (an image built wrong is never run by chance).

#include <map>
#include <optional>
#include <string>

#include "hw/device.h"

namespace gpugeek::agent {

inline constexpr char kAcceleratorLabel[] = "org.gpugeek.accelerator";
inline constexpr char kCudaLabel[] = "org.gpugeek.cuda";
inline constexpr char kRocmLabel[] = "org.gpugeek.rocm";
inline constexpr char kDriverLabel[] = "org.gpugeek.driver";

// Why an image with `labels` cannot run on a node with `inventory`, e.g. "needs CUDA >= 12.6; the driver
// of GPU 0 supports 12.4"; nullopt when it fits.
std::optional<std::string> WhyImageDoesNotFit(const std::map<std::string, std::string>& labels,
                                              const hw::NodeInventory& inventory);

}  // namespace gpugeek::agent
