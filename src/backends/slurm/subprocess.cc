#include "backends/slurm/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace gpugeek::backends::slurm {
namespace {

constexpr size_t kKeep = 64 * 1024;

// Closes what it holds.
struct Fd {
  int fd = -1;
  ~Fd() { Close(); }
  void Close() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

absl::Status Pipe(Fd& read_end, Fd& write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return absl::UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  read_end.fd = p[0];
  write_end.fd = p[1];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Finished> RunChild(const std::vector<std::string>& argv, const std::string& input,
                                  const std::vector<std::string>& env, Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("RunChild: empty argv");
  Fd in_r, in_w, out_r, out_w, err_r, err_w;
  if (auto st = Pipe(in_r, in_w); !st.ok()) return st;
  if (auto st = Pipe(out_r, out_w); !st.ok()) return st;
  if (auto st = Pipe(err_r, err_w); !st.ok()) return st;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_r.fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_w.fd, 2);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // posix_spawnp searches the caller's PATH; resolve with the child's PATH ourselves when argv[0] is bare.
  std::string program = argv[0];
  if (program.find('/') == std::string::npos) {
    for (const std::string& e : env) {
      if (e.rfind("PATH=", 0) != 0) continue;
      size_t start = 5;
      while (start <= e.size()) {
        const size_t end = std::min(e.find(':', start), e.size());
        const std::string candidate = e.substr(start, end - start) + "/" + argv[0];
        if (end > start && access(candidate.c_str(), X_OK) == 0) {
          program = candidate;
          break;
        }
        start = end + 1;
      }
    }
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program.c_str(), &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  in_r.Close();
  out_w.Close();
  err_w.Close();
  if (rc != 0) return absl::UnavailableError(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));

  // A child that exits without reading its stdin makes our write raise SIGPIPE: blocked on this thread
  // while we write, and any pending one taken before unblocking.
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);

  Finished f;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t written = 0;
  if (input.empty()) in_w.Close();
  fcntl(in_w.fd, F_SETFL, O_NONBLOCK);
  bool timed_out = false;
  while (in_w.fd >= 0 || out_r.fd >= 0 || err_r.fd >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3] = {{in_w.fd, POLLOUT, 0}, {out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
    const int n = poll(fds, 3, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (in_w.fd >= 0 && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t w = write(in_w.fd, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) in_w.Close();
    }
    for (int i = 1; i <= 2; ++i) {
      Fd& fd = i == 1 ? out_r : err_r;
      std::string& keep = i == 1 ? f.out : f.err;
      if (fd.fd < 0 || !(fds[i].revents & (POLLIN | POLLERR | POLLHUP))) continue;
      char buf[4096];
      const ssize_t r = read(fd.fd, buf, sizeof buf);
      if (r > 0) {
        if (keep.size() < kKeep) keep.append(buf, static_cast<size_t>(std::min<size_t>(r, kKeep - keep.size())));
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        fd.Close();
      }
    }
  }
  in_w.Close();
  timespec zero{0, 0};
  while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(fmt::format("{} ran longer than {} s and was killed", argv[0],
                                                   std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
  }
  f.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return f;
}

}  // namespace gpugeek::backends::slurm
