#include "gateway/reactor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpugeek::gateway {

Reactor::~Reactor() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::Status Reactor::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl(eventfd): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status Reactor::Watch(int fd, IoHandler* h) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = h;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl(add ", fd, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status Reactor::WatchListener(int fd, IoHandler* h) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = h;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl(listener ", fd, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void Reactor::Unwatch(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

void Reactor::Stop() {
  stop_.store(true);
  Wake();
}

void Reactor::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

void Reactor::Run(Duration tick, const std::function<void()>& on_tick) {
  constexpr int kBatch = 256;
  epoll_event events[kBatch];
  auto next_tick = std::chrono::steady_clock::now() + tick;
  while (!stop_.load(std::memory_order_relaxed)) {
    const auto now = std::chrono::steady_clock::now();
    const int timeout_ms =
        now >= next_tick ? 0 : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next_tick - now).count());
    const int n = epoll_wait(epoll_fd_, events, kBatch, timeout_ms);
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      auto* h = static_cast<IoHandler*>(events[i].data.ptr);
      if (h == nullptr) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(wake_fd_, &v, sizeof v);
        woken = true;
        continue;
      }
      h->OnEvents(events[i].events);
    }
    // Deferred work may defer more (a flush that completes an exchange starts the next one): run until none is left.
    while (!after_batch_.empty()) {
      std::vector<std::function<void()>> batch;
      batch.swap(after_batch_);
      for (auto& fn : batch) fn();
    }
    if (woken || std::chrono::steady_clock::now() >= next_tick) {
      on_tick();
      next_tick = std::chrono::steady_clock::now() + tick;
    }
  }
}

}  // namespace gpugeek::gateway
