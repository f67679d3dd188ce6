// The pool commands of the client (REST API of src/controlplane/api_routes.h):
//   gpugeek nodes                 nodes with state, capacity type, GPUs, allocation and jobs
//   gpugeek node NAME             one node: host, GPUs with telemetry, jobs, engine runtimes
//   gpugeek cordon|uncordon NAME  stop / resume placing new work on a node
//   gpugeek drain NAME            cordon, and send the node's jobs back to PENDING to run elsewhere
//   gpugeek reclaim NAME [--deadline 30s]   a spot reclaim notice: checkpoint and move its jobs before it
//   gpugeek remove-node NAME      take a decommissioned node (down, or cordoned with no jobs) out of the pool
//   gpugeek pool                  GPUs by model and capacity type, allocated, free, fragmentation
// each with --server URL and --json.

#include <iostream>
#include <map>

#include <fmt/format.h>

#include "api/quantity.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// "8 x A100-SXM-80GB" (or "4 x A100-PCIe-80GB + 2 x L4") from a node's inventory.
std::string Joined(const json& list) {
  std::string out;
  for (const json& s : list) out += (out.empty() ? "" : ",") + Text(s);
  return out.empty() ? "-" : out;
}

void RegisterNodes(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub =
      app.add_subcommand("nodes", "List the pool's nodes (see also: node, cordon, uncordon, drain, remove-node, pool)");
  AddClientFlags(sub, flags.get());
  sub->callback([flags] {
    const std::string cmd = "nodes";
    json nodes = OrFail(cmd, Connect(cmd, *flags)->Get("/v1/nodes"));
    if (flags->json) {
      PrintJson(nodes);
      return;
    }
    if (nodes["nodes"].empty()) {
      std::cout << "No nodes registered (start one with `gpugeek agent --server URL`).\n";
      return;
    }
    const TimePoint now = RealClock().Now();
    TextTable table({"NAME", "STATE", "CAPACITY", "REGION", "GPUS", "ALLOCATED", "JOBS", "HEARTBEAT"});
    table.AlignRight(5);
    for (const json& n : nodes["nodes"]) {
      const json inventory = n.value("inventory", json::object());
      const int64_t total = static_cast<int64_t>(inventory.value("gpus", json::array()).size()) * 1000;
      const std::string region = n.value("region", std::string());
      table.AddRow({Text(n["name"]), Text(n["state"]), Text(n["capacity_type"]), region.empty() ? "-" : region,
                    GpuSummary(inventory.value("gpus", json::array()), "none"),
                    fmt::format("{}/{}", Gpus(n.value("gpu_milli_allocated", int64_t{0})), Gpus(total)),
                    Joined(n.value("jobs", json::array())), Ago(n.value("last_heartbeat", std::string()), now)});
    }
    std::cout << table.Render() << "ALLOCATED in GPUs (milli-GPU / 1000), allocated/total.\n";
  });
}

void RegisterNode(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string name;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("node", "Show one node: host, GPUs with telemetry and health, jobs");
  sub->add_option("name", o->name, "Node name")->required();
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "node";
    json n = OrFail(cmd, Connect(cmd, o->flags)->Get("/v1/nodes/" + UrlEncode(o->name)));
    if (o->flags.json) {
      PrintJson(n);
      return;
    }
    const json inventory = n.value("inventory", json::object());
    const json host = inventory.value("host", json::object());
    const std::string heartbeat = n.value("last_heartbeat", std::string());
    std::cout << fmt::format("Node {} ({})\n", Text(n["name"]), Text(n["state"]));
    std::cout << fmt::format("  address:   {}\n", Text(n["address"]));
    const std::string region = n.value("region", std::string());
    std::cout << fmt::format("  capacity:  {}    region: {}\n", Text(n["capacity_type"]),
                             region.empty() ? "-" : region);
    std::cout << fmt::format("  host:      {}, {} CPUs, {} memory\n", Text(host.value("hostname", json())),
                             Text(host.value("cpu_cores", json())),
                             FormatBytes(host.value("memory_bytes", uint64_t{0})));
    std::cout << fmt::format(
        "  GPUs:      {} ({} of {} allocated)\n", GpuSummary(inventory.value("gpus", json::array()), "none"),
        Gpus(n.value("gpu_milli_allocated", int64_t{0})), inventory.value("gpus", json::array()).size());
    std::cout << fmt::format("  jobs:      {}\n", Joined(n.value("jobs", json::array())));
    std::cout << fmt::format("  engines:   {}\n", Joined(n.value("engines", json::array())));
    std::cout << fmt::format("  heartbeat: {} ({})\n\n", LocalTime(heartbeat), Ago(heartbeat, RealClock().Now()));
    const json samples = n.value("samples", json::array());
    TextTable table({"GPU", "MODEL", "MEMORY", "UTIL", "MEM USED", "TEMP", "HEALTH"});
    table.AlignRight(0);
    const json gpus = inventory.value("gpus", json::array());
    for (size_t i = 0; i < gpus.size(); ++i) {
      const json& g = gpus[i];
      const json sample = i < samples.size() ? samples[i] : g;  // the latest sample, else the inventory's
      const json t = sample.value("telemetry", json::object());
      const json h = sample.value("health", json::object());
      const bool lost = h.value("lost", false);
      const std::string error = h.value("error", std::string());
      const auto num = [&](const char* key, const char* unit) {
        return t.contains(key) && !t[key].is_null() ? fmt::format("{}{}", Text(t[key]), unit) : std::string("-");
      };
      table.AddRow({Text(g["index"]), Text(g["model_id"]), FormatBytes(g.value("memory_total_bytes", uint64_t{0})),
                    num("utilization_percent", "%"),
                    t.contains("memory_used_bytes") && t["memory_used_bytes"].is_number()
                        ? FormatBytes(t["memory_used_bytes"].get<uint64_t>())
                        : "-",
                    num("temperature_celsius", " C"),
                    lost            ? "lost"
                    : error.empty() ? "ok"
                                    : error});
    }
    std::cout << table.Render();
  });
}

void RegisterNodeAction(CLI::App& app, const std::string& action, const std::string& help) {
  struct Options {
    ClientFlags flags;
    std::string name;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(action, help);
  sub->add_option("name", o->name, "Node name")->required();
  AddClientFlags(sub, &o->flags);
  sub->callback([o, action] {
    json n = OrFail(
        action,
        Connect(action, o->flags)->Post(fmt::format("/v1/nodes/{}/{}", UrlEncode(o->name), action), json::object()));
    if (o->flags.json) {
      PrintJson(n);
      return;
    }
    std::cout << fmt::format("node {}: {} (jobs: {})\n", Text(n["name"]), Text(n["state"]),
                             Joined(n.value("jobs", json::array())));
  });
}

// `gpugeek reclaim NAME --deadline 30s`: a spot reclaim notice, as a provider's would be.
void RegisterReclaim(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string name;
    std::string deadline = "30s";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "reclaim", "A spot reclaim notice: the node goes away after --deadline; its jobs checkpoint and move now");
  sub->add_option("name", o->name, "Node name")->required();
  sub->add_option("--deadline", o->deadline, "Time until the provider takes the node, 1s..1h (e.g. 30s, 2m)")
      ->capture_default_str();
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "reclaim";
    absl::StatusOr<Duration> deadline = api::ParseDuration(o->deadline);
    if (!deadline.ok() || *deadline < std::chrono::seconds(1) || *deadline > std::chrono::hours(1)) {
      Fail(cmd, fmt::format("--deadline {}: give a duration 1s..1h such as 30s or 2m", o->deadline), kExitUsage);
    }
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(*deadline).count();
    json n =
        OrFail(cmd, Connect(cmd, o->flags)
                        ->Post(fmt::format("/v1/nodes/{}/reclaim", UrlEncode(o->name)), {{"deadline_s", seconds}}));
    if (o->flags.json) {
      PrintJson(n);
      return;
    }
    std::cout << fmt::format("node {}: {}, reclaimed in {} s (moving: {})\n", Text(n["name"]), Text(n["state"]),
                             seconds, Joined(n.value("jobs", json::array())));
  });
}

void RegisterRemoveNode(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string name;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "remove-node",
      "Take a decommissioned node out of the pool, its metrics and Prometheus target with it: gpugeek "
      "remove-node NAME. The node must be down (its agent stopped), or cordoned with no jobs on it; an agent "
      "that starts again registers again");
  sub->add_option("name", o->name, "Node name")->required();
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "remove-node";
    json n = OrFail(cmd, Connect(cmd, o->flags)->Delete("/v1/nodes/" + UrlEncode(o->name)));
    if (o->flags.json) {
      PrintJson(n);
      return;
    }
    std::cout << fmt::format("node {} removed (was {})\n", Text(n["name"]), Text(n["state"]));
  });
}

void RegisterPool(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub = app.add_subcommand("pool",
                                     "GPUs of the pool by model and capacity type: allocated, free, "
                                     "fragmentation (FGD measure), policy");
  AddClientFlags(sub, flags.get());
  sub->callback([flags] {
    const std::string cmd = "pool";
    json pool = OrFail(cmd, Connect(cmd, *flags)->Get("/v1/pool"));
    if (flags->json) {
      PrintJson(pool);
      return;
    }
    TextTable table({"GPU MODEL", "CAPACITY", "NODES", "GPUS", "ALLOCATED", "FREE", "FULLY FREE", "FRAGMENTED"});
    for (size_t c = 2; c < 8; ++c) table.AlignRight(c);
    int nodes = 0, gpus = 0, fully_free = 0;
    for (const json& r : pool["rows"]) {
      const int64_t total = r.value("gpu_milli_total", int64_t{0});
      const int64_t used = r.value("gpu_milli_allocated", int64_t{0});
      nodes += r.value("nodes", 0);
      gpus += r.value("gpus", 0);
      fully_free += r.value("gpus_fully_free", 0);
      table.AddRow({Text(r["gpu_model"]), Text(r["capacity_type"]), Text(r["nodes"]), Text(r["gpus"]), Gpus(used),
                    Gpus(total - used), Text(r["gpus_fully_free"]),
                    Gpus(static_cast<int64_t>(r.value("frag_gpu_milli", 0.0) + 0.5))});
    }
    const int64_t total = pool.value("gpu_milli_total", int64_t{0});
    const int64_t used = pool.value("gpu_milli_allocated", int64_t{0});
    table.AddRow({"TOTAL", "", std::to_string(nodes), std::to_string(gpus), Gpus(used), Gpus(total - used),
                  std::to_string(fully_free), Gpus(static_cast<int64_t>(pool.value("frag_gpu_milli", 0.0) + 0.5))});
    std::cout << table.Render();
    std::cout << fmt::format(
        "GPU counts; FRAGMENTED = free GPU capacity the typical pending jobs cannot use (FGD).\n"
        "fragmentation rate {:.1f}% of free capacity; policy {}; {} job(s) pending\n",
        100.0 * pool.value("frag_rate", 0.0), Text(pool["policy"]), Text(pool["pending_jobs"]));
  });
}

}  // namespace

void RegisterNodeCommands(CLI::App& app) {
  RegisterNodes(app);
  RegisterNode(app);
  RegisterNodeAction(app, "cordon", "Stop placing new jobs on a node (running jobs stay): gpugeek cordon NAME");
  RegisterNodeAction(app, "uncordon", "Place new jobs on a cordoned node again: gpugeek uncordon NAME");
  RegisterNodeAction(app, "drain",
                     "Cordon a node and send its jobs back to PENDING to run elsewhere: gpugeek drain NAME");
  RegisterReclaim(app);
  RegisterRemoveNode(app);
  RegisterPool(app);
}

}  // namespace gpugeek::cli
