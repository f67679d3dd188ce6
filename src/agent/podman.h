#pragma once
// Talking to podman (rootful, local storage): the images a node has, its leftover containers, and
// removing one. Each call runs `podman ...` as a child process and waits for it (tens of milliseconds;
// seconds on a busy node), so none of them belongs on the heartbeat path: ImageWatcher reads the image
// list on its own thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::agent {

// One name of a local image and the image's labels (string values only; image_requirements.h reads them).
struct LocalImage {
  std::string ref;  // canonical, e.g. "localhost/pytorch:bookworm"
  std::map<std::string, std::string> labels;
  bool operator==(const LocalImage&) const = default;
};

// The images in the JSON that `podman images --format json` prints, one entry per canonical name
// ("localhost/busybox:latest", api/image_ref.h), sorted by name, without duplicates; names that are not
// valid references and untagged images (no "Names") are left out. InvalidArgument when the text is not a
// JSON array of objects.
absl::StatusOr<std::vector<LocalImage>> ParsePodmanImages(std::string_view json_text);

// Runs argv (argv[0] looked up in PATH) with stdin /dev/null and an environment of PATH only, waits for it,
// and returns its stdout (at most 16 MiB). Errors: Unavailable when it cannot start or exits non-zero
// (the message has the exit status and the last line of its stderr).
absl::StatusOr<std::string> RunCapture(const std::vector<std::string>& argv);

// `PODMAN images --format json`, parsed (ParsePodmanImages).
absl::StatusOr<std::vector<LocalImage>> ListImages(const std::vector<std::string>& podman);

// The names of all containers (running or not) whose name starts with `prefix`.
absl::StatusOr<std::vector<std::string>> ListContainers(const std::vector<std::string>& podman,
                                                        const std::string& prefix);

// Keeps the node's image list current: reads it once in the constructor, then every `period` on its own
// thread, until destroyed. A failed read keeps the last list (and logs once per failure streak). `fits`
// says why an image cannot run on this node (image_requirements.h), nullopt when it can: such images are
// kept apart (unfit()) and logged once when they appear, so the scheduler never sees them.
class ImageWatcher {
 public:
  using FitFn = std::function<std::optional<std::string>(const LocalImage&)>;
  ImageWatcher(std::vector<std::string> podman, std::chrono::milliseconds period, FitFn fits);
  ~ImageWatcher();
  ImageWatcher(const ImageWatcher&) = delete;
  ImageWatcher& operator=(const ImageWatcher&) = delete;

  // The images that fit, by name (sorted); those that do not, name -> why; and a counter that grows each
  // time a read found either list different.
  std::vector<std::string> images() const;
  std::map<std::string, std::string> unfit() const;
  uint64_t version() const;

 private:
  void Refresh();

  const std::vector<std::string> podman_;
  const std::chrono::milliseconds period_;
  const FitFn fits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                         // guarded by mu_
  std::vector<std::string> images_;           // guarded by mu_
  std::map<std::string, std::string> unfit_;  // guarded by mu_
  uint64_t version_ = 0;                      // guarded by mu_
  bool failing_ = false;                      // the refresh thread only
  std::thread thread_;
};

}  // namespace gpugeek::agent
