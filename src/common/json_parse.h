#pragma once
// Bounded parsing of JSON from outside (API request bodies, agent messages, config.json files).
//
// nlohmann::json accepts any size and any nesting, and a hostile document costs memory and stack in
// proportion: 200 KB of `[` nested 100,000 deep crashes code that walks or destroys the tree
// recursively, and `1e400` throws an out_of_range exception that a caller catching only parse errors
// turns into a crash or a 500. ParseJsonBounded checks what it can on the raw bytes first (size, then
// nesting depth and UTF-8 in one linear scan), so nothing deep or oversized reaches the parser, and
// turns every other problem into InvalidArgument naming where it is.

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace gpugeek {

struct JsonLimits {
  size_t max_bytes = 1 << 20;  // size of the whole text, in bytes
  int max_depth = 64;          // arrays and objects open at once; a scalar at the top level is depth 0
};

// Parses one JSON document (RFC 8259, no comments, nothing but whitespace after it).
//
// Returns the value, or InvalidArgument, checked in this order:
//   - the text is over `limits.max_bytes`: "JSON text is 16777216 bytes, over the limit of 1048576
//     bytes; send a smaller document" (nothing else is looked at);
//   - nesting deeper than `limits.max_depth` (brackets inside strings do not count), found by a linear
//     scan before any parsing: "JSON nesting is deeper than 64 levels at byte offset 64; flatten the
//     document";
//   - a string holding bytes that are not UTF-8: "JSON string has invalid UTF-8 at byte offset 7;
//     send UTF-8 text";
//   - a number whose magnitude does not fit a double, or an integer literal outside the 64-bit range
//     (it would silently lose digits), named by its JSON Pointer path (RFC 6901, "(top level)" for
//     the root): "/task/tokens: number 1e400 is out of range; use a value below 1.8e308";
//   - a key given twice in one object (parsers disagree on which one wins): "/env/A: the key appears
//     twice in one object; keep one";
//   - any other syntax error: "JSON syntax error at byte offset 12: <what the parser expected>".
// Byte offsets count from 0. Never throws; cost is linear in the text size.
absl::StatusOr<nlohmann::json> ParseJsonBounded(std::string_view text, const JsonLimits& limits = {});

}  // namespace gpugeek
