#pragma once
// AbslView: a std::string_view as Debian's absl::string_view (a type of its own there, see docs/CONVENTIONS.md), for
// absl::StrCat, StrSplit and EqualsIgnoreCase on std::string_view text. No copy.

#include <string_view>

#include "absl/strings/string_view.h"

namespace gpugeek {

inline absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace gpugeek
