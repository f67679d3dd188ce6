// `gpugeek offers [--gpu H100] [--spot | --capacity TYPE] [--region R] [--min-gpus N]`: what can be
// rented now, cheapest first (REST API GET /v1/offers, src/controlplane/offers.h), like `dstack offer` or
// `sky show-gpus`; with --server URL, --token, --profile and --json.

#include <iostream>

#include <fmt/format.h>

#include "api/quantity.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {

void RegisterOffersCommand(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string gpu;
    std::string capacity;
    bool spot = false;
    std::string region;
    int min_gpus = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("offers", "What can be rented now, cheapest first, with prices per GPU-hour");
  sub->add_option("--gpu", o->gpu, "A part of the GPU model id, any case (H100, a100-sxm)");
  CLI::Option* spot = sub->add_flag("--spot", o->spot, "Spot capacity only");
  sub->add_option("--capacity", o->capacity, "on-demand, spot or reserved")
      ->check(CLI::IsMember({"on-demand", "spot", "reserved"}))
      ->excludes(spot);
  sub->add_option("--region", o->region, "Only this region");
  sub->add_option("--min-gpus", o->min_gpus, "At least this many GPUs free on one node")->check(CLI::Range(0, 999));
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "offers";
    std::string query;
    const auto add = [&query](const std::string& key, const std::string& value) {
      if (!value.empty()) query += (query.empty() ? "?" : "&") + key + "=" + UrlEncode(value);
    };
    add("gpu", o->gpu);
    add("capacity", o->spot ? "spot" : o->capacity);
    add("region", o->region);
    if (o->min_gpus > 0) add("min_gpus", std::to_string(o->min_gpus));
    nlohmann::json reply = OrFail(cmd, Connect(cmd, o->flags)->Get("/v1/offers" + query));
    if (o->flags.json) return PrintJson(reply);
    TextTable table({"GPU", "CAPACITY", "REGION", "PROVIDER", "PRICE/GPU-H", "MIN RENTAL", "FREE", "GPUS", "NODES",
                     "MOST ON ONE NODE"});
    for (int c : {4, 5, 6, 7, 8, 9}) table.AlignRight(c);
    for (const nlohmann::json& r : reply["offers"]) {
      const int64_t price = r["price_micros_per_gpu_hour"];
      table.AddRow({Text(r["gpu_model"]), Text(r["capacity_type"]), r["region"] == "" ? "-" : Text(r["region"]),
                    r["provider"] == "" ? "-" : Text(r["provider"]), price > 0 ? FormatMoney(price) : "-",
                    r.value("min_rental_s", int64_t{0}) > 0
                        ? api::FormatDuration(std::chrono::seconds(r["min_rental_s"].get<int64_t>()))
                        : "-",
                    std::to_string(r["gpus_free"].get<int>()), std::to_string(r["gpus"].get<int>()),
                    std::to_string(r["nodes"].get<int>()), std::to_string(r["max_gpus_free_on_node"].get<int>())});
    }
    std::cout << table.Render();
    if (reply["offers"].empty()) std::cout << "No ready node matches.\n";
  });
}

}  // namespace gpugeek::cli
