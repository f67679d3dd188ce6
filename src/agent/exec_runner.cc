#include "agent/exec_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/shim_protocol.h"

namespace gpugeek::agent {
namespace {

constexpr size_t kReadBytes = 64 << 10;

// Writes a fixed message to fd 2 and exits: the child's failure path (async-signal-safe).
[[noreturn]] void ChildFail(const char* argv0, const char* what, int err) {
  const char* why = err == ENOENT ? "no such file or directory" : err == EACCES ? "permission denied" : "failed";
  const char* parts[] = {"gpugeek exec: ", argv0, ": ", what, ": ", why, "\n"};
  for (const char* p : parts) {
    ssize_t ignored = ::write(2, p, std::strlen(p));
    (void)ignored;
  }
  ::_exit(err == ENOENT ? 127 : 126);
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

api::ExecExit RunExec(const ExecTarget& target, const std::vector<std::string>& argv, Duration timeout,
                      const std::function<bool(const std::string&)>& write) {
  const auto finish = [&](api::ExecExit exit) {
    write(api::EncodeExecExit(exit));
    return exit;
  };
  if (argv.empty()) return finish({.exit_code = 127, .message = "no command"});
  if (!target.wrap.empty()) {
    ExecTarget inner = target;
    inner.wrap.clear();
    std::vector<std::string> wrapped = target.wrap;
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return RunExec(inner, wrapped, timeout, write);
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : target.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const Identity& id = target.identity;
  // The files to try, in order: argv[0] itself when it names a path, else argv[0] in each directory of the
  // member's PATH (default /usr/local/bin:/usr/bin:/bin), as a shell searches.
  std::vector<std::string> candidates;
  if (argv[0].find('/') != std::string::npos) {
    candidates.push_back(argv[0]);
  } else {
    auto path = target.env.find("PATH");
    const std::string dirs = path != target.env.end() ? path->second : "/usr/local/bin:/usr/bin:/bin";
    size_t begin = 0;
    while (begin <= dirs.size()) {
      size_t end = dirs.find(':', begin);
      if (end == std::string::npos) end = dirs.size();
      const std::string dir = dirs.substr(begin, end - begin);
      candidates.push_back((dir.empty() ? "." : dir) + "/" + argv[0]);
      begin = end + 1;
    }
  }

  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    CloseFd(devnull);
    for (int* fd : {&out[0], &out[1], &err[0], &err[1]}) CloseFd(*fd);
    return finish({.message = fmt::format("exec: making pipes: {}", why)});
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    for (int* fd : {&devnull, &out[0], &out[1], &err[0], &err[1]}) CloseFd(*fd);
    return finish({.message = fmt::format("exec: fork: {}", why)});
  }
  if (pid == 0) {
    ::setsid();
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);  // SIGKILL/SIGSTOP fail harmlessly
    if (::chdir(target.working_dir.c_str()) != 0) ChildFail(args[0], "working folder", errno);
    if (id.switched) {
      const int e = shim::DropPrivileges(id.uid, id.gid, id.groups.data(), id.groups.size());
      if (e != 0) ChildFail(args[0], "switching user", e);
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(args[0], "no_new_privs", errno);
    // As a shell: a file that exists but cannot be run is 126 "permission denied"; none found, 127. A
    // directory of PATH the member's user cannot search counts as not holding it.
    int found_err = 0;
    for (const std::string& c : candidates) {
      ::execve(c.c_str(), args.data(), envp.data());
      const int e = errno;
      struct stat st {};
      if (e != ENOENT && e != ENOTDIR && ::stat(c.c_str(), &st) == 0 && found_err == 0) found_err = e;
    }
    ChildFail(args[0], "exec", found_err != 0 ? found_err : ENOENT);
  }
  CloseFd(devnull);
  CloseFd(out[1]);
  CloseFd(err[1]);

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  auto last_write = start;
  std::string message;
  bool killed = false;
  bool reaped = false;
  int status = 0;
  std::string buf(kReadBytes, '\0');
  const auto kill_group = [&](const std::string& why) {
    if (!killed) ::kill(-pid, SIGKILL);
    killed = true;
    if (message.empty()) message = why;
  };
  // Reads while either pipe is open and the leader runs; after it exited, only what is already buffered.
  while (true) {
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (out[0] < 0 && err[0] < 0 && (reaped || killed)) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      kill_group(
          fmt::format("timed out after {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
    }
    if (!killed && now - last_write >= kExecKeepAlive) {
      if (!write(api::EncodeExecFrame(api::ExecStream::kStdout, ""))) kill_group("the client went away");
      last_write = now;
    }
    pollfd fds[2] = {{.fd = out[0], .events = POLLIN, .revents = 0}, {.fd = err[0], .events = POLLIN, .revents = 0}};
    // After the leader has exited (or was killed), drain what is there without waiting: a daemon it
    // left holding the pipes open must not keep the exec going.
    const int wait_ms = reaped || killed ? 0 : 100;
    const int n = ::poll(fds, 2, wait_ms);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) {
      if (reaped || killed) break;
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      int& fd = i == 0 ? out[0] : err[0];
      const ssize_t got = ::read(fd, buf.data(), buf.size());
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        CloseFd(fd);
        continue;
      }
      if (killed) continue;  // the client is gone or time is up: discard
      if (!write(api::EncodeExecFrame(i == 0 ? api::ExecStream::kStdout : api::ExecStream::kStderr,
                                      buf.substr(0, static_cast<size_t>(got))))) {
        kill_group("the client went away");
      }
      last_write = std::chrono::steady_clock::now();
    }
  }
  CloseFd(out[0]);
  CloseFd(err[0]);
  ::kill(-pid, SIGKILL);  // whatever the command left in its group
  if (!reaped) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  api::ExecExit exit{.message = message};
  if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  spdlog::info("exec in {}: {} ended: {}", target.workload_id, argv[0],
               exit.exit_code ? fmt::format("exit code {}", *exit.exit_code)
                              : fmt::format("signal {} ({})", exit.signal.value_or(0), exit.message));
  return finish(exit);
}

}  // namespace gpugeek::agent
