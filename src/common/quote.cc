#include "common/quote.h"

#include <fmt/format.h>

namespace gpugeek {

std::string EscapeForMessage(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          out += ch;
        } else {
          out += fmt::format("\\x{:02x}", c);
        }
    }
  }
  return out;
}

std::string QuoteForMessage(std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return fmt::format("'{}'", EscapeForMessage(value));
  return fmt::format("'{}...' ({} bytes)", EscapeForMessage(value.substr(0, max_bytes)), value.size());
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

}  // namespace gpugeek
