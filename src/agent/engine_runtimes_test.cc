#include "agent/engine_runtimes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/podman.h"

namespace gpugeek::agent {
namespace {

using Names = std::vector<std::string>;

// Lines as Debian 12's `ldconfig -p` prints them (libtorch1.13 and libopencv-dnn406 installed).
constexpr char kListing[] =
    "1650 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibtorch_python.so.1.13 (libc6,x86-64) => /lib/x86_64-linux-gnu/libtorch_python.so.1.13\n"
    "\tlibtorch_cpu.so.1.13 (libc6,x86-64) => /lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "\tlibopencv_dnn_superres.so.406 (libc6,x86-64) => /lib/x86_64-linux-gnu/libopencv_dnn_superres.so.406\n"
    "\tlibopencv_dnn.so.406 (libc6,x86-64) => /lib/x86_64-linux-gnu/libopencv_dnn.so.406\n"
    "\tlibonnx.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libonnx.so.1\n"
    "\tlibonnxruntime_providers_shared.so (libc6,x86-64) => /opt/ort/libonnxruntime_providers_shared.so\n";

TEST(EngineRuntimes, FoundByTheirLibraryInTheLinkersCache) {
  EXPECT_EQ(RuntimesInLinkerCache(kListing), (Names{"libtorch", "opencv-dnn"}));
  // ONNX Runtime and TensorRT, by an unversioned and a versioned soname; each reported once.
  EXPECT_EQ(RuntimesInLinkerCache("\tlibonnxruntime.so (libc6,x86-64) => /opt/ort/libonnxruntime.so\n"
                                  "\tlibnvinfer.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvinfer.so.8\n"
                                  "\tlibnvinfer.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvinfer.so\n"),
            (Names{"onnxruntime", "tensorrt"}));
  EXPECT_EQ(RuntimesInLinkerCache(""), Names{});
  EXPECT_EQ(RuntimesInLinkerCache("libtorch_cpu.so"), (Names{"libtorch"}));
}

TEST(EngineRuntimes, TheFlagListsNoneOrAutoDetects) {
  std::string note;
  EXPECT_EQ(*EngineRuntimesFromFlag("none", &note), Names{});
  EXPECT_EQ(*EngineRuntimesFromFlag("tensorrt, onnxruntime", &note), (Names{"onnxruntime", "tensorrt"}));
  EXPECT_EQ(EngineRuntimesFromFlag("onnxruntime,ONNX", &note).status().message(),
            "--engines[0]: a runtime name is 1-32 of [a-z0-9-], e.g. onnxruntime (auto, none, or a "
            "comma-separated list such as onnxruntime,tensorrt)");
  EXPECT_EQ(EngineRuntimesFromFlag("tensorrt,tensorrt", &note).status().message(),
            "--engines[1]: runtimes must be sorted, without duplicates (auto, none, or a comma-separated list "
            "such as onnxruntime,tensorrt)");
  // auto reads this machine's cache: what it finds is what the listing parser finds there.
  absl::StatusOr<std::vector<std::string>> found = EngineRuntimesFromFlag("auto", &note);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, RuntimesInLinkerCache(*RunCapture({"ldconfig", "-p"}))) << note;
}

}  // namespace
}  // namespace gpugeek::agent
