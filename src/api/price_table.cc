#include "api/price_table.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "api/quantity.h"

namespace gpugeek::api {
namespace {

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

absl::StatusOr<PriceTable> ParsePriceTable(std::string_view text, std::string_view file_name) {
  PriceTable table;
  int line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    line = Trim(line);
    if (line.empty() || line.front() == '#' || line.starts_with("gpu_model,")) continue;
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: {}", file_name, line_no, what));
    };
    const std::vector<std::string_view> f = Split(line, ',');
    if (f.size() != 3) {
      return error(fmt::format("{} fields; want GPU_MODEL,CAPACITY,PRICE such as A100-SXM-80GB,spot,1.23", f.size()));
    }
    const std::string model(Trim(f[0]));
    const std::string capacity(Trim(f[1]));
    if (model.empty()) return error("empty GPU model: name a catalog id such as A100-SXM-80GB (gpugeek catalog)");
    if (capacity != "on-demand" && capacity != "spot" && capacity != "reserved") {
      return error(fmt::format("capacity '{}' must be on-demand, spot or reserved", capacity));
    }
    absl::StatusOr<int64_t> price = ParseMoneyMicros(Trim(f[2]));
    if (!price.ok()) return error(fmt::format("price: {}", std::string(price.status().message())));
    if (!table.emplace(std::pair{model, capacity}, *price).second) {
      return error(fmt::format("{} {} is priced twice", model, capacity));
    }
  }
  if (table.empty())
    return absl::InvalidArgumentError(fmt::format("{}: no price line (GPU_MODEL,CAPACITY,PRICE)", file_name));
  return table;
}

absl::StatusOr<PriceTable> ReadPriceTable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParsePriceTable(ss.str(), path);
}

}  // namespace gpugeek::api
