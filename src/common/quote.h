#pragma once
// Quoting of untrusted text for error messages and logs: a value from outside (a name, a JSON key)
// may be megabytes long or hold escape sequences that would rewrite a terminal, so messages show a
// bounded, printable rendering of it instead of the raw bytes.

#include <cstddef>
#include <string>
#include <string_view>

namespace gpugeek {

// Returns `value` in single quotes with at most the first `max_bytes` bytes shown; printable ASCII is
// kept, `\` and `'` are backslash-escaped, \n \r \t are written as such and every other byte
// (control characters, bytes >= 0x80) as \xNN. A longer value ends in "..." followed by its length:
//   QuoteForMessage("gpu-01")           -> 'gpu-01'
//   QuoteForMessage("a\x1b[2J")         -> 'a\x1b[2J'
//   QuoteForMessage(std::string(1 << 20, 'a')) -> 'aa<64 a's in all>aa...' (1048576 bytes)
std::string QuoteForMessage(std::string_view value, size_t max_bytes = 64);

// The escaping of QuoteForMessage without quotes or truncation, for one character or a short piece.
std::string EscapeForMessage(std::string_view value);

// `text` as one POSIX shell word: in single quotes, each ' written as '\'' (any bytes pass unchanged).
//   ShellQuote("it's") -> 'it'\''s'
std::string ShellQuote(std::string_view text);

}  // namespace gpugeek
