// A job with `image:` end to end, with real processes and real containers: `gpugeek server`, two `gpugeek
// agent`s with their own rootful podman storage (../shared/infra/container-up.sh: podman 4.3 + runc, the
// image localhost/busybox imported from busybox-static), one with the image and one without, and `gpugeek
// submit` of a spec with `image: localhost/busybox`, `workdir:` and `env:`. The job runs on the node with
// the image only; inside the container the run sees the job's variable, the working folder at the same path
// and the workdir's file. A job naming an image no registered node has is refused at submission, naming the
// image. A cancel's SIGTERM reaches the process in the container; a restarted agent removes its node's
// leftovers. An image whose org.gpugeek.cuda label the node's driver does not meet is not offered (and
// `gpugeek images` says why). (The PyTorch image: pytorch_image_test.cc.)
// Needs root (rootful podman); skips, saying why, without it or when podman cannot be set up.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "http/client.h"
#include "podman_storage.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using subprocess::Process;
using subprocess::RunCli;
using testing::kRunFlags;
using testing::PodmanFor;
using testing::Write;

class ContainerEndToEnd : public testing::PoolFixture {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "rootful podman needs root; run this test as root";
    MakeScratch("container_e2e");
    const fs::path up = fs::path(GPUGEEK_SHARED_DIR) / "infra" / "container-up.sh";
    if (!fs::exists(up)) GTEST_SKIP() << "no " << up << " (the shared/ folder beside the checkout)";
    const std::string cmd =
        fmt::format("{} {} > {} 2>&1", up.string(), (dir_ / "ctr-img").string(), (dir_ / "container-up.log").string());
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(dir_ / "container-up.log");
      const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      GTEST_SKIP() << "podman cannot be set up here (" << up << "):\n" << log;
    }
    fs::create_directories(dir_ / "ctr-bare");  // a storage of its own, without any image

    const std::string agent_url = StartServer(2);
    ASSERT_FALSE(agent_url.empty());
    const std::string suffix = std::to_string(::getpid());
    with_ = "node-img-" + suffix;
    bare_ = "node-bare-" + suffix;
    for (const auto& [node, state] : {std::pair{with_, dir_ / "ctr-img"}, std::pair{bare_, dir_ / "ctr-bare"}}) {
      agent_args_.push_back({GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", ca_, "--name", node,
                             "--emulate", "1xL4", "--data-dir", (dir_ / node).string(), "--podman", PodmanFor(state),
                             "--podman-run-flags", kRunFlags, "--metrics-listen", "127.0.0.1:0"});
      agents_.push_back(std::make_unique<Process>(agent_args_.back(), dir_ / (node + ".log")));
    }
    ASSERT_TRUE(WaitForNodes(2));
  }
  void TearDown() override {
    agents_.clear();
    server_.reset();
    const fs::path down = fs::path(GPUGEEK_SHARED_DIR) / "infra" / "container-down.sh";
    for (const char* state : {"ctr-img", "ctr-bare"}) {
      if (dir_.empty() || !fs::exists(dir_ / state / "storage")) continue;
      (void)std::system(fmt::format("{} {} --purge > /dev/null 2>&1", down.string(), (dir_ / state).string()).c_str());
    }
    PoolFixture::TearDown();
  }

  std::string with_, bare_;
  std::vector<std::vector<std::string>> agent_args_;
};

TEST_F(ContainerEndToEnd, RunsOnTheNodeWithTheImageWithTheJobsEnvAndFolder) {
  // The nodes report their images; `gpugeek images` lists them.
  auto nodes = Client().Get("/v1/nodes");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  for (const nlohmann::json& n : (*nodes)["nodes"]) {
    EXPECT_EQ(n["images"],
              n["name"] == with_ ? nlohmann::json::array({"localhost/busybox:latest"}) : nlohmann::json::array())
        << n.dump();
  }
  auto [code, listed] = Cli({"images"});
  EXPECT_EQ(code, 0) << listed;
  EXPECT_TRUE(std::regex_search(listed, std::regex(with_ + " +localhost/busybox:latest +yes\n"))) << listed;
  EXPECT_FALSE(absl::StrContains(listed, bare_)) << listed;

  const fs::path project = dir_ / "project";
  Write(project / "data" / "greeting.txt", "hello from the workdir\n");
  Write(project / "job.yaml",
        "name: in-a-container\n"
        "image: localhost/busybox\n"
        "resources: {accelerators: L4:1}\n"
        "workdir: .\n"
        "env: {GREETING: hello-from-env}\n"
        "run: echo \"GREETING=$GREETING\"; pwd; cat data/greeting.txt; id -u; test -x /bin/busybox && echo busybox\n");
  // Several jobs: each must land on the node with the image, though the other is as free.
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Submit(project / "job.yaml"));
    ASSERT_FALSE(ids.back().empty());
  }
  for (const std::string& id : ids) {
    const nlohmann::json job = WaitEnded(id);
    EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << "\n"
                                                   << agents_[0]->output() << "\n"
                                                   << agents_[1]->output();
    auto [log_code, log] = Cli({"logs", id});
    const std::string workdir = (dir_ / with_ / "work" / (id + "-0")).string();
    // The tenant's uid (the agent is root): 200000 and up, never 0.
    EXPECT_TRUE(std::regex_search(
        log, std::regex("^GREETING=hello-from-env\n" + workdir + "\nhello from the workdir\n2[0-9]{5}\nbusybox\n$")))
        << log;
    EXPECT_FALSE(fs::exists(dir_ / bare_ / "work" / (id + "-0"))) << "ran on the node without the image";
    std::printf("[ log of %s ]\n%s", id.c_str(), log.c_str());
  }
  // No container is left behind.
  auto [ps_code, ps] =
      subprocess::Run({"/bin/sh", "-c", PodmanFor(dir_ / "ctr-img") + " ps -a --format '{{.Names}}'"}, dir_ / "ps.log");
  EXPECT_EQ(ps_code, 0) << ps;
  EXPECT_FALSE(absl::StrContains(ps, "gpugeek-")) << ps;

  // An image no registered node has: refused at submission (admission_fit.h), naming the image per node.
  Write(project / "missing.yaml",
        "name: no-such-image\nimage: localhost/nothere:v1\nresources: {accelerators: L4:1}\nrun: 'true'\n");
  auto [refused_code, out] = Cli({"submit", (project / "missing.yaml").string()});
  EXPECT_NE(refused_code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "resources: no registered node could ever host this job (2 nodes, at full capacity); "
                                "1: image localhost/nothere:v1 is not on this node (it has 1 other image); 1: image "
                                "localhost/nothere:v1 is not on this node (it runs no containers); add such a node or "
                                "change resources"))
      << out;
}

// `gpugeek cancel` reaches the process inside the container: podman run proxies the SIGTERM to the
// container's init, which passes it on; the run's trap prints and exits, the job ends CANCELLED, and no
// container is left.
TEST_F(ContainerEndToEnd, CancelSigtermReachesTheContainer) {
  const fs::path project = dir_ / "cancel";
  Write(project / "job.yaml",
        "name: cancel-me\n"
        "image: localhost/busybox\n"
        "resources: {accelerators: L4:1}\n"
        "checkpoint: {grace: 20s}\n"
        "run: trap 'echo got SIGTERM; exit 0' TERM; echo started; while :; do sleep 1; done\n");
  const std::string id = Submit(project / "job.yaml");
  ASSERT_FALSE(id.empty());
  std::string log = WaitForLog(id, "started\n");
  ASSERT_TRUE(absl::StrContains(log, "started\n")) << log << agents_[0]->output();
  const auto sent = std::chrono::steady_clock::now();
  auto [code, out] = Cli({"cancel", id});
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json job = WaitEnded(id);
  EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump();
  // The job is CANCELLED when the cancel is accepted; its member then stops on its node: the trap's line
  // arrives with the member's exit, well within the 20 s grace (no SIGKILL was needed).
  std::string ps;
  for (int i = 0; i < 100; ++i) {
    log = Cli({"logs", id}).second;
    ps = subprocess::Run({"/bin/sh", "-c", PodmanFor(dir_ / "ctr-img") + " ps -a --format '{{.Names}}'"},
                         dir_ / "ps.log")
             .second;
    // The agent logs the member's exit a poll after podman removed the container: wait for that too.
    if (absl::StrContains(log, "got SIGTERM") && !absl::StrContains(ps, "gpugeek-") &&
        absl::StrContains(agents_[0]->output(), "exited with code 0")) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(15));
  // The trap's line; busybox sh may also say "Terminated" for the `sleep` that the SIGTERM (sent to every
  // process of the container) ended, before or after it.
  EXPECT_TRUE(log == "started\ngot SIGTERM\n" || log == "started\ngot SIGTERM\nTerminated\n" ||
              log == "started\nTerminated\ngot SIGTERM\n")
      << log;
  EXPECT_FALSE(absl::StrContains(ps, "gpugeek-")) << ps;
  EXPECT_TRUE(absl::StrContains(agents_[0]->output(), "exited with code 0")) << agents_[0]->output();
}

// `gpugeek exec` into a member that runs in a container runs in that container (podman exec), as the
// member's user, in its working folder, with its environment.
TEST_F(ContainerEndToEnd, ExecRunsInsideTheMembersContainer) {
  const fs::path project = dir_ / "exec";
  Write(project / "job.yaml",
        "name: exec-me\n"
        "image: localhost/busybox\n"
        "resources: {accelerators: L4:1}\n"
        "run: echo uid=$(id -u); echo ready > marker; echo started; sleep 120\n");
  const std::string id = Submit(project / "job.yaml");
  ASSERT_FALSE(id.empty());
  std::string log = WaitForLog(id, "started\n");
  ASSERT_TRUE(absl::StrContains(log, "started\n")) << log << agents_[0]->output();
  const std::string uid_line = log.substr(0, log.find('\n') + 1);  // "uid=N\n"
  // (--server before the `--`: what follows it is the command.)
  auto [code, out] = RunCli({"exec", id, "--server", url_, "--", "sh", "-c",
                             "cat marker; echo $GPUGEEK_JOB_ID; test -e /run/.containerenv && echo in-container; "
                             "echo uid=$(id -u); exit 5"},
                            dir_ / "cli.log");
  EXPECT_EQ(code, 5) << out;
  EXPECT_TRUE(absl::StrContains(out, "ready\n" + id + "\nin-container\n" + uid_line)) << out << "\n" << log;
  ASSERT_EQ(Cli({"cancel", id}).first, 0);
  EXPECT_EQ(WaitEnded(id).value("state", ""), "CANCELLED");
}

// Port forwarding reaches a member in a container: its listeners are found under the container's own
// process (podman inspect), and curl gets the file busybox httpd serves from the job's working folder.
TEST_F(ContainerEndToEnd, PortForwardReachesAServerInTheMembersContainer) {
  const fs::path project = dir_ / "serve";
  const int port = subprocess::FreeLoopbackPort();  // the container shares the host's network (--network=host)
  Write(project / "job.yaml", fmt::format("name: serve\n"
                                          "image: localhost/busybox\n"
                                          "resources: {{accelerators: L4:1}}\n"
                                          "run: echo served from a container > page.txt; echo started; "
                                          "exec httpd -f -p 127.0.0.1:{} -h .\n",
                                          port));
  const std::string id = Submit(project / "job.yaml");
  ASSERT_FALSE(id.empty());
  std::string log = WaitForLog(id, "started\n");
  ASSERT_TRUE(absl::StrContains(log, "started\n")) << log << agents_[0]->output();
  const std::regex row(fmt::format("\n0 +{} +{} +127\\.0\\.0\\.1 *\n", with_, port));
  std::string listed;
  for (int i = 0; i < 100 && !std::regex_search(listed, row); ++i) {
    listed = Cli({"ports", id}).second;
    if (!std::regex_search(listed, row)) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(std::regex_search(listed, row)) << listed << agents_[0]->output();
  Process forward({GPUGEEK_BINARY, "port-forward", id, fmt::format(":{}", port), "--server", url_},
                  dir_ / "forward.log");
  const std::string local = forward.WaitForOutput(std::regex("Forwarding from 127\\.0\\.0\\.1:(\\d+) "));
  ASSERT_FALSE(local.empty()) << forward.output();
  auto [code, page] =
      subprocess::Run({"/usr/bin/curl", "-sS", "http://127.0.0.1:" + local + "/page.txt"}, dir_ / "curl.log");
  EXPECT_EQ(code, 0);
  EXPECT_EQ(page, "served from a container\n") << forward.output();
  ASSERT_EQ(Cli({"cancel", id}).first, 0);
  EXPECT_EQ(WaitEnded(id).value("state", ""), "CANCELLED");
}

// An image stating a CUDA version (org.gpugeek.cuda) is not offered by a node whose GPUs state none (an
// emulated L4): `gpugeek images` shows it with the reason, and a job naming it is refused at submission.
// The same image without the label, and one labelled cpu, are offered.
TEST_F(ContainerEndToEnd, AnImageWhoseCudaVersionTheDriverDoesNotMeetIsNotOffered) {
  const std::string podman = PodmanFor(dir_ / "ctr-img");
  auto [made, made_out] = subprocess::Run(
      {"/bin/sh", "-c",
       podman + " create --name labeller localhost/busybox:latest true && " + podman +
           " commit -q --change 'LABEL org.gpugeek.cuda=12.1' labeller localhost/busybox:cuda12 && " + podman +
           " commit -q --change 'LABEL org.gpugeek.accelerator=cpu' labeller localhost/busybox:cpu && " + podman +
           " rm labeller"},
      dir_ / "commit.log");
  ASSERT_EQ(made, 0) << made_out;
  agents_[0].reset();  // started again, it reads the new images at once
  agents_[0] = std::make_unique<Process>(agent_args_[0], dir_ / (with_ + ".restarted.log"));
  const std::string unfit_row =
      "localhost/busybox:cuda12  no: needs CUDA >= 12.1; GPU 0 states no CUDA version ('emulated')";
  std::string images;
  for (int i = 0; i < 200 && !absl::StrContains(images, unfit_row); ++i) {
    images = Cli({"images"}).second;
    if (!absl::StrContains(images, unfit_row)) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(absl::StrContains(images, with_ + "  localhost/busybox:cpu     yes")) << images;
  EXPECT_TRUE(absl::StrContains(images, with_ + "  " + unfit_row)) << images;
  EXPECT_TRUE(absl::StrContains(agents_[0]->output(),
                                "image localhost/busybox:cuda12 does not fit this node, not offered: needs CUDA >= "
                                "12.1; GPU 0 states no CUDA version ('emulated')"))
      << agents_[0]->output();
  const fs::path spec = dir_ / "cuda12.yaml";
  Write(spec, "name: cuda12\nimage: localhost/busybox:cuda12\nresources: {accelerators: L4:1}\nrun: true\n");
  auto [code, out] = Cli({"submit", spec.string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "localhost/busybox:cuda12")) << out;
}

// A container a previous agent of the node left (its `podman run` was SIGKILLed, so --rm never ran) is
// removed when the node's agent starts again; other containers of the storage are not touched.
TEST_F(ContainerEndToEnd, ARestartedAgentRemovesItsNodesLeftoverContainers) {
  const std::string podman = PodmanFor(dir_ / "ctr-img");
  const std::string leftover = "gpugeek-" + with_ + "-j-00000009-0-e1-run";
  for (const std::string& name : {leftover, std::string("someone-elses")}) {
    auto [code, out] = subprocess::Run(
        {"/bin/sh", "-c",
         podman + " run -d --name " + name + " " + kRunFlags + " --network=none localhost/busybox:latest sleep 600"},
        dir_ / "run-d.log");
    ASSERT_EQ(code, 0) << out;
  }
  agents_[0].reset();  // SIGTERM: it stops (it ran nothing)
  agents_[0] = std::make_unique<Process>(agent_args_[0], dir_ / (with_ + ".restarted.log"));
  std::string ps;
  for (int i = 0; i < 100; ++i) {
    ps = subprocess::Run({"/bin/sh", "-c", podman + " ps -a --format '{{.Names}}'"}, dir_ / "ps.log").second;
    if (!absl::StrContains(ps, leftover)) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(ps, "someone-elses\n");
  EXPECT_TRUE(absl::StrContains(agents_[0]->output(), "removed container " + leftover + " left by a previous agent"))
      << agents_[0]->output();
  (void)subprocess::Run({"/bin/sh", "-c", podman + " rm -f --time 0 someone-elses"}, dir_ / "rm.log");
}

}  // namespace
}  // namespace gpugeek
