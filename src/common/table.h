#pragma once
// TextTable: aligned plain-text tables for terminal output (`gpugeek devices`, `catalog`, ...).

#include <string>
#include <vector>

namespace gpugeek {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  // Adds a row; a row shorter than the header is padded with empty cells.
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Marks column `index` right-aligned (numbers).
  void AlignRight(size_t index);
  // Renders with two spaces between columns and a newline after each row.
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

}  // namespace gpugeek
