#include "api/price_table.h"

#include <fmt/format.h>

#include "api/csv_lines.h"
#include "api/quantity.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::api {

absl::StatusOr<PriceTable> ParsePriceTable(std::string_view text, std::string_view file_name) {
  PriceTable table;
  RETURN_IF_ERROR(ForEachCsvRecord(text, "gpu_model,", [&](int line_no, const std::vector<std::string>& f) {
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: {}", file_name, line_no, what));
    };
    if (f.size() != 3) {
      return error(fmt::format("{} fields; want GPU_MODEL,CAPACITY,PRICE such as A100-SXM-80GB,spot,1.23", f.size()));
    }
    const std::string& model = f[0];
    const std::string& capacity = f[1];
    if (model.empty()) return error("empty GPU model: name a catalog id such as A100-SXM-80GB (gpugeek catalog)");
    if (capacity != "on-demand" && capacity != "spot" && capacity != "reserved") {
      return error(fmt::format("capacity '{}' must be on-demand, spot or reserved", capacity));
    }
    absl::StatusOr<int64_t> price = ParseMoneyMicros(f[2]);
    if (!price.ok()) return error(fmt::format("price: {}", std::string(price.status().message())));
    if (!table.emplace(std::pair{model, capacity}, *price).second) {
      return error(fmt::format("{} {} is priced twice", model, capacity));
    }
    return absl::OkStatus();
  }));
  if (table.empty())
    return absl::InvalidArgumentError(fmt::format("{}: no price line (GPU_MODEL,CAPACITY,PRICE)", file_name));
  return table;
}

absl::StatusOr<PriceTable> ReadPriceTable(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileBounded(path, kMaxCsvFileBytes, "price list"));
  return ParsePriceTable(text, path);
}

}  // namespace gpugeek::api
