#include "common/json_parse.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/quote.h"
#include "common/utf8.h"

namespace gpugeek {
namespace {

using nlohmann::json;

// nlohmann's exception id for "number overflow parsing '1e400'" (a literal beyond the double range).
constexpr int kNumberOverflowId = 406;

// One pass over the raw text: nesting depth (counting brackets outside strings only) and UTF-8 inside
// strings. Syntax is left to the parser; this only guarantees that what reaches it is shallow.
absl::Status PreScan(std::string_view text, int max_depth) {
  int depth = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"') {
      for (++i; i < n && text[i] != '"';) {
        const auto s = static_cast<unsigned char>(text[i]);
        if (s == '\\') {
          // Skip the escaped character when it is ASCII (\" must not end the string); anything else
          // after a backslash is a syntax error the parser reports.
          i += (i + 1 < n && static_cast<unsigned char>(text[i + 1]) < 0x80) ? 2 : 1;
        } else if (s < 0x80) {
          ++i;
        } else {
          const size_t len = Utf8SequenceLength(text, i);
          if (len == 0) {
            return absl::InvalidArgumentError(
                fmt::format("JSON string has invalid UTF-8 at byte offset {}; send UTF-8 text", i));
          }
          i += len;
        }
      }
      ++i;  // the closing quote
      continue;
    }
    if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(
            fmt::format("JSON nesting is deeper than {} levels at byte offset {}; flatten the document", max_depth, i));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    ++i;
  }
  return absl::OkStatus();
}

// A number literal, shortened for a message (a hostile one may be a megabyte of digits).
std::string ShortLiteral(std::string_view s) {
  constexpr size_t kShown = 40;
  if (s.size() <= kShown) return EscapeForMessage(s);
  return fmt::format("{}... ({} characters)", EscapeForMessage(s.substr(0, kShown)), s.size());
}

// nlohmann SAX handler that builds the DOM as nlohmann's own does, and also knows the JSON Pointer of
// the value being read, so range and duplicate-key errors can name it.
class BoundedDomBuilder {
 public:
  explicit BoundedDomBuilder(json& root) : root_(root) {}

  bool null() { return Put(nullptr); }
  bool boolean(bool v) { return Put(v); }
  bool number_integer(json::number_integer_t v) { return Put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Put(v); }
  bool number_float(json::number_float_t v, const json::string_t& literal) {
    // nlohmann reads an integer literal beyond int64/uint64 as a double, silently dropping digits
    // (99999999999999999999999 becomes 1e23); an id or a count read that way is wrong, so refuse it.
    if (literal.find_first_of(".eE") == std::string::npos) {
      error_ = absl::InvalidArgumentError(
          fmt::format("{}: integer {} is out of range; use a value between -9223372036854775808 and "
                      "18446744073709551615",
                      Path(), ShortLiteral(literal)));
      return false;
    }
    return Put(v);
  }
  bool string(json::string_t& v) { return Put(std::move(v)); }
  bool binary(json::binary_t& v) { return Put(std::move(v)); }  // never called for JSON text

  bool start_object(std::size_t /*elements*/) {
    json* object = Put(json::object());
    stack_.push_back({object, {}});
    return true;
  }
  bool key(json::string_t& k) {
    Frame& f = stack_.back();
    f.key = std::move(k);
    if (f.container->contains(f.key)) {
      error_ = absl::InvalidArgumentError(
          fmt::format("{}: the key appears twice in one object; keep one", Path(/*value_pending=*/false)));
      return false;
    }
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    json* array = Put(json::array());
    stack_.push_back({array, {}});
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& last_token, const json::exception& ex) {
    if (ex.id == kNumberOverflowId) {
      const bool negative = !last_token.empty() && last_token[0] == '-';
      error_ = absl::InvalidArgumentError(fmt::format("{}: number {} is out of range; use a value {}", Path(),
                                                      ShortLiteral(last_token),
                                                      negative ? "above -1.8e308" : "below 1.8e308"));
      return false;
    }
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 3: syntax error ...;
    // last read: '<token>'...". Keep the reason. The "last read" text is dropped: it holds raw input
    // (unbounded, unescaped) and often more than the token (`{"a": tru}` reads '"a": tru}').
    std::string reason = ex.what();
    if (const size_t at = reason.find("parse error"); at != std::string::npos) {
      if (const size_t colon = reason.find(": ", at); colon != std::string::npos) reason.erase(0, colon + 2);
    }
    const std::string raw = "; last read: '" + last_token + "'";
    if (const size_t at = reason.find(raw); at != std::string::npos) {
      reason.erase(at, raw.size());
    }
    // nlohmann counts characters read, the offending one included: offset = count - 1.
    error_ = absl::InvalidArgumentError(
        fmt::format("JSON syntax error at byte offset {}: {}", position > 0 ? position - 1 : 0, reason));
    return false;
  }

  const absl::Status& error() const { return error_; }

 private:
  struct Frame {
    json* container;
    std::string key;  // objects: the key of the member being read
  };

  // Stores `v` where the document is being built and returns it.
  template <typename T>
  json* Put(T&& v) {
    if (stack_.empty()) {
      root_ = json(std::forward<T>(v));
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.container->is_array()) {
      f.container->push_back(json(std::forward<T>(v)));
      return &f.container->back();
    }
    json& slot = (*f.container)[f.key];
    slot = json(std::forward<T>(v));
    return &slot;
  }

  // JSON Pointer of the value being read. `value_pending`: the innermost array has not received the
  // value yet (its index is the array's size); outer containers already hold the child being read.
  std::string Path(bool value_pending = true) const {
    if (stack_.empty()) return "(top level)";
    std::string path;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      path += '/';
      if (f.container->is_array()) {
        const bool innermost = i + 1 == stack_.size();
        path += std::to_string(f.container->size() - ((innermost && value_pending) ? 0 : 1));
      } else {
        std::string token;  // RFC 6901: '~' -> "~0", '/' -> "~1"
        for (char c : f.key) token += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
        path += token.size() <= 64 ? EscapeForMessage(token) : EscapeForMessage(token.substr(0, 64)) + "...";
      }
    }
    return path;
  }

  json& root_;
  std::vector<Frame> stack_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<json> ParseJsonBounded(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(fmt::format(
        "JSON text is {} bytes, over the limit of {} bytes; send a smaller document", text.size(), limits.max_bytes));
  }
  if (absl::Status s = PreScan(text, limits.max_depth); !s.ok()) return s;
  json root;
  BoundedDomBuilder builder(root);
  try {
    if (!json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true,
                         /*ignore_comments=*/false)) {
      if (!builder.error().ok()) return builder.error();
      return absl::InvalidArgumentError("JSON text could not be parsed");
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("JSON text could not be parsed: {}", e.what()));
  }
  return root;
}

}  // namespace gpugeek
