#pragma once
// The experiments' runner: independent simulation runs spread over threads.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpugeek::sim {

// Calls run(i) for every i in [0, n) on `jobs` threads (the caller's among them; at least 1, at most n),
// each index once; after each, on_progress(done, n) when set, one call at a time. run(i) may only write
// what belongs to index i.
inline void RunParallel(size_t n, int jobs, const std::function<void(size_t)>& run,
                        const std::function<void(size_t, size_t)>& on_progress) {
  std::atomic<size_t> next{0};
  size_t done = 0;
  std::mutex mu;
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      run(i);
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (on_progress) on_progress(done, n);
    }
  };
  const int threads = std::max(1, std::min<int>(jobs, static_cast<int>(n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace gpugeek::sim
