#include "controlplane/usage.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "absl/numeric/int128.h"

namespace gpugeek::controlplane {
namespace {

// milli x ms x price / (1000 x 3,600,000), rounded half up, in 128 bits (the product passes 2^63 for
// long runs of large nodes).
int64_t Cost(int64_t milli, int64_t ms, int64_t price) {
  const absl::int128 num = absl::int128(milli) * ms * price;
  const absl::int128 den = absl::int128(1000) * 3'600'000;
  return static_cast<int64_t>((num + den / 2) / den);
}

}  // namespace

void Accrue(Usage& usage, const std::string& capacity_type, const std::string& gpu_model, int64_t milli,
            Duration elapsed, int64_t price, int64_t on_demand_price, Duration idle) {
  const int64_t ms = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count());
  const int64_t idle_ms =
      std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(idle).count(), 0, ms);
  auto it = std::lower_bound(
      usage.begin(), usage.end(), std::tie(capacity_type, gpu_model),
      [](const UsageLine& l, const auto& key) { return std::tie(l.capacity_type, l.gpu_model) < key; });
  if (it == usage.end() || it->capacity_type != capacity_type || it->gpu_model != gpu_model) {
    it = usage.insert(it, UsageLine{.capacity_type = capacity_type, .gpu_model = gpu_model});
  }
  it->gpu_milli_seconds += milli * ms / 1000;
  it->idle_gpu_milli_seconds += milli * idle_ms / 1000;
  it->cost_micros += Cost(milli, ms, price);
  it->on_demand_micros += Cost(milli, ms, on_demand_price);
}

std::string UsageToText(const Usage& usage, const std::vector<OpenSegment>& open) {
  if (usage.empty() && open.empty()) return "";
  nlohmann::json lines = nlohmann::json::array();
  for (const UsageLine& l : usage) {
    nlohmann::json line = {l.capacity_type, l.gpu_model, l.gpu_milli_seconds, l.cost_micros, l.on_demand_micros};
    if (l.idle_gpu_milli_seconds != 0) line.push_back(l.idle_gpu_milli_seconds);
    lines.push_back(std::move(line));
  }
  if (open.empty()) return lines.dump();
  nlohmann::json segments = nlohmann::json::array();
  for (const OpenSegment& o : open) {
    nlohmann::json segment = {o.epoch, o.rank, o.start_ms};
    if (o.terms) {
      for (const nlohmann::json& t : {nlohmann::json(o.price), nlohmann::json(o.min_rental_s),
                                      nlohmann::json(o.capacity_type), nlohmann::json(o.provider)}) {
        segment.push_back(t);
      }
      if (!o.reservation.empty()) segment.push_back(o.reservation);
    }
    segments.push_back(std::move(segment));
  }
  return nlohmann::json{{"lines", lines}, {"open", segments}}.dump();
}

absl::StatusOr<std::vector<OpenSegment>> OpenSegmentsFromText(const std::string& text) {
  std::vector<OpenSegment> open;
  if (text.empty()) return open;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) return open;
  const auto bad = [&] { return absl::DataLossError(fmt::format("usage: malformed stored value '{}'", text)); };
  if (!j.is_object() || !j.contains("open") || !j["open"].is_array()) return bad();
  for (const nlohmann::json& o : j["open"]) {
    if (!o.is_array() || (o.size() != 3 && o.size() != 7 && o.size() != 8) || !o[0].is_number_integer() ||
        !o[1].is_number_integer() || !o[2].is_number_integer()) {
      return bad();
    }
    OpenSegment segment{.epoch = o[0].get<int64_t>(), .rank = o[1].get<int>(), .start_ms = o[2].get<int64_t>()};
    if (o.size() >= 7) {
      if (!o[3].is_number_integer() || !o[4].is_number_integer() || !o[5].is_string() || !o[6].is_string() ||
          (o.size() == 8 && !o[7].is_string())) {
        return bad();
      }
      segment.terms = true;
      segment.price = o[3].get<int64_t>();
      segment.min_rental_s = o[4].get<int64_t>();
      segment.capacity_type = o[5].get<std::string>();
      segment.provider = o[6].get<std::string>();
      if (o.size() == 8) segment.reservation = o[7].get<std::string>();
    }
    open.push_back(std::move(segment));
  }
  return open;
}

absl::StatusOr<Usage> UsageFromText(const std::string& text) {
  Usage usage;
  if (text.empty()) return usage;
  nlohmann::json lines = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&] { return absl::DataLossError(fmt::format("usage: malformed stored value '{}'", text)); };
  if (lines.is_object() && lines.contains("lines")) lines = lines["lines"];
  if (!lines.is_array()) return bad();
  for (const nlohmann::json& l : lines) {
    if (!l.is_array() || l.size() < 5 || l.size() > 6 || !l[0].is_string() || !l[1].is_string() ||
        !l[2].is_number_integer() || !l[3].is_number_integer() || !l[4].is_number_integer() ||
        (l.size() == 6 && !l[5].is_number_integer())) {
      return bad();
    }
    usage.push_back({l[0].get<std::string>(), l[1].get<std::string>(), l[2].get<int64_t>(), l[3].get<int64_t>(),
                     l[4].get<int64_t>(), l.size() == 6 ? l[5].get<int64_t>() : 0});
  }
  return usage;
}

nlohmann::json UsageToJson(const Usage& usage) {
  nlohmann::json lines = nlohmann::json::array();
  int64_t milli_seconds = 0, idle = 0, cost = 0, on_demand = 0;
  for (const UsageLine& l : usage) {
    lines.push_back({{"capacity_type", l.capacity_type},
                     {"gpu_model", l.gpu_model},
                     {"gpu_hours", static_cast<double>(l.gpu_milli_seconds) / 3.6e6},
                     {"idle_gpu_hours", static_cast<double>(l.idle_gpu_milli_seconds) / 3.6e6},
                     {"cost_micros", l.cost_micros},
                     {"on_demand_micros", l.on_demand_micros}});
    milli_seconds += l.gpu_milli_seconds;
    idle += l.idle_gpu_milli_seconds;
    cost += l.cost_micros;
    on_demand += l.on_demand_micros;
  }
  return {{"lines", lines},
          {"gpu_hours", static_cast<double>(milli_seconds) / 3.6e6},
          {"idle_gpu_hours", static_cast<double>(idle) / 3.6e6},
          {"cost_micros", cost},
          {"on_demand_micros", on_demand},
          {"saving_micros", on_demand - cost}};
}

}  // namespace gpugeek::controlplane
