#include "api/engines.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

namespace gpugeek::api {
namespace {

using Names = std::vector<std::string>;

TEST(EngineFormats, EachFormatHasItsRuntimes) {
  EXPECT_EQ(RuntimesFor("torchscript"), (Names{"libtorch"}));
  EXPECT_EQ(RuntimesFor("onnx"), (Names{"onnxruntime", "opencv-dnn", "tensorrt"}));
  // OpenCV 4.6's importer has no per-axis DequantizeLinear (docs/models.md): not a runtime of QDQ graphs.
  EXPECT_EQ(RuntimesFor("onnx-int8"), (Names{"onnxruntime", "tensorrt"}));
  EXPECT_EQ(RuntimesFor("tensorrt"), (Names{"tensorrt"}));
  EXPECT_EQ(RuntimesFor("safetensors"), Names{});
  for (std::string_view f : EngineFormats()) EXPECT_FALSE(RuntimesFor(f).empty()) << f;
  // The table is in name order, as Registration::engines must be.
  for (size_t i = 1; i < EngineRuntimes().size(); ++i) {
    EXPECT_LT(EngineRuntimes()[i - 1].name, EngineRuntimes()[i].name);
  }
}

TEST(EngineFormats, EngineFilesAreKnownByTheirEnding) {
  EXPECT_TRUE(IsEngineFile("onnx", "engines/model.onnx"));
  EXPECT_TRUE(IsEngineFile("onnx-int8", "model.int8.onnx"));
  EXPECT_TRUE(IsEngineFile("torchscript", "model.torchscript.pt"));
  EXPECT_TRUE(IsEngineFile("tensorrt", "gpt-h100.plan"));
  EXPECT_FALSE(IsEngineFile("onnx", "model.safetensors"));
  EXPECT_FALSE(IsEngineFile("onnx", ".onnx"));  // a name, not only an ending
  EXPECT_FALSE(IsEngineFile("tensorrt", "model.onnx"));
  EXPECT_FALSE(IsEngineFile("pickle", "model.pt"));
}

TEST(EngineFormats, AnUnknownFormatIsRefusedListingTheFormats) {
  EXPECT_EQ(*ParseEngineFormat("engine", "onnx-int8"), "onnx-int8");
  EXPECT_EQ(ParseEngineFormat("engine", "ONNX").status().message(),
            "engine: unknown engine format 'ONNX'; one of torchscript, onnx, onnx-int8, tensorrt");
}

TEST(EngineFormats, ANodesRuntimeListIsSortedBoundedAndNamedPlainly) {
  EXPECT_TRUE(ValidateEngineRuntimes("engines", {}).ok());
  EXPECT_TRUE(ValidateEngineRuntimes("engines", {"libtorch", "opencv-dnn", "some-future-runtime2"}).ok());
  EXPECT_EQ(ValidateEngineRuntimes("engines", {"opencv-dnn", "libtorch"}).message(),
            "engines[1]: runtimes must be sorted, without duplicates");
  EXPECT_EQ(ValidateEngineRuntimes("engines", {"libtorch", "libtorch"}).message(),
            "engines[1]: runtimes must be sorted, without duplicates");
  EXPECT_EQ(ValidateEngineRuntimes("engines", {"Lib Torch"}).message(),
            "engines[0]: a runtime name is 1-32 of [a-z0-9-], e.g. onnxruntime");
  EXPECT_EQ(ValidateEngineRuntimes("engines", {""}).message(),
            "engines[0]: a runtime name is 1-32 of [a-z0-9-], e.g. onnxruntime");
  EXPECT_EQ(ValidateEngineRuntimes("engines", {std::string(33, 'a')}).message(),
            "engines[0]: a runtime name is 1-32 of [a-z0-9-], e.g. onnxruntime");
  Names many;
  for (int i = 0; i < 33; ++i) many.push_back(fmt::format("r{:02}", i));
  EXPECT_EQ(ValidateEngineRuntimes("engines", many).message(), "engines: at most 32 runtimes");
}

}  // namespace
}  // namespace gpugeek::api
