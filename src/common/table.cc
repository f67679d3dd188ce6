#include "common/table.h"

#include <algorithm>

namespace gpugeek {

void TextTable::AlignRight(size_t index) {
  if (right_.size() <= index) right_.resize(index + 1, false);
  right_[index] = true;
}

std::string TextTable::Render() const {
  const size_t columns = header_.size();
  std::vector<size_t> width(columns, 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < columns && c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string& cell = c < row.size() ? row[c] : std::string();
      const std::string pad(width[c] - cell.size(), ' ');
      const bool right = c < right_.size() && right_[c];
      line += right ? pad + cell : cell + (c + 1 < columns ? pad : "");
      if (c + 1 < columns) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace gpugeek
