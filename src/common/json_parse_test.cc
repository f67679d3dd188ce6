#include "common/json_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace gpugeek {
namespace {

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string ErrorOf(std::string_view text, const JsonLimits& limits = {}) {
  auto j = ParseJsonBounded(text, limits);
  if (j.ok()) return "(ok)";
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(j.status().message());
}

TEST(ParseJsonBounded, ParsesADocument) {
  auto j = ParseJsonBounded(R"({"name": "gpu-01", "gpus": [1, 2], "x": {"y": -3.5, "z": null, "b": true},
                                "big": 18446744073709551615, "neg": -9223372036854775808})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->dump(), R"({"big":18446744073709551615,"gpus":[1,2],"name":"gpu-01","neg":-9223372036854775808,)"
                       R"("x":{"b":true,"y":-3.5,"z":null}})");
  EXPECT_EQ(ParseJsonBounded("  7 ")->get<int>(), 7);
  EXPECT_EQ(ParseJsonBounded(R"("h\u00e9\"[{")")->get<std::string>(), "h\xc3\xa9\"[{");
}

TEST(ParseJsonBounded, DepthAtTheLimitIsAcceptedOneMoreIsRefused) {
  auto ok = ParseJsonBounded(Nested(64));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ErrorOf(Nested(65)), "JSON nesting is deeper than 64 levels at byte offset 64; flatten the document");
  EXPECT_EQ(ErrorOf(R"({"a":{"b":{"c":1}}})", {.max_depth = 2}),
            "JSON nesting is deeper than 2 levels at byte offset 10; flatten the document");
}

TEST(ParseJsonBounded, MillionLevelsAreRefusedByTheScanNotTheParser) {
  // 1e6 levels crash a recursive walk or destructor; the scan stops at level 65.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_EQ(ErrorOf(deep, {.max_bytes = 4 << 20}),
            "JSON nesting is deeper than 64 levels at byte offset 64; flatten the document");
  const std::string open_only(1'000'000, '{');
  EXPECT_EQ(ErrorOf(open_only), "JSON nesting is deeper than 64 levels at byte offset 64; flatten the document");
}

TEST(ParseJsonBounded, BracketsInsideStringsDoNotCount) {
  const std::string brackets(200, '[');
  auto j = ParseJsonBounded(R"({"k": ")" + brackets + R"({{{\"[[[\\"})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["k"].get<std::string>(), brackets + "{{{\"[[[\\");
  // An escaped quote does not end the string: the brackets after it are still inside.
  EXPECT_TRUE(ParseJsonBounded(R"(["\"[[[[", 1])", {.max_depth = 1}).ok());
}

TEST(ParseJsonBounded, NumbersBeyondADoubleNameTheirPath) {
  EXPECT_EQ(ErrorOf(R"({"task": {"kind": "lora", "tokens": 1e400}})"),
            "/task/tokens: number 1e400 is out of range; use a value below 1.8e308");
  EXPECT_EQ(ErrorOf(R"({"a": [0, {"b": [1, -1e400]}]})"),
            "/a/1/b/1: number -1e400 is out of range; use a value above -1.8e308");
  EXPECT_EQ(ErrorOf("1e400"), "(top level): number 1e400 is out of range; use a value below 1.8e308");
  EXPECT_EQ(ErrorOf(R"({"a/b~c": 2E+999})"), "/a~1b~0c: number 2E+999 is out of range; use a value below 1.8e308");
  auto small = ParseJsonBounded("[1e308, 1e-400]");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)[0].get<double>(), 1e308);
}

TEST(ParseJsonBounded, IntegersBeyondSixtyFourBitsAreRefused) {
  EXPECT_EQ(ErrorOf(R"({"epoch": 99999999999999999999999})"),
            "/epoch: integer 99999999999999999999999 is out of range; use a value between "
            "-9223372036854775808 and 18446744073709551615");
  EXPECT_EQ(ErrorOf("[-9223372036854775809]"),
            "/0: integer -9223372036854775809 is out of range; use a value between -9223372036854775808 and "
            "18446744073709551615");
  EXPECT_EQ(ErrorOf("[" + std::string(100, '9') + "]"),
            "/0: integer 9999999999999999999999999999999999999999... (100 characters) is out of range; use a "
            "value between -9223372036854775808 and 18446744073709551615");
  // A literal beyond even a double is reported as such.
  EXPECT_EQ(ErrorOf("[" + std::string(400, '9') + "]"),
            "/0: number 9999999999999999999999999999999999999999... (400 characters) is out of range; use a "
            "value below 1.8e308");
}

TEST(ParseJsonBounded, OversizedTextIsRefusedBeforeAnythingElse) {
  const std::string big(16 << 20, ' ');
  EXPECT_EQ(ErrorOf(big), "JSON text is 16777216 bytes, over the limit of 1048576 bytes; send a smaller document");
  EXPECT_EQ(ErrorOf("[1, 2]", {.max_bytes = 5}),
            "JSON text is 6 bytes, over the limit of 5 bytes; send a smaller document");
}

TEST(ParseJsonBounded, SyntaxErrorsNameTheByteOffset) {
  EXPECT_EQ(ErrorOf(R"({"a": tru})"),
            "JSON syntax error at byte offset 9: syntax error while parsing value - invalid literal");
  EXPECT_EQ(ErrorOf("{"),
            "JSON syntax error at byte offset 1: syntax error while parsing object key - unexpected end of input; "
            "expected string literal");
  EXPECT_EQ(ErrorOf("[1] x"),
            "JSON syntax error at byte offset 4: syntax error while parsing value - invalid literal; expected end of "
            "input");
  EXPECT_EQ(ErrorOf(""),
            "JSON syntax error at byte offset 0: syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
}

TEST(ParseJsonBounded, InvalidUtf8IsRefusedWithItsOffset) {
  EXPECT_EQ(ErrorOf("[\"ok\", \"a\xff\"]"), "JSON string has invalid UTF-8 at byte offset 9; send UTF-8 text");
  EXPECT_EQ(ErrorOf("[\"\xc0\xaf\"]"), "JSON string has invalid UTF-8 at byte offset 2; send UTF-8 text");  // overlong
  EXPECT_EQ(ErrorOf("[\"\xed\xa0\x80\"]"), "JSON string has invalid UTF-8 at byte offset 2; send UTF-8 text");
  EXPECT_EQ(ErrorOf("[\"\xe2\x82\"]"), "JSON string has invalid UTF-8 at byte offset 2; send UTF-8 text");
  EXPECT_TRUE(ParseJsonBounded("[\"\xe2\x82\xac \xf0\x9f\x98\x80\"]").ok());
}

TEST(ParseJsonBounded, DuplicateKeysAreRefused) {
  EXPECT_EQ(ErrorOf(R"({"env": {"A": "1", "A": "2"}})"), "/env/A: the key appears twice in one object; keep one");
  EXPECT_EQ(ErrorOf(R"([{"a": 1}, {"b": 1, "b": 2}])"), "/1/b: the key appears twice in one object; keep one");
}

TEST(ParseJsonBounded, KeysInMessagesAreEscapedAndBounded) {
  EXPECT_EQ(ErrorOf("{\"\\u001b[2J\": 1e999}"), "/\\x1b[2J: number 1e999 is out of range; use a value below 1.8e308");
  const std::string long_key(1000, 'k');
  EXPECT_EQ(ErrorOf("{\"" + long_key + "\": 1e999}"),
            "/" + std::string(64, 'k') + "...: number 1e999 is out of range; use a value below 1.8e308");
}

}  // namespace
}  // namespace gpugeek
