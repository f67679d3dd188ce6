#pragma once
// Test support, header-only: child processes for the multi-process tests (the real `gpugeek` binary,
// service scripts) with stdout+stderr in a file.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace gpugeek::subprocess {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// Writes `text` to `p`, creating its folders.
inline void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// A loopback TCP port free right now (bound to port 0, read, closed), for a server in a child process or a
// container that cannot report the port it chose. Ports bound this way come from the kernel's ephemeral range
// only when free, unlike a port derived from the pid, which another test's listener may already hold.
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A child process with stdout+stderr in a file, SIGTERMed (then SIGKILLed) on destruction.
class Process {
 public:
  Process(std::vector<std::string> args, const fs::path& log) : log_(log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Process() { Stop(); }
  // SIGTERM, wait up to 10 s, then SIGKILL. Returns the exit status.
  int Stop() {
    if (pid_ <= 0) return status_;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        return status_;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    pid_ = -1;
    return status_;
  }
  // Reaps the child when it has exited (a zombie still answers kill(pid, 0)).
  bool alive() {
    if (pid_ <= 0) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  // The child's process id while it runs (e.g. to read /proc/<pid>/status); -1 once reaped.
  pid_t pid() const { return pid_; }
  std::string output() const { return ReadFile(log_); }
  // Group 1 of the first match of `re` in the output, waiting up to `timeout`; "" when none came.
  std::string WaitForOutput(const std::regex& re, milliseconds timeout = milliseconds(20000)) const {
    for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
      std::smatch m;
      const std::string out = output();
      if (std::regex_search(out, m, re)) return m[1];
      std::this_thread::sleep_for(milliseconds(50));
    }
    return "";
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int status_ = -1;
};

// Runs a command to completion (at most 60 s); returns {exit code, output}.
inline std::pair<int, std::string> Run(const std::vector<std::string>& args, const fs::path& log) {
  Process p(args, log);
  for (int i = 0; i < 1200 && p.alive(); ++i) std::this_thread::sleep_for(milliseconds(50));
  const int status = p.Stop();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, p.output()};
}

#ifdef GPUGEEK_BINARY
// Runs the CLI to completion; returns {exit code, output}.
inline std::pair<int, std::string> RunCli(std::vector<std::string> args, const fs::path& log) {
  args.insert(args.begin(), GPUGEEK_BINARY);
  return Run(args, log);
}
#endif

// The admin token a `gpugeek server --data-dir DIR` made on its first start (DIR/admin.token, written
// before it listens). Also exported as $GPUGEEK_TOKEN for the CLI processes the test starts, with
// $GPUGEEK_CONFIG pointed into DIR so no test reads or writes the user's own CLI config.
inline std::string UseAdminToken(const fs::path& server_data_dir) {
  std::string token = ReadFile(server_data_dir / "admin.token");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  ::setenv("GPUGEEK_TOKEN", token.c_str(), 1);
  ::setenv("GPUGEEK_CONFIG", (server_data_dir / "cli-config.yaml").c_str(), 1);
  return token;
}

// Exports a join token (`gpugeek join-token create --uses N`) as $GPUGEEK_JOIN_TOKEN, so the `gpugeek
// agent` processes the test starts join with it.
inline void UseJoinToken(const std::string& token) { ::setenv("GPUGEEK_JOIN_TOKEN", token.c_str(), 1); }
// The CA certificate of a `gpugeek server --data-dir DIR` with its default local PKI (DIR/tls/ca.crt,
// written before it listens), also exported as $GPUGEEK_CA_FILE for the CLI processes the test starts,
// so they verify the server over https as a user's CLI does.
inline std::string UseServerCa(const fs::path& server_data_dir) {
  const std::string ca = (server_data_dir / "tls" / "ca.crt").string();
  ::setenv("GPUGEEK_CA_FILE", ca.c_str(), 1);
  return ca;
}

// A `gpugeek server` listening on loopback ports the kernel chose, and where.
struct StartedServer {
  std::unique_ptr<Process> process;
  std::string url;        // the API, "https://127.0.0.1:PORT"; empty when the server never said
  std::string agent_url;  // the agents' listener
};
// Starts `binary server` with its data under `data_dir` and its output in `log`, and waits (at most 20 s)
// for the line saying where it listens.
inline StartedServer StartServer(const std::string& binary, const fs::path& data_dir, const fs::path& log,
                                 const std::vector<std::string>& extra_args = {}) {
  StartedServer s;
  std::vector<std::string> args = {binary,           "server",      "--listen",   "127.0.0.1:0",
                                   "--agent-listen", "127.0.0.1:0", "--data-dir", data_dir.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  s.process = std::make_unique<Process>(args, log);
  const std::regex listening(R"(listening on (https://127\.0\.0\.1:[0-9]+), agents on (https://127\.0\.0\.1:[0-9]+))");
  for (int i = 0; i < 400 && s.url.empty(); ++i) {
    std::smatch m;
    const std::string out = s.process->output();
    if (std::regex_search(out, m, listening)) {
      s.url = m[1];
      s.agent_url = m[2];
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return s;
}

}  // namespace gpugeek::subprocess
