#include "agent/podman.h"

#include <gtest/gtest.h>

namespace gpugeek::agent {
namespace {

TEST(ParsePodmanImages, CanonicalNamesSortedWithoutDuplicates) {
  // As podman 4.3 prints it (trimmed): an imported image, one with two tags, an untagged one.
  constexpr char kJson[] = R"([
    {"Id": "9252", "Names": ["localhost/busybox:latest"], "Size": 2131015},
    {"Id": "aa01", "Names": ["localhost/pytorch:bookworm", "docker.io/library/debian:12",
                             "localhost/busybox:latest"], "Labels": {"org.gpugeek.cuda": "12.1", "n": 3}},
    {"Id": "bb02", "RepoTags": null},
    {"Id": "cc03", "Names": ["localhost/bad name:1", "busybox", 7]}
  ])";
  auto images = ParsePodmanImages(kJson);
  ASSERT_TRUE(images.ok()) << images.status();
  // The first entry of a name wins; labels are the image's string-valued ones.
  const std::map<std::string, std::string> cuda = {{"org.gpugeek.cuda", "12.1"}};
  EXPECT_EQ(*images, (std::vector<LocalImage>{{"docker.io/library/debian:12", cuda},
                                              {"localhost/busybox:latest", {}},
                                              {"localhost/pytorch:bookworm", cuda}}));
  EXPECT_EQ(*ParsePodmanImages("[]"), std::vector<LocalImage>{});
  EXPECT_EQ(ParsePodmanImages("{}").status().message(), "podman images --format json: not a JSON array");
  EXPECT_EQ(ParsePodmanImages("[1]").status().message(), "podman images --format json: an entry is not an object");
}

TEST(RunCapture, ReturnsStdoutOrTheFailure) {
  auto out = RunCapture({"/bin/sh", "-c", "echo hello; echo noise >&2; printf 'PATH=%s' \"$PATH\""});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "hello\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  auto failed = RunCapture({"/bin/sh", "-c", "echo first >&2; echo 'no such image' >&2; exit 3"});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(), "/bin/sh ... failed (exit 3): no such image");
  auto missing = RunCapture({"/nonexistent/podman", "images"});
  EXPECT_EQ(missing.status().message(), "cannot run /nonexistent/podman: No such file or directory");
}

TEST(ImageWatcher, ReadsAtStartAndKeepsTheLastListOnFailure) {
  // A stand-in "podman" (a shell script's words) that prints a fixed image list: the watcher only runs
  // argv + "images --format json".
  ImageWatcher w({"/bin/sh", "-c", R"(echo '[{"Names": ["localhost/busybox:latest"]}]')", "sh"},
                 std::chrono::milliseconds(3600'000), nullptr);
  EXPECT_EQ(w.images(), std::vector<std::string>{"localhost/busybox:latest"});
  EXPECT_EQ(w.version(), 1u);
  ImageWatcher broken({"/bin/false"}, std::chrono::milliseconds(3600'000), nullptr);
  EXPECT_EQ(broken.images(), std::vector<std::string>{});
  EXPECT_EQ(broken.version(), 0u);
}

TEST(ImageWatcher, ImagesThatDoNotFitAreKeptApartWithTheReason) {
  ImageWatcher w({"/bin/sh", "-c",
                  R"(echo '[{"Names": ["localhost/busybox:latest"]},
                            {"Names": ["localhost/pytorch:cuda12"], "Labels": {"org.gpugeek.cuda": "12.1"}}]')",
                  "sh"},
                 std::chrono::milliseconds(3600'000), [](const LocalImage& image) -> std::optional<std::string> {
                   if (image.labels.count("org.gpugeek.cuda") == 0) return std::nullopt;
                   return "needs CUDA >= " + image.labels.at("org.gpugeek.cuda");
                 });
  EXPECT_EQ(w.images(), std::vector<std::string>{"localhost/busybox:latest"});
  EXPECT_EQ(w.unfit(), (std::map<std::string, std::string>{{"localhost/pytorch:cuda12", "needs CUDA >= 12.1"}}));
}

}  // namespace
}  // namespace gpugeek::agent
