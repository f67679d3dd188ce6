#include "workload/model_config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace gpugeek::workload {
namespace {

std::string ErrorOf(std::string_view text) {
  auto c = ParseModelConfig(text);
  if (c.ok()) return "(ok)";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

constexpr char kLlama[] = R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,)"
                          R"("num_attention_heads":4,"vocab_size":1000)";

TEST(ParseModelConfig, HostileJsonIsRefusedBeforeTheReaderSeesIt) {
  // 100,000 levels under a field the reader never looks at: refused by the scan, not walked.
  const std::string deep =
      std::string(kLlama) + R"(,"model_config":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  EXPECT_EQ(ErrorOf(deep), fmt::format("model_config: JSON nesting is deeper than 64 levels at byte offset {}; "
                                       "flatten the document",
                                       std::string(kLlama).size() + 16 + 63));
  EXPECT_EQ(ErrorOf(std::string(kLlama) + R"(,"rope_theta":1e400})"),
            "model_config: /rope_theta: number 1e400 is out of range; use a value below 1.8e308");
  EXPECT_EQ(ErrorOf(std::string((4 << 20) + 1, ' ')),
            "model_config: JSON text is 4194305 bytes, over the limit of 4194304 bytes; send a smaller document");
  EXPECT_EQ(ErrorOf("{"),
            "model_config: JSON syntax error at byte offset 1: syntax error while parsing object key - "
            "unexpected end of input; expected string literal");
}

TEST(ParseModelConfig, ConfigWithinTheLimitsIsRead) {
  auto c = ParseModelConfig(std::string(kLlama) + R"(,"rope_scaling":{"type":"linear","factor":2.0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->num_layers, 2);
}

}  // namespace
}  // namespace gpugeek::workload
