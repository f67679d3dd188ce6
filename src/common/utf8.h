#pragma once
// UTF-8 validation (RFC 3629): what JSON text and the names gpugeek stores must be.

#include <cstddef>
#include <string_view>

namespace gpugeek {

// Length of the UTF-8 sequence starting at text[i] (a byte >= 0x80), or 0 when it is not well formed
// (RFC 3629 table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// Whether all of `text` is well-formed UTF-8 in the sense above.
bool IsUtf8(std::string_view text);

}  // namespace gpugeek
