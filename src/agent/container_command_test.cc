#include "agent/container_command.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>

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
  for (int trial = 0; trial < 20; ++trial) {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    // The test forks a middle process that enters a new PID namespace and forks INIT (PID 1 there); the
    // middle one writes INIT's pid (as this namespace sees it) first and exits with INIT's status.
    const pid_t middle = fork();
    ASSERT_GE(middle, 0);
    if (middle == 0) {
      if (unshare(CLONE_NEWPID) != 0) _exit(90);
      const pid_t init = fork();
      if (init < 0) _exit(91);
      if (init == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        // argv[0] "sh": busybox runs the applet its name says.
        execl(shell.c_str(), "sh", "-c", ContainerInitScript(), "gpugeek-init", run.c_str(), nullptr);
        _exit(92);
      }
      if (write(out[1], &init, sizeof init) != sizeof init) _exit(93);
      int status = 0;
      if (waitpid(init, &status, 0) != init) _exit(94);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    close(out[1]);
    pid_t init = 0;
    ASSERT_EQ(read(out[0], &init, sizeof init), static_cast<ssize_t>(sizeof init));
    std::string got;
    char buf[64];
    while (got.find("started\n") == std::string::npos) {
      const ssize_t n = read(out[0], buf, sizeof buf);
      ASSERT_GT(n, 0) << got;
      got.append(buf, static_cast<size_t>(n));
    }
    // Into the `sleep 1` at a different point each trial.
    usleep(static_cast<useconds_t>(15000 * trial));
    ASSERT_EQ(kill(init, SIGTERM), 0);
    // Bounded: a lost SIGTERM fails this trial (and kills the namespace) instead of hanging the suite.
    int status = 0;
    pid_t reaped = 0;
    for (int waited_ms = 0; waited_ms < 30000 && reaped == 0; waited_ms += 10) {
      reaped = waitpid(middle, &status, WNOHANG);
      if (reaped == 0) usleep(10000);
    }
    if (reaped == 0) {
      kill(init, SIGKILL);  // PID 1 of the namespace: every process in it goes with it
      waitpid(middle, &status, 0);
      close(out[0]);
      FAIL() << "trial " << trial << " with " << shell << ": INIT did not exit within 30 s of a SIGTERM";
    }
    ASSERT_EQ(reaped, middle);
    close(out[0]);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "trial " << trial << " with " << shell;
  }
}

}  // namespace gpugeek::agent
