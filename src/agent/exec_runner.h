#pragma once
// RunExec: runs one command beside a running member (`gpugeek exec`), streaming its output as exec
// frames (api/exec_stream.h) and ending with how it exited.
//
// The command runs as the member does: the member's complete environment, its working folder as the
// current directory, and its user (Executor::IdentityFor of the member's tenant: groups, gid, uid
// switched and checked as the shim does, then no_new_privs). It is exec'd directly from an argv vector
// (searched for in the member's PATH as a shell does), never through a shell. stdin is /dev/null;
// stdout and stderr are two pipes, read as data arrives and written as "stdout"/"stderr" frames of at
// most 64 KiB.
// The command leads its own process group (setsid); the whole group is SIGKILLed when:
//   - `timeout` has passed since the start (the exit frame says "timed out after N ms");
//   - `write` returns false (the client went away or a write took too long);
//   - the command itself exited (whatever it left running in its group is not waited for).
// While the command is silent an empty "stdout" frame is written every kExecKeepAlive, so a client
// that left is noticed within that time even without output.
// Not yet: the member's cgroup limits do not apply to the command (it runs in the agent's cgroup).

#include <functional>
#include <string>
#include <vector>

#include "agent/executor.h"
#include "api/exec_stream.h"
#include "common/clock.h"

namespace gpugeek::agent {

inline constexpr Duration kExecKeepAlive = std::chrono::seconds(2);
inline constexpr Duration kDefaultExecTimeout = std::chrono::hours(1);

// Where and as whom an exec runs: copied from the member's launch (Agent::ExecTargetFor).
struct ExecTarget {
  std::string workload_id;  // "<job>-<rank>", for logs
  std::string working_dir;
  EnvMap env;         // complete; nothing of the agent's own environment is added
  Identity identity;  // switched: the member's tenant uid; else the agent's own
  // Words put before the command, e.g. `podman exec ... CONTAINER` for a member in a container
  // (container_command.h ContainerExecArgv without the command); empty: the command runs as it is.
  std::vector<std::string> wrap;
};

// Runs `argv` (at least one element, no NUL bytes) for `target`, writing frames through `write` as
// output arrives and a final "exit" frame when `write` still works; returns the exit it wrote (or would
// have written). A command that cannot be started (not found, not executable, the working folder
// gone, the user switch refused) exits 127 (not found) or 126 with the reason on its stderr, as a shell
// reports it; only a failure to make the pipes or to fork is an exit without code, with a message.
// Blocks until the command ended and its pipes are drained (or the group was killed).
api::ExecExit RunExec(const ExecTarget& target, const std::vector<std::string>& argv, Duration timeout,
                      const std::function<bool(const std::string&)>& write);

}  // namespace gpugeek::agent
