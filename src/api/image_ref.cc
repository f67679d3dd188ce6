#include "api/image_ref.h"

#include <fmt/format.h>

#include <vector>

#include "common/quote.h"

namespace gpugeek::api {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// COMPONENT = [a-z0-9]+ ((".", "_", "__", "-"+) [a-z0-9]+)*
bool IsPathComponent(std::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  for (size_t i = 0; i < c.size();) {
    if (IsLowerAlnum(c[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < c.size() && !IsLowerAlnum(c[j])) ++j;
    const std::string_view sep = c.substr(i, j - i);
    const bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

// A registry host: DNS labels of letters, digits and '-', separated by '.', with an optional ":PORT".
bool IsDomain(std::string_view d) {
  const size_t colon = d.find(':');
  std::string_view host = d.substr(0, colon);
  if (colon != std::string_view::npos) {
    const std::string_view port = d.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) return false;
  }
  if (host.empty()) return false;
  size_t start = 0;
  while (start <= host.size()) {
    const size_t dot = host.find('.', start);
    const std::string_view label = host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!IsAlnum(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

bool IsTag(std::string_view t) {
  if (t.empty() || t.size() > 128 || !(IsAlnum(t.front()) || t.front() == '_')) return false;
  for (char c : t) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

absl::Status Refuse(std::string_view field, std::string_view ref, std::string_view why) {
  return absl::InvalidArgumentError(
      fmt::format("{}: {} is not an image reference: {}; write NAME[:TAG] with lower-case path components, e.g. "
                  "localhost/pytorch:bookworm or busybox (podman images lists a node's images)",
                  field, QuoteForMessage(ref), why));
}

}  // namespace

absl::StatusOr<std::string> CanonicalImageRef(std::string_view field, std::string_view ref) {
  if (ref.empty()) return Refuse(field, ref, "it is empty");
  if (ref.size() > kMaxImageRefBytes) {
    return Refuse(field, ref, fmt::format("it is longer than {} bytes", kMaxImageRefBytes));
  }
  for (char c : ref) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-' && c != '/' && c != ':') {
      return Refuse(field, ref, "only letters, digits, '.', '_', '-', '/' and ':' may appear");
    }
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t slash = ref.find('/', start);
    parts.push_back(ref.substr(start, slash == std::string_view::npos ? ref.npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  // The tag: after the last ':' of the last part (a ':' before that belongs to a domain's port).
  std::string_view last = parts.back();
  std::string_view tag = "latest";
  if (const size_t colon = last.find(':'); colon != std::string_view::npos) {
    tag = last.substr(colon + 1);
    last = last.substr(0, colon);
    if (!IsTag(tag)) {
      return Refuse(field, ref, "the tag must be 1-128 letters, digits, '_', '.' or '-', not starting with '.' or '-'");
    }
    parts.back() = last;
  }
  std::string domain = "localhost";
  size_t first = 0;
  if (parts.size() > 1 && (parts[0] == "localhost" || parts[0].find_first_of(".:") != std::string_view::npos)) {
    if (!IsDomain(parts[0])) return Refuse(field, ref, fmt::format("'{}' is not a registry host", parts[0]));
    domain = std::string(parts[0]);
    first = 1;
  }
  std::string path;
  for (size_t i = first; i < parts.size(); ++i) {
    if (!IsPathComponent(parts[i])) {
      return Refuse(field, ref,
                    fmt::format("path component '{}' must be lower-case letters and digits, separated by "
                                "'.', '_', '__' or dashes",
                                parts[i]));
    }
    path += (path.empty() ? "" : "/") + std::string(parts[i]);
  }
  std::string canonical = fmt::format("{}/{}:{}", domain, path, tag);
  if (canonical.size() > kMaxImageRefBytes) {
    return Refuse(field, ref, fmt::format("it is longer than {} bytes", kMaxImageRefBytes));
  }
  return canonical;
}

}  // namespace gpugeek::api
