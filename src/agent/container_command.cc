#include "agent/container_command.h"

#include <fmt/format.h>

#include "agent/torch_launcher.h"

namespace gpugeek::agent {
namespace {

// PID 1 of the container: runs "$1" as a child, passes SIGTERM / SIGINT on to every process of the
// container (kill -1 from PID 1 reaches all but itself), and exits with the child's status once it is gone.
// A `wait` that a trapped signal interrupts returns 128+signal even when the child exits at that moment
// (and the shell reaps it while running the trap), so once the child is gone INIT asks `wait` once more:
// that returns the child's own status, or 127 when the first `wait` already reported it.
constexpr char kInit[] =
    "trap 'kill -TERM -1 2>/dev/null' TERM; trap 'kill -INT -1 2>/dev/null' INT; "
    "/bin/sh -c \"$1\" & c=$!; "
    "while :; do wait $c; s=$?; kill -0 $c 2>/dev/null && continue; "
    "wait $c 2>/dev/null; t=$?; [ $t = 127 ] || s=$t; exit $s; done";

}  // namespace

const char* ContainerInitScript() { return kInit; }

std::string ContainerName(const std::string& node, const std::string& workload_id, int64_t epoch,
                          const std::string& step) {
  return fmt::format("gpugeek-{}-{}-e{}-{}", node, workload_id, epoch, step);
}

std::vector<std::string> ContainerArgv(const ContainerCommand& c) {
  std::vector<std::string> argv = c.podman;
  argv.insert(argv.end(), {"run", "--rm", "--name", c.name, "--network=host"});
  argv.insert(argv.end(), c.run_flags.begin(), c.run_flags.end());
  if (c.user) argv.insert(argv.end(), {"--user", fmt::format("{}:{}", c.user->first, c.user->second)});
  argv.insert(argv.end(), {"--env-file", c.env_file, "-v", c.working_dir + ":" + c.working_dir, "-w", c.working_dir});
  for (const auto& [host, inside] : c.read_only_mounts) argv.insert(argv.end(), {"-v", host + ":" + inside + ":ro"});
  for (const std::string& d : c.devices) argv.insert(argv.end(), {"--device", d});
  argv.insert(argv.end(), {c.image, "/bin/sh", "-c", kInit, "gpugeek-init", c.run});
  return argv;
}

std::string ContainerShellCommand(const ContainerCommand& c) {
  std::string out = "exec";
  for (const std::string& word : ContainerArgv(c)) out += " " + ShellQuote(word);
  return out;
}

std::vector<std::string> GpuDeviceNodes(std::optional<hw::Vendor> vendor, const std::vector<int>& indices,
                                        const std::vector<std::string>& render_nodes,
                                        const std::function<bool(const std::string&)>& exists) {
  std::vector<std::string> wanted;
  if (!vendor || indices.empty()) return wanted;
  if (*vendor == hw::Vendor::kNvidia) {
    for (int i : indices) wanted.push_back(fmt::format("/dev/nvidia{}", i));
    wanted.insert(wanted.end(), {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"});
  } else if (*vendor == hw::Vendor::kAmd) {
    wanted.push_back("/dev/kfd");
    wanted.insert(wanted.end(), render_nodes.begin(), render_nodes.end());
  }
  std::vector<std::string> out;
  for (std::string& d : wanted) {
    if (exists(d)) out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::string> ContainerEnvFile(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const auto& [name, value] : env) {
    if (value.find_first_of("\n\r") != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("env.{}: a value with a line break cannot be passed into a container (podman's env file is one "
                      "variable a line); put it in a file of the workdir and read it from there",
                      name));
    }
    out += name + "=" + value + "\n";
  }
  return out;
}

std::vector<std::string> ContainerRemoveArgv(const std::vector<std::string>& podman, const std::string& name) {
  std::vector<std::string> argv = podman;
  argv.insert(argv.end(), {"rm", "-f", "--time", "0", name});
  return argv;
}

std::vector<std::string> ContainerExecArgv(const std::vector<std::string>& podman, const std::string& name,
                                           const std::optional<std::pair<uint32_t, uint32_t>>& user,
                                           const std::string& working_dir, const std::vector<std::string>& argv) {
  std::vector<std::string> out = podman;
  out.push_back("exec");
  if (user.has_value()) {
    out.push_back("--user");
    out.push_back(fmt::format("{}:{}", user->first, user->second));
  }
  out.push_back("--workdir");
  out.push_back(working_dir);
  out.push_back(name);
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace gpugeek::agent
