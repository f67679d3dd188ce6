#pragma once
// Helpers shared by the executor and cgroup tests: temporary directories, file reads, bounded waits.

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/executor.h"
#include "gtest/gtest.h"

namespace gpugeek::agent::testing {

// A fresh directory under the test temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "gpugeek_agent_XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// Waits (sleeping 10 ms between checks, at most `timeout`) until `path` exists and is non-empty.
inline bool WaitForFile(const std::string& path, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && st.st_size > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Polls until workload `id` is reported (at most `timeout`); returns it, or nullopt on timeout. Other
// workloads' exits seen meanwhile are dropped.
inline std::optional<WorkloadExit> WaitForExit(Executor& executor, const std::string& id,
                                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (WorkloadExit& e : executor.Poll()) {
      if (e.id == id) return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

// Whether `pid` is a live process (absent and zombie count as dead: a zombie runs nothing).
inline bool ProcessAlive(pid_t pid) {
  const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

inline bool WaitForDeath(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!ProcessAlive(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !ProcessAlive(pid);
}

inline EnvMap BaseEnv() { return {{"PATH", "/usr/local/bin:/usr/bin:/bin"}}; }

// Starts `sleep 300` in a session of its own, a child of the test (reap it with ReapChild), and writes its
// pid to each of `procs_files` (a cgroup's cgroup.procs, which moves it there; or a plain tree's file): a
// workload that a previous agent, killed with SIGKILL, left behind.
inline pid_t SpawnLeftover(const std::vector<std::string>& procs_files) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  EXPECT_GT(pid, 0);
  for (const std::string& file : procs_files) {
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream out(file, std::ios::app);
    out << pid << std::flush;
    EXPECT_TRUE(out.good()) << "cannot write " << pid << " to " << file;
  }
  return pid;
}

// Kills (if still needed) and reaps a child of the test.
inline void ReapChild(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace gpugeek::agent::testing
