// `gpugeek checkpoint --step N`: run inside a job's member (its `run`, or `gpugeek exec`), says the
// workload's checkpoint at step N is complete (docs/checkpointing.md). It posts to the node's workload
// endpoint (agent/workload_listener.h) at $GPUGEEK_AGENT_URL with the member's $GPUGEEK_MEMBER_TOKEN;
// the server then keeps step N as what the job resumes from (`gpugeek job ID`). Exit 0 on success; 2
// outside a member (the variables unset) or a bad step; 1 when the agent refuses or cannot be reached.
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

void RegisterCheckpointCommand(CLI::App& app) {
  struct Options {
    int64_t step = -1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "checkpoint", "Inside a job: report that the workload's checkpoint at a step is complete (what it resumes from)");
  sub->add_option("--step", o->step, "The training step the checkpoint holds")
      ->required()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 53));
  sub->callback([o] {
    const std::string cmd = "checkpoint";
    std::unique_ptr<http::Client> client = ConnectToAgent(cmd);
    const nlohmann::json reply = OrFail(cmd, client->Post("/v1/checkpoint", {{"step", o->step}}));
    std::cout << fmt::format("checkpoint at step {} reported for {}\n", o->step, reply.value("member", std::string()));
  });
}

}  // namespace gpugeek::cli
