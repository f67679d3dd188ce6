// The reserved-capacity commands of the client (REST API of src/controlplane/reservation_routes.h):
//   gpugeek reservations [--tenant T]       reservations with GPU-hours reserved, held, used and unused, and
//                                           what they were charged (yours; an admin: every tenant's)
//   gpugeek reservation create --tenant T --gpu MODEL --gpus N --price AMOUNT (--hours H | --days D)
//                              [--start 2027-01-01T00:00:00Z]                                       (admin)
//   gpugeek reservation cancel ID                                                                    (admin)
// each with --server URL, --token, --profile and --json. A reservation holds whole nodes of the model for the
// tenant, whose jobs take them first and pay nothing more there; each hour of the term is charged, used or not
// (docs/billing.md).

#include <iostream>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// "████░░░░ 50%": the share of held GPU time used, 8 cells wide.
std::string UseBar(double percent) {
  const int full = static_cast<int>(std::clamp(percent, 0.0, 100.0) / 12.5 + 0.5);
  std::string bar;
  for (int i = 0; i < 8; ++i) bar += i < full ? "\u2588" : "\u2591";
  return fmt::format("{} {:.0f}%", bar, percent);
}

void PrintReservation(const json& r) {
  std::cout << fmt::format("Reservation {}: {} x {} for {}, {} to {} ({}), at {} per GPU-hour\n", Text(r["id"]),
                           r["gpus"].get<int>(), Text(r["gpu_model"]), Text(r["tenant"]), Text(r["start"]),
                           Text(r["end"]), Text(r["state"]), FormatMoney(r["price_micros"].get<int64_t>()));
}

}  // namespace

void RegisterReservationCommands(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string tenant;
    std::string gpu;
    int gpus = 0;
    std::string price;
    int64_t hours = 0;
    int64_t days = 0;
    std::string start;
    std::string id;
  };
  auto o = std::make_shared<Options>();

  CLI::App* list = app.add_subcommand(
      "reservations", "Reserved capacity: GPU-hours reserved, held, used and unused, and what it was charged");
  list->add_option("--tenant", o->tenant, "This tenant's (yours unless you are an admin)");
  AddClientFlags(list, &o->flags);
  list->callback([o] {
    const std::string cmd = "reservations";
    const std::string path = "/v1/reservations" + (o->tenant.empty() ? "" : "?tenant=" + UrlEncode(o->tenant));
    json all = AllPages(cmd, *Connect(cmd, o->flags), path, "reservations");
    if (o->flags.json) return PrintJson(json{{"reservations", all}});
    if (all.empty()) {
      std::cout << "No reservations. An operator creates one with `gpugeek reservation create --tenant T --gpu "
                   "MODEL --gpus N --price AMOUNT --days D`.\n";
      return;
    }
    TextTable table({"ID", "TENANT", "GPU", "GPUS", "PRICE/GPU-H", "STATE", "END", "HELD GPU-H", "USED GPU-H",
                     "UNUSED GPU-H", "USE", "CHARGED"});
    for (int c : {3, 4, 7, 8, 9, 11}) table.AlignRight(c);
    for (const json& r : all) {
      table.AddRow({Text(r["id"]), Text(r["tenant"]), Text(r["gpu_model"]), std::to_string(r["gpus"].get<int>()),
                    FormatMoney(r["price_micros"].get<int64_t>()), Text(r["state"]), Text(r["end"]),
                    fmt::format("{:.2f}", r["held_gpu_hours"].get<double>()),
                    fmt::format("{:.2f}", r["used_gpu_hours"].get<double>()),
                    fmt::format("{:.2f}", r["unused_gpu_hours"].get<double>()), UseBar(r["used_percent"].get<double>()),
                    FormatMoney(r["charged_micros"].get<int64_t>())});
    }
    std::cout << table.Render();
  });

  CLI::App* reservation = app.add_subcommand("reservation", "Create or cancel reserved capacity (admin)");
  reservation->require_subcommand(1);
  CLI::App* create =
      reservation->add_subcommand("create", "Hold N GPUs of a model for a tenant for a term, charged per hour");
  create->add_option("--tenant", o->tenant, "The tenant the capacity is for")->required();
  create->add_option("--gpu", o->gpu, "The GPU model (catalog id, e.g. H100-SXM-80GB)")->required();
  create->add_option("--gpus", o->gpus, "How many GPUs (held on whole nodes)")
      ->required()
      ->check(CLI::Range(1, 100000));
  create->add_option("--price", o->price, "Per GPU-hour, e.g. 1.20")->required();
  auto* hours = create->add_option("--hours", o->hours, "The term in hours")->check(CLI::Range(1, 26304));
  auto* days = create->add_option("--days", o->days, "The term in days (365: a year)")->check(CLI::Range(1, 1096));
  hours->excludes(days);
  create->add_option("--start", o->start, "When the term starts (RFC 3339; default now)");
  AddClientFlags(create, &o->flags);
  create->callback([o] {
    const std::string cmd = "reservation create";
    if ((o->hours > 0) == (o->days > 0)) Fail(cmd, "give the term: --hours H or --days D", kExitUsage);
    json body = {{"tenant", o->tenant},
                 {"gpu_model", o->gpu},
                 {"gpus", o->gpus},
                 {"price", o->price},
                 {"hours", o->hours > 0 ? o->hours : o->days * 24}};
    if (!o->start.empty()) body["start"] = o->start;
    json r = OrFail(cmd, Connect(cmd, o->flags)->Post("/v1/reservations", body));
    if (o->flags.json) return PrintJson(r);
    PrintReservation(r);
  });

  CLI::App* cancel = reservation->add_subcommand("cancel", "End a reservation's term now (charged up to now)");
  cancel->add_option("id", o->id, "The reservation (rsv-...)")->required();
  AddClientFlags(cancel, &o->flags);
  cancel->callback([o] {
    const std::string cmd = "reservation cancel";
    json r =
        OrFail(cmd, Connect(cmd, o->flags)->Post("/v1/reservations/" + UrlEncode(o->id) + "/cancel", json::object()));
    if (o->flags.json) return PrintJson(r);
    PrintReservation(r);
  });
}

}  // namespace gpugeek::cli
