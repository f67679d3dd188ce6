#pragma once
// ParallelFor: the data library's CPU-bound loops (shingling, MinHash, all-pairs Jaccard) over worker threads.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace gpugeek::data {

// The worker count for `threads` (0: one per hardware thread), at least 1 and at most `work` items.
inline int WorkerCount(int threads, size_t work) {
  size_t n = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::max<size_t>(1, std::min(n, std::max<size_t>(1, work))));
}

// Calls fn(begin, end, worker) over [0, n) in chunks of `chunk` items taken in turn by `workers` threads
// (WorkerCount), the calling thread among them; returns when every chunk is done. fn must be safe to call
// concurrently for different chunks; `worker` (0..workers-1) indexes per-thread state.
inline void ParallelFor(size_t n, int workers, size_t chunk, const std::function<void(size_t, size_t, int)>& fn) {
  std::atomic<size_t> next{0};
  auto run = [&](int worker) {
    for (size_t begin = next.fetch_add(chunk); begin < n; begin = next.fetch_add(chunk)) {
      fn(begin, std::min(n, begin + chunk), worker);
    }
  };
  std::vector<std::jthread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(run, w);
  run(0);
}

}  // namespace gpugeek::data
