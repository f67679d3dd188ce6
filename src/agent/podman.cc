#include "agent/podman.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "api/image_ref.h"
#include "common/absl_fmt.h"

namespace gpugeek::agent {
namespace {

constexpr size_t kMaxOutputBytes = size_t{16} << 20;

}  // namespace

absl::StatusOr<std::vector<LocalImage>> ParsePodmanImages(std::string_view json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    return absl::InvalidArgumentError("podman images --format json: not a JSON array");
  }
  std::vector<LocalImage> out;
  for (const nlohmann::json& image : j) {
    if (!image.is_object()) return absl::InvalidArgumentError("podman images --format json: an entry is not an object");
    auto names = image.find("Names");
    if (names == image.end() || !names->is_array()) continue;
    std::map<std::string, std::string> labels;
    if (auto l = image.find("Labels"); l != image.end() && l->is_object()) {
      for (const auto& [key, value] : l->items()) {
        if (value.is_string()) labels[key] = value.get<std::string>();
      }
    }
    for (const nlohmann::json& name : *names) {
      if (!name.is_string()) continue;
      const std::string text = name.get<std::string>();
      absl::StatusOr<std::string> canonical = api::CanonicalImageRef("image", text);
      if (canonical.ok() && *canonical == text) out.push_back({text, labels});
    }
  }
  std::sort(out.begin(), out.end(), [](const LocalImage& a, const LocalImage& b) { return a.ref < b.ref; });
  out.erase(
      std::unique(out.begin(), out.end(), [](const LocalImage& a, const LocalImage& b) { return a.ref == b.ref; }),
      out.end());
  return out;
}

absl::StatusOr<std::string> RunCapture(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("RunCapture: empty argv");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return absl::UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return absl::UnavailableError(fmt::format("cannot run {}: {}", argv[0], std::strerror(spawned)));
  }
  std::string out, err;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (pollfd& p : fds) {
      if (p.fd < 0 || p.revents == 0) continue;
      const ssize_t n = ::read(p.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(p.fd);
        p.fd = -1;
        --open_fds;
        continue;
      }
      std::string& sink = &p == &fds[0] ? out : err;
      if (sink.size() < kMaxOutputBytes) sink.append(buf, static_cast<size_t>(n));
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    const size_t nl = err.rfind('\n');
    const std::string last = err.substr(nl == std::string::npos ? 0 : nl + 1, 512);
    return absl::UnavailableError(fmt::format(
        "{} {} failed ({}): {}", argv[0], argv.size() > 1 ? "..." : "",
        WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status)) : fmt::format("signal {}", WTERMSIG(status)),
        last));
  }
  return out;
}

absl::StatusOr<std::vector<LocalImage>> ListImages(const std::vector<std::string>& podman) {
  std::vector<std::string> argv = podman;
  argv.insert(argv.end(), {"images", "--format", "json"});
  absl::StatusOr<std::string> out = RunCapture(argv);
  if (!out.ok()) return out.status();
  return ParsePodmanImages(*out);
}

absl::StatusOr<std::vector<std::string>> ListContainers(const std::vector<std::string>& podman,
                                                        const std::string& prefix) {
  std::vector<std::string> argv = podman;
  argv.insert(argv.end(), {"ps", "-a", "--format", "{{.Names}}"});
  absl::StatusOr<std::string> out = RunCapture(argv);
  if (!out.ok()) return out.status();
  std::vector<std::string> names;
  size_t start = 0;
  while (start < out->size()) {
    size_t nl = out->find('\n', start);
    if (nl == std::string::npos) nl = out->size();
    std::string line = out->substr(start, nl - start);
    if (line.starts_with(prefix)) names.push_back(std::move(line));
    start = nl + 1;
  }
  return names;
}

ImageWatcher::ImageWatcher(std::vector<std::string> podman, std::chrono::milliseconds period, FitFn fits)
    : podman_(std::move(podman)), period_(period), fits_(std::move(fits)) {
  Refresh();
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
      lock.unlock();
      Refresh();
      lock.lock();
    }
  });
}

ImageWatcher::~ImageWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ImageWatcher::Refresh() {
  absl::StatusOr<std::vector<LocalImage>> images = ListImages(podman_);
  if (!images.ok()) {
    if (!failing_) spdlog::warn("agent: cannot list container images: {}", images.status().message());
    failing_ = true;
    return;
  }
  failing_ = false;
  std::vector<std::string> fit;
  std::map<std::string, std::string> unfit;
  for (const LocalImage& image : *images) {
    std::optional<std::string> why = fits_ ? fits_(image) : std::nullopt;
    if (why) {
      unfit[image.ref] = *why;
    } else {
      fit.push_back(image.ref);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (fit != images_ || unfit != unfit_) {
    for (const auto& [ref, why] : unfit) {
      if (unfit_.count(ref) == 0) spdlog::warn("agent: image {} does not fit this node, not offered: {}", ref, why);
    }
    images_ = std::move(fit);
    unfit_ = std::move(unfit);
    ++version_;
  }
}

std::vector<std::string> ImageWatcher::images() const {
  std::lock_guard<std::mutex> lock(mu_);
  return images_;
}

std::map<std::string, std::string> ImageWatcher::unfit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unfit_;
}

uint64_t ImageWatcher::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

}  // namespace gpugeek::agent
