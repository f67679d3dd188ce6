// `gpugeek exec JOB [--rank R] [--timeout-ms N] -- CMD [ARG]...`: runs a command beside a running member
// of a job (its environment, working folder and user) through the server, which relays it to the
// member's agent (controlplane/exec_relay.h). The command's stdout goes to stdout and its stderr to
// stderr as they arrive; the exit status is the command's (128 + N when killed by signal N). A failure
// before the command ran (no such job, not running, no node API) prints `gpugeek exec: <message>` and
// exits 1; a stream cut off before its exit frame exits 1 too, saying so.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "api/exec_stream.h"
#include "cli/client.h"
#include "cli/commands.h"

namespace gpugeek::cli {

void RegisterExecCommand(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string id;
    int rank = 0;
    int64_t timeout_ms = 3'600'000;
    std::vector<std::string> argv;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "exec", "Run a command beside a running job member (its env, working folder and user): JOB -- CMD ARGS...");
  sub->add_option("id", o->id, "Job id")->required();
  sub->add_option("command", o->argv, "The command and its arguments (after --), run without a shell")->required();
  sub->add_option("--rank", o->rank, "Node rank of the member")->capture_default_str()->check(CLI::Range(0, 1023));
  sub->add_option("--timeout-ms", o->timeout_ms, "Kill the command after this many milliseconds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86'400'000}));
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "exec";
    // The agent sends an empty frame every 2 s while the command is silent: 60 s without a byte is a loss.
    auto client = Connect(cmd, o->flags, std::chrono::seconds(60));
    const nlohmann::json body = {{"argv", o->argv}, {"rank", o->rank}, {"timeout_ms", o->timeout_ms}};
    api::ExecFrameDecoder decoder;
    std::optional<api::ExecExit> exit;
    std::string broken;
    absl::Status st =
        client->PostStream("/v1/jobs/" + UrlEncode(o->id) + "/exec", body, nullptr, [&](const std::string& chunk) {
          absl::StatusOr<std::vector<api::ExecFrame>> frames = decoder.Feed(chunk);
          if (!frames.ok()) {
            broken = std::string(frames.status().message());
            return false;
          }
          for (const api::ExecFrame& f : *frames) {
            if (f.stream == api::ExecStream::kStdout) {
              std::fwrite(f.payload.data(), 1, f.payload.size(), stdout);
              std::fflush(stdout);
            } else if (f.stream == api::ExecStream::kStderr) {
              std::fwrite(f.payload.data(), 1, f.payload.size(), stderr);
              std::fflush(stderr);
            } else {
              absl::StatusOr<api::ExecExit> e = api::DecodeExecExit(f.payload);
              if (!e.ok()) {
                broken = std::string(e.status().message());
                return false;
              }
              exit = *e;
            }
          }
          return true;
        });
    if (!broken.empty()) Fail(cmd, broken);
    if (!st.ok()) Fail(cmd, std::string(st.message()));
    if (!exit) Fail(cmd, "the stream ended before the command's exit status (the agent or the connection went away)");
    if (!exit->message.empty()) std::cerr << fmt::format("gpugeek exec: {}\n", exit->message);
    const int code = exit->ShellStatus();
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace gpugeek::cli
