#include "agent/container_command.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gpugeek::agent {
namespace {

ContainerCommand Sample() {
  return ContainerCommand{
      .podman = {"podman", "--root", "/s/storage", "--runtime", "runc"},
      .run_flags = {"--ulimit", "nofile=4096:4096"},
      .name = ContainerName("node-a", "j-00000007-1", 3, "run"),
      .image = "localhost/busybox:latest",
      .working_dir = "/data/work/j-00000007-1",
      .env_file = "/data/containers/j-00000007-1.env",
      .user = std::pair<uint32_t, uint32_t>{200001, 200001},
      .devices = {"/dev/nvidia1", "/dev/nvidiactl"},
      .run = "echo \"$FOO\"; pwd",
  };
}

constexpr char kInit[] =
    "trap 'kill -TERM -1 2>/dev/null' TERM; trap 'kill -INT -1 2>/dev/null' INT; /bin/sh -c \"$1\" & c=$!; "
    "while :; do wait $c; s=$?; kill -0 $c 2>/dev/null && continue; "
    "wait $c 2>/dev/null; t=$?; [ $t = 127 ] || s=$t; exit $s; done";

TEST(ContainerCommand, ArgvIsExact) {
  EXPECT_EQ(ContainerArgv(Sample()), (std::vector<std::string>{"podman",
                                                               "--root",
                                                               "/s/storage",
                                                               "--runtime",
                                                               "runc",
                                                               "run",
                                                               "--rm",
                                                               "--name",
                                                               "gpugeek-node-a-j-00000007-1-e3-run",
                                                               "--network=host",
                                                               "--ulimit",
                                                               "nofile=4096:4096",
                                                               "--user",
                                                               "200001:200001",
                                                               "--env-file",
                                                               "/data/containers/j-00000007-1.env",
                                                               "-v",
                                                               "/data/work/j-00000007-1:/data/work/j-00000007-1",
                                                               "-w",
                                                               "/data/work/j-00000007-1",
                                                               "--device",
                                                               "/dev/nvidia1",
                                                               "--device",
                                                               "/dev/nvidiactl",
                                                               "localhost/busybox:latest",
                                                               "/bin/sh",
                                                               "-c",
                                                               kInit,
                                                               "gpugeek-init",
                                                               "echo \"$FOO\"; pwd"}));
}

TEST(ContainerCommand, WithoutUserOrDevicesOrFlags) {
  ContainerCommand c = Sample();
  c.user.reset();
  c.devices.clear();
  c.run_flags.clear();
  c.podman = {"podman"};
  c.run = "it's";
  EXPECT_EQ(ContainerShellCommand(c),
            std::string("exec 'podman' 'run' '--rm' '--name' 'gpugeek-node-a-j-00000007-1-e3-run' '--network=host' "
                        "'--env-file' '/data/containers/j-00000007-1.env' "
                        "'-v' '/data/work/j-00000007-1:/data/work/j-00000007-1' '-w' '/data/work/j-00000007-1' "
                        "'localhost/busybox:latest' '/bin/sh' '-c' ") +
                "'trap '\\''kill -TERM -1 2>/dev/null'\\'' TERM; trap '\\''kill -INT -1 2>/dev/null'\\'' INT; "
                "/bin/sh -c \"$1\" & c=$!; while :; do wait $c; s=$?; kill -0 $c 2>/dev/null && continue; "
                "wait $c 2>/dev/null; t=$?; [ $t = 127 ] || s=$t; exit $s; done' "
                "'gpugeek-init' 'it'\\''s'");
}

// The job's dataset checkout (dataset_fetch.h), read-only at /gpugeek/dataset, after the working folder.
TEST(ContainerCommand, ReadOnlyMountsFollowTheWorkingFolder) {
  ContainerCommand c = Sample();
  c.devices.clear();
  c.read_only_mounts = {{"/data/datasets/versions/" + std::string(64, 'a'), "/gpugeek/dataset"}};
  const std::vector<std::string> argv = ContainerArgv(c);
  const std::vector<std::string> expected{"-v",
                                          "/data/work/j-00000007-1:/data/work/j-00000007-1",
                                          "-w",
                                          "/data/work/j-00000007-1",
                                          "-v",
                                          "/data/datasets/versions/" + std::string(64, 'a') + ":/gpugeek/dataset:ro",
                                          "localhost/busybox:latest"};
  ASSERT_EQ(argv.size(), 28u);
  EXPECT_EQ(std::vector<std::string>(argv.begin() + 16, argv.begin() + 23), expected);
}

TEST(ContainerCommand, GpuDeviceNodesSkipMissingOnes) {
  const std::set<std::string> present = {"/dev/nvidia0",    "/dev/nvidia3", "/dev/nvidiactl",
                                         "/dev/nvidia-uvm", "/dev/kfd",     "/dev/dri/renderD128"};
  const auto exists = [&](const std::string& p) { return present.contains(p); };
  EXPECT_EQ(GpuDeviceNodes(hw::Vendor::kNvidia, {3, 2}, {}, exists),
            (std::vector<std::string>{"/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm"}));
  EXPECT_EQ(GpuDeviceNodes(hw::Vendor::kAmd, {0}, {"/dev/dri/renderD128", "/dev/dri/renderD129"}, exists),
            (std::vector<std::string>{"/dev/kfd", "/dev/dri/renderD128"}));
  EXPECT_EQ(GpuDeviceNodes(std::nullopt, {}, {}, exists), std::vector<std::string>{});
  // Emulated GPUs: no device node exists, none is passed.
  EXPECT_EQ(GpuDeviceNodes(hw::Vendor::kNvidia, {0, 1}, {}, [](const std::string&) { return false; }),
            std::vector<std::string>{});
}

TEST(ContainerCommand, EnvFileHoldsOneVariableALine) {
  auto text = ContainerEnvFile({{"B", "two words = x"}, {"A", "1"}, {"EMPTY", ""}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "A=1\nB=two words = x\nEMPTY=\n");
  auto bad = ContainerEnvFile({{"NOTE", "line1\nline2"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "env.NOTE: a value with a line break cannot be passed into a container (podman's env file is one "
            "variable a line); put it in a file of the workdir and read it from there");
}

TEST(ContainerCommand, RemoveArgv) {
  EXPECT_EQ(ContainerRemoveArgv({"podman", "--root", "/s"}, "gpugeek-n-j-1-0"),
            (std::vector<std::string>{"podman", "--root", "/s", "rm", "-f", "--time", "0", "gpugeek-n-j-1-0"}));
}

TEST(ContainerCommand, ExecArgv) {
  EXPECT_EQ(ContainerExecArgv({"podman", "--root", "/s"}, "gpugeek-n-j-1-0", std::pair<uint32_t, uint32_t>{2001, 2001},
                              "/w/j-1-0", {"sh", "-c", "echo $X"}),
            (std::vector<std::string>{"podman", "--root", "/s", "exec", "--user", "2001:2001", "--workdir", "/w/j-1-0",
                                      "gpugeek-n-j-1-0", "sh", "-c", "echo $X"}));
  EXPECT_EQ(ContainerExecArgv({"podman"}, "c", std::nullopt, "/w", {}),
            (std::vector<std::string>{"podman", "exec", "--workdir", "/w", "c"}));
}

// Bounded waits for the test below: a step that hangs fails with where it hung instead of stalling the suite.
// Reads `fd` into `got` until it holds `needle` and at least `min_bytes`; false after `timeout_ms` or at end
// of file.
bool ReadUntil(int fd, const std::string& needle, int timeout_ms, std::string& got, size_t min_bytes = 0) {
  char buf[64];
  for (int waited = 0; got.size() < min_bytes || got.find(needle) == std::string::npos; waited += 10) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = poll(&p, 1, 10);
    if (ready == 0) {
      if (waited >= timeout_ms) return false;
      continue;
    }
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    got.append(buf, static_cast<size_t>(n));
  }
  return true;
}

// waitpid(pid) for at most `timeout_ms`: the reaped pid, or 0 when it is still running.
pid_t WaitFor(pid_t pid, int timeout_ms, int& status) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    const pid_t reaped = waitpid(pid, &status, WNOHANG);
    if (reaped != 0) return reaped;
    usleep(10000);
  }
  return waitpid(pid, &status, WNOHANG);
}

// The state line of /proc/PID/stat and its wchan (where a stuck process sleeps in the kernel).
std::string ProcessState(pid_t pid) {
  std::string out;
  for (const char* file : {"stat", "wchan"}) {
    std::ifstream in(fmt::format("/proc/{}/{}", pid, file));
    std::string line;
    std::getline(in, line);
    out += fmt::format(" {}: {}", file, in ? line : "(gone)");
  }
  return out;
}

}  // namespace
// INIT as a container runs it: PID 1 of a PID namespace of its own, RUN trapping SIGTERM and exiting 0.
// SIGTERM to INIT (what `podman run` proxies on a cancel) ends it with RUN's 0, never with the 143 of
// the `wait` that the signal interrupted: that race made one cancelled member in ten look killed.
// Busybox's sh when the machine has it (what the images run), else /bin/sh. Needs root (CLONE_NEWPID).
TEST(ContainerCommand, InitExitsWithTheRunsStatusAfterASigterm) {
  if (geteuid() != 0) GTEST_SKIP() << "a PID namespace needs root";
  std::string shell = "/bin/sh";
  for (const char* b : {"/bin/busybox", "/usr/bin/busybox"}) {
    if (std::filesystem::exists(b)) shell = b;
  }
  const std::string run = "trap 'echo got; exit 0' TERM; echo started; while :; do sleep 1; done";
  constexpr int kTimeoutMs = 30000;
  for (int trial = 0; trial < 20; ++trial) {
    // The test forks a middle process that enters a new PID namespace and forks INIT (PID 1 there); the
    // middle one sends INIT's pid (as this namespace sees it) down a pipe of its own (on INIT's stdout it
    // could come after RUN's `started`) and exits with INIT's status.
    int out[2];
    int pid_pipe[2];
    ASSERT_EQ(pipe(out), 0);
    ASSERT_EQ(pipe(pid_pipe), 0);
    const pid_t middle = fork();
    ASSERT_GE(middle, 0);
    if (middle == 0) {
      close(pid_pipe[0]);
      if (unshare(CLONE_NEWPID) != 0) _exit(90);
      const pid_t init = fork();
      if (init < 0) _exit(91);
      if (init == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        close(pid_pipe[1]);
        // argv[0] "sh": busybox runs the applet its name says.
        execl(shell.c_str(), "sh", "-c", ContainerInitScript(), "gpugeek-init", run.c_str(), nullptr);
        _exit(92);
      }
      if (write(pid_pipe[1], &init, sizeof init) != sizeof init) _exit(93);
      int status = 0;
      if (waitpid(init, &status, 0) != init) _exit(94);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    close(out[1]);
    close(pid_pipe[1]);
    pid_t init = 0;
    std::string got;
    int status = 0;
    // Any step that hangs: kill the namespace (its PID 1 takes every process in it along) and the middle one.
    auto give_up = [&](const std::string& step) {
      const std::string states = fmt::format("middle {}:{}; INIT {}:{}", middle, ProcessState(middle), init,
                                             init > 0 ? ProcessState(init) : " (unknown)");
      if (init > 0) kill(init, SIGKILL);
      kill(middle, SIGKILL);
      WaitFor(middle, kTimeoutMs, status);
      close(out[0]);
      close(pid_pipe[0]);
      return fmt::format("trial {} with {}: {} within {} ms; output {:?}; {}", trial, shell, step, kTimeoutMs, got,
                         states);
    };
    std::string pid_bytes;
    ASSERT_TRUE(ReadUntil(pid_pipe[0], "", kTimeoutMs, pid_bytes, sizeof init)) << give_up("no pid of INIT");
    std::memcpy(&init, pid_bytes.data(), sizeof init);
    close(pid_pipe[0]);
    pid_pipe[0] = -1;
    ASSERT_TRUE(ReadUntil(out[0], "started\n", kTimeoutMs, got)) << give_up("no `started`");
    // Into the `sleep 1` at a different point each trial.
    usleep(static_cast<useconds_t>(15000 * trial));
    ASSERT_EQ(kill(init, SIGTERM), 0) << give_up("kill(INIT, SIGTERM) failed");
    const pid_t reaped = WaitFor(middle, kTimeoutMs, status);
    ASSERT_EQ(reaped, middle) << give_up("INIT did not exit after a SIGTERM");
    close(out[0]);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "trial " << trial << " with " << shell;
  }
}

}  // namespace gpugeek::agent
