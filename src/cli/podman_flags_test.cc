#include "cli/podman_flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpugeek::cli {
namespace {

TEST(PodmanFlags, SplitsWordsAndResolvesAutoAndOff) {
  EXPECT_EQ(SplitWords("  podman --root /s/storage\t--runtime runc "),
            (std::vector<std::string>{"podman", "--root", "/s/storage", "--runtime", "runc"}));
  EXPECT_EQ(SplitWords(""), std::vector<std::string>{});
  EXPECT_EQ(*PodmanCommand("off"), std::vector<std::string>{});
  EXPECT_EQ(*PodmanCommand("podman --root /x"), (std::vector<std::string>{"podman", "--root", "/x"}));
  EXPECT_EQ(PodmanCommand("  ").status().message(),
            "--podman: give the podman command (e.g. \"podman --root DIR\"), auto or off");
  const bool installed = ::access("/usr/bin/podman", X_OK) == 0 || ::access("/usr/local/bin/podman", X_OK) == 0;
  EXPECT_EQ(*PodmanCommand("auto"),
            ::geteuid() == 0 && installed ? std::vector<std::string>{"podman"} : std::vector<std::string>{});
}

}  // namespace
}  // namespace gpugeek::cli
