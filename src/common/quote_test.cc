#include "common/quote.h"

#include <gtest/gtest.h>

#include <string>

namespace gpugeek {
namespace {

TEST(QuoteForMessage, KeepsPrintableAsciiAndEscapesTheRest) {
  EXPECT_EQ(QuoteForMessage("gpu-01"), "'gpu-01'");
  EXPECT_EQ(QuoteForMessage("a\x1b[2J\n\t'\\"), "'a\\x1b[2J\\n\\t\\'\\\\'");
  EXPECT_EQ(QuoteForMessage("caf\xc3\xa9"), "'caf\\xc3\\xa9'");
  EXPECT_EQ(QuoteForMessage(std::string_view("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(QuoteForMessage(""), "''");
}

TEST(QuoteForMessage, ShowsAtMostTheFirstBytesOfALongValue) {
  EXPECT_EQ(QuoteForMessage(std::string(1 << 20, 'a')), "'" + std::string(64, 'a') + "...' (1048576 bytes)");
  EXPECT_EQ(QuoteForMessage(std::string(64, 'a')), "'" + std::string(64, 'a') + "'");
  EXPECT_EQ(QuoteForMessage("abcdef", 3), "'abc...' (6 bytes)");
}

}  // namespace
}  // namespace gpugeek
