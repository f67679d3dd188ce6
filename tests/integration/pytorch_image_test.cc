// The PyTorch image end to end: scripts/build-pytorch-image.sh (Debian 12 minbase + python3-torch, built
// once into a storage kept under /var/tmp and reused by later runs) runs the GPT example with `launcher:
// torch`: two ranks in the container train with DDP over gloo and the loss falls; `gpugeek images` says the
// image (labelled org.gpugeek.accelerator=cpu) fits the node. Needs root (rootful podman); skips, saying
// why, without it or when podman cannot be set up.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "podman_storage.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using subprocess::Process;
using testing::kRunFlags;
using testing::PodmanFor;
using testing::Write;

// The PyTorch image (scripts/build-pytorch-image.sh: Debian 12 minbase + python3-torch, built once into a
// storage kept under /var/tmp and reused by later runs) runs the GPT example with `launcher: torch`: two
// ranks in the container train with DDP over gloo and the loss falls.
class PytorchImage : public testing::PoolFixture {
 protected:
  static constexpr char kStorage[] = "/var/tmp/gpugeek-pytorch-image";
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "rootful podman needs root; run this test as root";
    MakeScratch("pytorch_image");
    const fs::path up = fs::path(GPUGEEK_SHARED_DIR) / "infra" / "container-up.sh";
    if (!fs::exists(up)) GTEST_SKIP() << "no " << up << " (the shared/ folder beside the checkout)";
    // container-up.sh installs podman and runc when missing; its busybox storage is not used here.
    if (std::system(
            fmt::format("{} {} > {} 2>&1", up.string(), (dir_ / "ctr").string(), (dir_ / "up.log").string()).c_str()) !=
        0) {
      GTEST_SKIP() << "podman cannot be set up here:\n" << subprocess::ReadFile(dir_ / "up.log");
    }
    const std::string build = fmt::format("{}/scripts/build-pytorch-image.sh --podman-root {} --if-missing > {} 2>&1",
                                          GPUGEEK_SOURCE_DIR, kStorage, (dir_ / "build.log").string());
    ASSERT_EQ(std::system(build.c_str()), 0) << subprocess::ReadFile(dir_ / "build.log");
    const std::string agent_url = StartServer(1);
    ASSERT_FALSE(agent_url.empty());
    node_ = "node-torch-" + std::to_string(::getpid());
    agents_.push_back(std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", ca_, "--name", node_,
                                 "--emulate", "2xL4", "--data-dir", (dir_ / node_).string(), "--podman",
                                 PodmanFor(kStorage), "--podman-run-flags", kRunFlags},
        dir_ / (node_ + ".log")));
    ASSERT_TRUE(WaitForNodes(1));
  }
  void TearDown() override {
    agents_.clear();
    server_.reset();
    // The image stays for the next run; this run's containers (if any were left) go.
    (void)std::system(fmt::format("{} ps -aq --filter name=gpugeek-{} | xargs -r {} rm -f > /dev/null 2>&1",
                                  PodmanFor(kStorage), node_, PodmanFor(kStorage))
                          .c_str());
    PoolFixture::TearDown();
  }
  std::string node_;
};

TEST_F(PytorchImage, TheGptExampleTrainsWithTwoRanksInTheImage) {
  std::string images = Cli({"images"}).second;
  EXPECT_TRUE(absl::StrContains(images, node_ + "  localhost/pytorch:bookworm  yes")) << images;
  const fs::path spec = dir_ / "gpt.yaml";
  Write(spec, fmt::format("name: gpt-in-image\n"
                          "image: localhost/pytorch:bookworm\n"
                          "resources: {{accelerators: L4:2}}\n"
                          "workdir: {}/examples/gpt\n"
                          "launcher: torch\n"
                          "run: test -e /run/.containerenv && echo in-container; "
                          "python3 -c 'import torch; print(\"torch\", torch.__version__)'; "
                          "python3 train.py --out out --steps 40 --batch-size 4 --seq-len 32 --log-every 10 "
                          "--ckpt-every 20\n",
                          GPUGEEK_SOURCE_DIR));
  const std::string id = Submit(spec);
  ASSERT_FALSE(id.empty());
  const nlohmann::json job = WaitEnded(id, std::chrono::seconds(240));
  const std::string log = Log(id);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << "\n" << log << agents_[0]->output();
  // Both local ranks ran in the container (the launcher prints each line once per rank).
  EXPECT_TRUE(absl::StrContains(log, "in-container\nin-container\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "torch 1.13.")) << log;  // Debian 12 python3-torch 1.13.1 says 1.13.0a0
  EXPECT_TRUE(absl::StrContains(log, "world_size=2")) << log;
  EXPECT_TRUE(absl::StrContains(log, "done steps=40")) << log;
  const std::string summary_text = subprocess::ReadFile(dir_ / node_ / "work" / (id + "-0") / "out" / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(summary_text, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << summary_text << log;
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_LT(summary["last_loss"].get<double>(), summary["first_loss"].get<double>()) << summary.dump();
}

}  // namespace
}  // namespace gpugeek
