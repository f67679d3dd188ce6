#pragma once
// fmt formatters for abseil types, so `fmt::format("{}", status.message())` and
// `fmt::format("{}", status)` work. Debian's abseil has its own absl::string_view (see
// docs/CONVENTIONS.md), which fmt does not know.

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(const absl::Status& s, FormatContext& ctx) const {
    const std::string text = s.ToString();
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
  }
};
