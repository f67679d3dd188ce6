#include "archive/link_target.h"

namespace gpugeek::archive {

bool RelativeLinkStaysInside(int depth, std::string_view target) {
  if (target.empty() || target.front() == '/' || target.find('\0') != std::string_view::npos) return false;
  size_t i = 0;
  while (i <= target.size()) {
    size_t j = target.find('/', i);
    if (j == std::string_view::npos) j = target.size();
    const std::string_view part = target.substr(i, j - i);
    if (part == "..") {
      if (--depth < 0) return false;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
    i = j + 1;
  }
  return true;
}

}  // namespace gpugeek::archive
