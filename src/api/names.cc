#include "api/names.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <string>

#include "common/quote.h"

namespace gpugeek::api {
namespace {

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsLetter(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLetter(c) || IsDigit(c); }

struct NameRule {
  size_t max_size;
  bool (*allowed)(char);
  bool (*first)(char);  // the first character
  bool (*last)(char);   // the last character
  const char* text;     // the rule, as the message states it
};

NameRule RuleFor(NameKind kind) {
  switch (kind) {
    case NameKind::kNode:
      return {128, [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; }, IsAlnum,
              [](char) { return true; },
              "a node name is 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. "
              "gpu-node-01)"};
    case NameKind::kJob:
      return {128, [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; }, [](char) { return true; },
              [](char) { return true; },
              "a job name is 1-128 letters, digits, '.', '_' or '-', other than '.' and '..' (e.g. llama2-70b-lora)"};
    case NameKind::kTenant:
      break;
  }
  return {63, [](char c) { return IsLower(c) || IsDigit(c) || c == '-'; }, IsLower,
          [](char c) { return IsLower(c) || IsDigit(c); },
          "a tenant is 1-63 lower-case letters, digits or '-', starting with a letter and ending with a letter or "
          "digit (e.g. team-a)"};
}

absl::Status Refuse(std::string_view field, std::string_view problem, std::string_view fix) {
  return absl::InvalidArgumentError(fmt::format("{}: {}; {}", field, problem, fix));
}

constexpr const char* kHostPortFix = "write host:port, e.g. 10.0.0.7:9400, [fd00::7]:9400 or gpu-node-01.lan:9400";

// A DNS name of labels (RFC 1123 section 2.1): the empty string when valid, else the problem.
std::string DnsNameProblem(std::string_view host) {
  if (host.size() > 253) return fmt::format("has a host of {} characters (at most 253)", host.size());
  size_t start = 0;
  while (true) {
    const size_t dot = host.find('.', start);
    const std::string_view label = host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    if (label.empty()) return "has an empty label in its host name (two dots, or a dot at an end)";
    if (label.size() > 63) return fmt::format("has a host name label of {} characters (at most 63)", label.size());
    for (size_t i = 0; i < label.size(); ++i) {
      const char c = label[i];
      if (!IsAlnum(c) && c != '-') {
        return fmt::format("has {} in its host name; a host name is letters, digits, '-' and '.'",
                           QuoteForMessage(std::string_view(&label[i], 1)));
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return fmt::format("has a host name label {} starting or ending with '-'", QuoteForMessage(label));
    }
    if (dot == std::string_view::npos) return "";
    start = dot + 1;
  }
}

}  // namespace

absl::Status ValidateName(std::string_view field, std::string_view value, NameKind kind) {
  const NameRule rule = RuleFor(kind);
  if (value.empty()) return Refuse(field, "is empty", rule.text);
  const std::string quoted = QuoteForMessage(value);
  if (value.size() > rule.max_size) {
    return Refuse(field, fmt::format("{} is too long ({} characters)", quoted, value.size()), rule.text);
  }
  for (size_t i = 0; i < value.size(); ++i) {
    if (!rule.allowed(value[i])) {
      return Refuse(field, fmt::format("{} has {} at offset {}", quoted, QuoteForMessage(value.substr(i, 1)), i),
                    rule.text);
    }
  }
  if (!rule.first(value.front())) {
    return Refuse(field, fmt::format("{} starts with {}", quoted, QuoteForMessage(value.substr(0, 1))), rule.text);
  }
  if (!rule.last(value.back())) {
    return Refuse(field, fmt::format("{} ends with {}", quoted, QuoteForMessage(value.substr(value.size() - 1))),
                  rule.text);
  }
  // "." and ".." would name the directory itself or its parent wherever a name becomes a path.
  if (value == "." || value == "..") return Refuse(field, fmt::format("{} is reserved", quoted), rule.text);
  return absl::OkStatus();
}

absl::Status ValidateHostPort(std::string_view field, std::string_view value) {
  if (value.empty()) return Refuse(field, "is empty", kHostPortFix);
  const std::string quoted = QuoteForMessage(value);
  // 253 for a DNS name, 2 brackets, ':' and 5 digits: anything longer cannot be valid.
  if (value.size() > 261) return Refuse(field, fmt::format("{} is too long", quoted), kHostPortFix);
  std::string_view host, port;
  if (value.front() == '[') {
    const size_t close = value.find(']');
    if (close == std::string_view::npos) {
      return Refuse(field, fmt::format("{} opens '[' without closing it", quoted), kHostPortFix);
    }
    host = value.substr(1, close - 1);
    const std::string_view rest = value.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return Refuse(field, fmt::format("{} has no ':port' after the ']'", quoted), kHostPortFix);
    }
    port = rest.substr(1);
    in6_addr addr;
    if (inet_pton(AF_INET6, std::string(host).c_str(), &addr) != 1) {
      return Refuse(field,
                    fmt::format("{} has {} in brackets, which is not an IPv6 address", quoted, QuoteForMessage(host)),
                    kHostPortFix);
    }
  } else {
    const size_t colon = value.rfind(':');
    if (colon == std::string_view::npos) return Refuse(field, fmt::format("{} has no port", quoted), kHostPortFix);
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (host.empty()) return Refuse(field, fmt::format("{} has no host", quoted), kHostPortFix);
    if (host.find(':') != std::string_view::npos) {
      return Refuse(field, fmt::format("{} has ':' in its host; put an IPv6 address in brackets", quoted),
                    kHostPortFix);
    }
    if (host.find_first_not_of("0123456789.") == std::string_view::npos) {
      in_addr addr;
      if (inet_pton(AF_INET, std::string(host).c_str(), &addr) != 1) {
        return Refuse(field, fmt::format("{} has {}, which is not an IPv4 address", quoted, QuoteForMessage(host)),
                      kHostPortFix);
      }
    } else if (const std::string problem = DnsNameProblem(host); !problem.empty()) {
      return Refuse(field, fmt::format("{} {}", quoted, problem), kHostPortFix);
    }
  }
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && IsDigit(c);
  const int number = digits ? std::stoi(std::string(port)) : 0;
  if (number < 1 || number > 65535) {
    return Refuse(field, fmt::format("{} has port {}, not a number 1-65535", quoted, QuoteForMessage(port)),
                  kHostPortFix);
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::api
