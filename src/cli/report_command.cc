// `gpugeek report --step N --value V`: run inside a trial's member (docs/hpo.md), reports the value of the
// experiment's objective at step N. It posts to the node's workload endpoint (agent/workload_listener.h,
// `POST /v1/report`) at $GPUGEEK_AGENT_URL with the member's $GPUGEEK_MEMBER_TOKEN; the agent holds the
// report until the server has stored it, and the experiment's pruner may stop the trial on it. Prints
// "stop" on a second line when the server has asked the member to stop (a pruned trial; the member also
// gets SIGTERM). Exit 0 on success; 2 outside a member or for a bad step or value; 1 when the agent
// refuses or cannot be reached.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/absl_fmt.h"
#include "http/client.h"

namespace gpugeek::cli {

void RegisterReportCommand(CLI::App& app) {
  struct Options {
    int64_t step = -1;
    double value = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "report", "Inside a trial: report the objective's value at a step (the experiment's pruner may stop it)");
  sub->add_option("--step", o->step, "The step (epoch, optimizer step, ...) the value was measured at")
      ->required()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 53));
  sub->add_option("--value", o->value, "The objective's value (e.g. the validation loss), a finite number")->required();
  sub->callback([o] {
    const std::string cmd = "report";
    if (!std::isfinite(o->value)) Fail(cmd, "--value: must be a finite number", kExitUsage);
    std::unique_ptr<http::Client> client = ConnectToAgent(cmd);
    const nlohmann::json reply = OrFail(cmd, client->Post("/v1/report", {{"step", o->step}, {"value", o->value}}));
    std::cout << fmt::format("value {} at step {} reported for {}\n", o->value, o->step,
                             reply.value("member", std::string()));
    if (reply.value("should_stop", false)) std::cout << "stop\n";
  });
}

}  // namespace gpugeek::cli
