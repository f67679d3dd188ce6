#pragma once
// Mutex and MutexLock: std::mutex with clang's thread-safety annotations (ABSL_GUARDED_BY and friends are
// checked by -Wthread-safety), and a condition wait for the one place that needs it.
//
// Why not absl::Mutex: Debian's abseil is not built with ThreadSanitizer, so TSan cannot see its
// synchronisation and reports every handoff under it as a race; std::mutex is intercepted by TSan.
//
//   Mutex mu;
//   int n ABSL_GUARDED_BY(mu) = 0;
//   { MutexLock lock(&mu); ++n; mu.NotifyAll(); }
//   { MutexLock lock(&mu); mu.AwaitWithTimeout([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return n > 0; }, 1s); }

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace gpugeek {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

  // With the mutex held: waits until `done()` is true (checked under the mutex) or `timeout` passes,
  // releasing the mutex while it waits. True when `done()` held. Waiters wake on NotifyAll.
  template <typename Predicate>
  bool AwaitWithTimeout(Predicate done, std::chrono::nanoseconds timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    const bool met = changed_.wait_for(lock, timeout, done);
    lock.release();  // still held: the caller's MutexLock releases it
    return met;
  }
  // Wakes every AwaitWithTimeout; call after changing what they wait for.
  void NotifyAll() { changed_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace gpugeek
