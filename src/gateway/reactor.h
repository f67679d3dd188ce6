#pragma once
// Reactor: one thread's epoll loop for the gateway's sockets (edge-triggered, each socket registered once for
// reading and writing). Handlers run on the loop's thread; after each batch of events the loop runs the work
// deferred with AfterBatch() (the proxy's flushes, so requests from many clients that arrive together leave in one
// write per upstream connection), and every `tick` it runs the periodic callback (deadlines).
//
// Why our own loop and not Boost.Asio's: measured on the gateway bench (bench/gateway.sh), batching writes per
// epoll round is what lets the gateway carry more requests per second than nginx on the same cores; Asio's
// completion handlers run one operation at a time with no end-of-batch hook.

#include <sys/epoll.h>

#include <atomic>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"

namespace gpugeek::gateway {

class IoHandler {
 public:
  virtual ~IoHandler() = default;
  // `events`: EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLHUP, EPOLLERR bits.
  virtual void OnEvents(uint32_t events) = 0;
};

class Reactor {
 public:
  Reactor() = default;
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  absl::Status Init();
  // Registers `fd` (non-blocking) edge-triggered for in, out and peer close; `h` must outlive the registration.
  absl::Status Watch(int fd, IoHandler* h);
  // Registers a listening socket (level-triggered, reading only).
  absl::Status WatchListener(int fd, IoHandler* h);
  void Unwatch(int fd);

  // Runs `fn` after the current batch of events (once per call).
  void AfterBatch(std::function<void()> fn) { after_batch_.push_back(std::move(fn)); }

  // Runs the loop until Stop(); `on_tick` runs every `tick` (monotonic) and after Wake().
  void Run(Duration tick, const std::function<void()>& on_tick);
  // Thread-safe.
  void Stop();
  void Wake();

 private:
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<std::function<void()>> after_batch_;
};

}  // namespace gpugeek::gateway
