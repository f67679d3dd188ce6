// gpugeek-shim: the supervisor between the agent and one workload, so that a workload never outlives its
// agent.
//
// The problem: the agent runs each workload as a process group. When the agent dies (SIGKILL, OOM) its
// workloads keep running unsupervised and keep GPUs the control plane hands to others; without cgroups,
// or if the agent never comes back, nothing would stop them.
//
// Usage: gpugeek-shim --status-fd N --lifeline-fd N --grace-ms N [--lease-ms N] [--env-fd N]
//                     [--uid N --gid N [--groups G,G...]] -- PROGRAM [ARG]...
//
// The executor's forked child (already session and group leader, in the workload's cgroups, with the
// workload's working directory, environment and stdio) execs the shim, which:
//   - becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so descendants orphaned by their parent, daemons
//     that setsid()ed included, are reparented to it rather than to init;
//   - ignores every signal it can (SIGKILL and SIGSTOP cannot be): the workload is a member of the shim's
//     process group, so a signal sent to the group (the executor's cancel) reaches the workload directly,
//     once, and the shim survives it to report how the workload ended. SIGTERM is blocked and read from
//     the signalfd instead: the shim notes that the group was sent one (a cancel, the agent's fence) and
//     never sends it a second one;
//   - forks and execs PROGRAM in its own group, reports kStarted with the workload's pid on the status fd
//     (shim_protocol.h), or kExec with the errno when the exec failed. The environment PROGRAM gets is
//     read from --env-fd (NAME=VALUE strings, each ended by a NUL; a memfd the executor wrote), not the
//     shim's own, which the executor leaves empty: the shim may run as root, and variables chosen by a job
//     (LD_PRELOAD, GCONV_PATH, ...) must never reach a root process. Without --env-fd PROGRAM gets none.
//   - with --uid/--gid, the child switches to that user between fork and exec: supplementary groups set
//     to exactly --groups (none by default), then the gid, then the uid, each checked (DropPrivileges in
//     shim_protocol.h), reporting kDropPrivileges with the errno if any step fails; the shim itself stays
//     the agent's user, so the workload can neither signal nor ptrace its supervisor. Either way the child
//     sets no_new_privs, so no setuid program or file capability raises the workload's privileges again.
//     Cgroup membership, the working directory and stdio were set up before, while still privileged.
//   - waits for the workload (SIGCHLD through a signalfd) and for EOF on the lifeline fd, the read end of
//     a pipe whose only write end the agent holds (close-on-exec): EOF means the agent process is gone,
//     however it died. PR_SET_PDEATHSIG is not used: it fires when the *thread* that forked exits, and
//     the agent starts workloads from any thread.
//   - with --lease-ms L, also holds a lease: it runs until L ms after the shim started, and each
//     LeaseRenewal record (shim_protocol.h) the agent writes to the lifeline moves that deadline to the
//     CLOCK_BOOTTIME time it carries (never earlier). The lease running out is treated exactly like EOF:
//     an agent that is alive but frozen (SIGSTOP, a stall, a host partitioned with its agent) keeps the
//     pipe open, and its workloads must still be gone before the control plane re-places them. The
//     deadline is on CLOCK_BOOTTIME, so a suspended machine's leases have run out when it resumes; poll
//     waits on CLOCK_MONOTONIC, so it never sleeps more than kLeaseCheckMs at a time.
//
// When the workload (PROGRAM) ends: report kExited with its wait status, SIGKILL whatever it left
// (everything descended from the shim: its process group, other groups of its session, and orphans
// reparented to it), reap them, and exit the same way the workload did: the same exit code, or the same
// signal re-raised with its default action (no core dump of the shim: the executor takes core_dumped from
// the kExited record).
// When the lifeline reports EOF, or the lease runs out: SIGTERM the tree (the shim's own group only if it
// was not sent one already), wait up to --grace-ms for it to end, SIGKILL what is left, reap, exit. A
// renewal arriving after that changes nothing: the stop is for good.
//
// The shim is single-threaded and links only libc. Finding the tree scans /proc: a process belongs to it
// when its chain of parents reaches the shim.

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/shim_protocol.h"

namespace {

using gpugeek::agent::shim::LeaseRenewal;
using gpugeek::agent::shim::Record;
using gpugeek::agent::shim::RecordKind;

// How long SIGKILL rounds go on before the shim gives up on processes that do not die (stuck in
// uninterruptible sleep, e.g. inside a GPU driver): it then exits and leaves them to init.
constexpr int64_t kKillRoundsMs = 2000;
// The most --grace-ms accepts (one hour): a grace is seconds to minutes.
constexpr long kMaxGraceMs = 3600L * 1000;
// The most --lease-ms accepts (one day).
constexpr long kMaxLeaseMs = 24L * 3600 * 1000;
// The longest single wait while a lease runs: poll's timeout does not count a suspend, the lease does.
constexpr int64_t kLeaseCheckMs = 100;
// The most supplementary groups --groups takes: GPU device groups are one or two.
constexpr int kMaxGroups = 64;
// The most --env-fd may hold: the kernel's own limit on argv + envp of one exec is about this much.
constexpr off_t kMaxEnvBytes = 32L << 20;

int g_status_fd = -1;
pid_t g_self = 0;
pid_t g_leader = 0;  // the workload's pid
bool g_leader_done = false;
int g_leader_status = 0;
bool g_leased = false;         // started with --lease-ms
int64_t g_lease_until_ns = 0;  // CLOCK_BOOTTIME
bool g_group_termed = false;   // the shim's process group was sent SIGTERM (seen on the signalfd)

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int64_t BootNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Send(RecordKind kind, int32_t value) {
  if (g_status_fd < 0) return;
  const Record record{kind, value};
  while (write(g_status_fd, &record, sizeof(record)) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void Fail(RecordKind kind, int err, const char* what) {
  Send(kind, err);
  if (g_status_fd < 0) dprintf(2, "gpugeek-shim: %s: %s\n", what, strerror(err));
  _exit(127);
}

[[noreturn]] void Usage(const char* why) {
  dprintf(
      2,
      "gpugeek-shim: %s\nusage: gpugeek-shim --status-fd N --lifeline-fd N --grace-ms N [--lease-ms N] [--env-fd N] "
      "[--uid N --gid N [--groups G,G...]] -- PROGRAM [ARG]...\n",
      why);
  Send(RecordKind::kShimSetup, EINVAL);
  _exit(127);
}

bool ParseLong(const char* text, long min, long max, long* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// Parses "G,G,..." (1..kMaxGroups gids) into `out`; returns the count, or -1.
int ParseGroups(const char* text, gid_t* out) {
  int n = 0;
  const char* p = text;
  while (*p != '\0') {
    if (n == kMaxGroups) return -1;
    char* end = nullptr;
    errno = 0;
    const unsigned long v = strtoul(p, &end, 10);
    if (errno != 0 || end == p || v >= 0xffffffffUL || (*end != ',' && *end != '\0')) return -1;
    out[n++] = static_cast<gid_t>(v);
    p = *end == ',' ? end + 1 : end;
  }
  return n;
}

// Reads the workload's environment from `fd` (NUL-ended NAME=VALUE strings, from offset 0) into a
// NULL-terminated array allocated for the rest of the shim's life. nullptr on failure, errno set.
char** ReadEnv(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;
  if (st.st_size < 0 || st.st_size > kMaxEnvBytes) {
    errno = E2BIG;
    return nullptr;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  char* data = static_cast<char*>(malloc(size + 1));
  if (data == nullptr) return nullptr;
  size_t got = 0;
  while (got < size) {
    const ssize_t n = pread(fd, data + got, size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return nullptr;
    }
    got += static_cast<size_t>(n);
  }
  data[size] = '\0';
  size_t count = 0;
  for (size_t i = 0; i < size; ++i) count += data[i] == '\0' ? 1 : 0;
  char** env = static_cast<char**>(calloc(count + 1, sizeof(char*)));
  if (env == nullptr) return nullptr;
  size_t k = 0;
  for (size_t start = 0; start < size && k < count;) {
    env[k++] = data + start;
    start += strlen(data + start) + 1;
  }
  env[k] = nullptr;
  return env;
}

// One process of the host, from /proc/<pid>/stat.
struct Proc {
  pid_t pid;
  pid_t ppid;
  pid_t pgrp;
  char state;
};

bool ReadProc(pid_t pid, Proc* out) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so parse after the last ')'.
  const char* paren = strrchr(buf, ')');
  if (paren == nullptr) return false;
  int ppid = 0;
  int pgrp = 0;
  char state = 0;
  if (sscanf(paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) return false;
  *out = Proc{pid, ppid, pgrp, state};
  return true;
}

int ComparePid(const void* a, const void* b) {
  const pid_t x = static_cast<const Proc*>(a)->pid;
  const pid_t y = static_cast<const Proc*>(b)->pid;
  return (x > y) - (x < y);
}

// Every process of the host, sorted by pid, in a buffer reused across calls. Returns the count.
size_t ScanProcs(Proc** out) {
  static Proc* procs = nullptr;
  static size_t capacity = 0;
  size_t n = 0;
  DIR* dir = opendir("/proc");
  if (dir != nullptr) {
    while (const dirent* entry = readdir(dir)) {
      long pid;
      if (!ParseLong(entry->d_name, 1, 1L << 30, &pid)) continue;
      if (n == capacity) {
        const size_t grown = capacity == 0 ? 1024 : capacity * 2;
        Proc* bigger = static_cast<Proc*>(realloc(procs, grown * sizeof(Proc)));
        if (bigger == nullptr) break;  // out of memory: work with what was read
        procs = bigger;
        capacity = grown;
      }
      if (ReadProc(static_cast<pid_t>(pid), &procs[n])) ++n;
    }
    closedir(dir);
  }
  qsort(procs, n, sizeof(Proc), ComparePid);
  *out = procs;
  return n;
}

// Whether the chain of parents of `p` reaches the shim.
bool IsDescendant(const Proc* procs, size_t n, const Proc& p) {
  pid_t parent = p.ppid;
  for (int depth = 0; depth < 4096; ++depth) {
    if (parent == g_self) return true;
    if (parent <= 1) return false;
    const Proc key{parent, 0, 0, 0};
    const Proc* found = static_cast<const Proc*>(bsearch(&key, procs, n, sizeof(Proc), ComparePid));
    if (found == nullptr) return false;
    parent = found->ppid;
  }
  return false;
}

// Sends `sig` to every live (non-zombie) descendant of the shim, except members of group `skip_pgrp`
// (0: none). Returns how many it found.
int SignalTree(int sig, pid_t skip_pgrp) {
  Proc* procs = nullptr;
  const size_t n = ScanProcs(&procs);
  int found = 0;
  for (size_t i = 0; i < n; ++i) {
    const Proc& p = procs[i];
    if (p.pid == g_self || p.state == 'Z' || p.state == 'X' || !IsDescendant(procs, n, p)) continue;
    ++found;
    if (skip_pgrp != 0 && p.pgrp == skip_pgrp) continue;
    kill(p.pid, sig);
  }
  return found;
}

// Reaps every child that has ended, noting the workload's status. Returns false once the shim has no
// child left.
bool ReapAll() {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == g_leader) {
        g_leader_done = true;
        g_leader_status = status;
      }
      continue;
    }
    if (pid == 0) return true;
    if (errno == EINTR) continue;
    return false;  // ECHILD
  }
}

// Applies the LeaseRenewal records in `data` (`n` bytes), keeping a record split across reads for the
// next call. Each write is one whole record, so a split happens only if a read asks for less than a
// record; kept anyway, as the pipe promises nothing more.
void TakeRenewals(const char* data, size_t n) {
  static char partial[sizeof(LeaseRenewal)];
  static size_t partial_len = 0;
  for (size_t i = 0; i < n; ++i) {
    partial[partial_len++] = data[i];
    if (partial_len < sizeof(partial)) continue;
    partial_len = 0;
    LeaseRenewal renewal;
    memcpy(&renewal, partial, sizeof(renewal));
    if (renewal.until_ns > g_lease_until_ns) g_lease_until_ns = renewal.until_ns;
  }
}

// Waits up to `timeout_ms` (-1: no limit) for a signal on `signal_fd` (SIGCHLD; SIGTERM sets
// g_group_termed), or for `lifeline_fd` (-1: none) to be readable, whose renewals it applies. Returns
// whether the lifeline reported EOF (or an error, which means the same: no agent).
bool Wait(int signal_fd, int lifeline_fd, int timeout_ms) {
  pollfd fds[2] = {{signal_fd, POLLIN, 0}, {lifeline_fd, POLLIN, 0}};
  const int r = poll(fds, lifeline_fd >= 0 ? 2 : 1, timeout_ms);
  if (r <= 0) return false;
  if (fds[0].revents != 0) {
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (info.ssi_signo == SIGTERM) g_group_termed = true;
    }
  }
  if (lifeline_fd >= 0 && fds[1].revents != 0) {
    char buf[64 * sizeof(LeaseRenewal)];
    const ssize_t n = read(lifeline_fd, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
    if (n > 0) TakeRenewals(buf, static_cast<size_t>(n));
  }
  return false;
}

// The poll timeout until the lease needs checking: -1 without a lease, 0 once it ran out.
int LeaseTimeoutMs() {
  if (!g_leased) return -1;
  const int64_t left_ns = g_lease_until_ns - BootNs();
  if (left_ns <= 0) return 0;
  const int64_t left_ms = (left_ns + 999999) / 1000000;
  return static_cast<int>(left_ms < kLeaseCheckMs ? left_ms : kLeaseCheckMs);
}

// SIGKILLs the whole tree in rounds (killing a process reparents its children to the shim, which the next
// round finds) and reaps it, until nothing is left or kKillRoundsMs passed.
void KillTree(int signal_fd) {
  const int64_t deadline = NowMs() + kKillRoundsMs;
  for (;;) {
    const bool children = ReapAll();
    const int alive = SignalTree(SIGKILL, 0);
    if (!children && alive == 0) return;
    if (NowMs() >= deadline) return;
    Wait(signal_fd, -1, 10);
  }
}

// Exits as the workload did: the same code, or the same signal with its default action.
[[noreturn]] void ExitLike(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    // A core of the shim would only be noise (and could overwrite the workload's `core`).
    prctl(PR_SET_DUMPABLE, 0);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    kill(g_self, sig);
    _exit(128 + sig);  // a signal whose default action does not terminate
  }
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  g_self = getpid();
  long status_fd = -1;
  long lifeline_fd = -1;
  long grace_ms = -1;
  long lease_ms = -1;
  long env_fd = -1;
  long uid = -1;
  long gid = -1;
  gid_t groups[kMaxGroups];
  int n_groups = 0;
  int program = -1;
  for (int i = 1; i < argc; i += 2) {  // each option takes one value
    if (strcmp(argv[i], "--") == 0) {
      program = i + 1;
      break;
    }
    long* target = nullptr;
    if (strcmp(argv[i], "--groups") == 0) {
      if (i + 1 >= argc || (n_groups = ParseGroups(argv[i + 1], groups)) < 0) Usage("bad or missing --groups");
      continue;
    }
    if (strcmp(argv[i], "--status-fd") == 0) {
      target = &status_fd;
    } else if (strcmp(argv[i], "--lifeline-fd") == 0) {
      target = &lifeline_fd;
    } else if (strcmp(argv[i], "--grace-ms") == 0) {
      target = &grace_ms;
    } else if (strcmp(argv[i], "--lease-ms") == 0) {
      target = &lease_ms;
    } else if (strcmp(argv[i], "--env-fd") == 0) {
      target = &env_fd;
    } else if (strcmp(argv[i], "--uid") == 0) {
      target = &uid;
    } else if (strcmp(argv[i], "--gid") == 0) {
      target = &gid;
    } else {
      Usage("unknown argument");
    }
    long max = 1L << 20;
    if (target == &grace_ms) max = kMaxGraceMs;
    if (target == &lease_ms) max = kMaxLeaseMs;
    if (target == &uid || target == &gid) max = 0xfffffffeL;  // (uid_t)-1 means "no change" to setresuid
    if (i + 1 >= argc || !ParseLong(argv[i + 1], 0, max, target)) Usage("bad or missing value");
    if (target == &status_fd) g_status_fd = static_cast<int>(status_fd);
  }
  if (status_fd < 0 || lifeline_fd < 0 || grace_ms < 0) Usage("--status-fd, --lifeline-fd and --grace-ms are required");
  if (program < 0 || program >= argc) Usage("no program after --");
  if ((uid >= 0) != (gid >= 0)) Usage("--uid and --gid go together");
  if (lease_ms >= 0) {
    g_leased = true;
    g_lease_until_ns = BootNs() + static_cast<int64_t>(lease_ms) * 1000000;  // the lease starts now
  }

  // Neither descriptor may reach the workload.
  struct stat st;
  if (fcntl(static_cast<int>(status_fd), F_SETFD, FD_CLOEXEC) != 0) Fail(RecordKind::kShimSetup, errno, "status fd");
  if (fcntl(static_cast<int>(lifeline_fd), F_SETFD, FD_CLOEXEC) != 0 ||
      fstat(static_cast<int>(lifeline_fd), &st) != 0) {
    Fail(RecordKind::kShimSetup, errno, "lifeline fd");
  }
  if (!S_ISFIFO(st.st_mode)) Fail(RecordKind::kShimSetup, EINVAL, "lifeline fd is not a pipe");
  static char* no_env[] = {nullptr};
  char** workload_env = no_env;
  if (env_fd >= 0) {
    workload_env = ReadEnv(static_cast<int>(env_fd));
    if (workload_env == nullptr) Fail(RecordKind::kShimSetup, errno, "env fd");
    close(static_cast<int>(env_fd));
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) Fail(RecordKind::kShimSetup, errno, "PR_SET_CHILD_SUBREAPER");

  // SIGCHLD wakes the loop. SIGTERM is blocked (never delivered, so its default action does not matter)
  // and read from the signalfd too: it tells that the group was sent one.
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  sigaddset(&waited, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &waited, nullptr) != 0) Fail(RecordKind::kShimSetup, errno, "sigprocmask");
  const int signal_fd = signalfd(-1, &waited, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) Fail(RecordKind::kShimSetup, errno, "signalfd");
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || sigismember(&waited, sig)) continue;
    sigaction(sig, &action, nullptr);  // EINVAL: reserved
  }

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) Fail(RecordKind::kShimSetup, errno, "pipe2");
  g_leader = fork();
  if (g_leader < 0) Fail(RecordKind::kShimFork, errno, "fork");
  if (g_leader == 0) {
    // The workload starts as the agent would have started it: default dispositions, nothing blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &action, nullptr);
    }
    Record failure{RecordKind::kExec, 0};
    int err = 0;
    if (uid >= 0)
      err = gpugeek::agent::shim::DropPrivileges(static_cast<uid_t>(uid), static_cast<gid_t>(gid), groups,
                                                 static_cast<size_t>(n_groups));
    if (err == 0) err = gpugeek::agent::shim::SetNoNewPrivs();
    if (err != 0) {
      failure.kind = RecordKind::kDropPrivileges;
    } else {
      execve(argv[program], argv + program, workload_env);
      err = errno;
    }
    failure.value = err;
    ssize_t unused = write(exec_pipe[1], &failure, sizeof(failure));
    (void)unused;
    _exit(127);
  }
  close(exec_pipe[1]);
  Record failure{};
  ssize_t n;
  do {
    n = read(exec_pipe[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    int ignored;
    while (waitpid(g_leader, &ignored, 0) < 0 && errno == EINTR) {
    }
    Fail(failure.kind, failure.value, failure.kind == RecordKind::kExec ? "exec" : "switching to the workload's user");
  }
  Send(RecordKind::kStarted, g_leader);

  for (;;) {
    const bool orphaned = Wait(signal_fd, static_cast<int>(lifeline_fd), LeaseTimeoutMs());
    ReapAll();
    if (g_leader_done) {
      Send(RecordKind::kExited, g_leader_status);
      KillTree(signal_fd);
      ExitLike(g_leader_status);
    }
    if (orphaned || LeaseTimeoutMs() == 0) break;
  }

  // The agent is gone, or its lease ran out: SIGTERM the tree (the shim's own group at once, unless a
  // cancel or the agent's fence already did: a second SIGTERM can cut a checkpoint short; the shim's own
  // SIGTERM is only noted), give it the grace, then SIGKILL what is left.
  if (!g_group_termed) kill(-g_self, SIGTERM);
  SignalTree(SIGTERM, g_self);
  const int64_t deadline = NowMs() + grace_ms;
  for (int64_t now = NowMs(); now < deadline; now = NowMs()) {
    if (!ReapAll()) break;  // no child left, so no descendant either
    Wait(signal_fd, -1, static_cast<int>(deadline - now < 50 ? deadline - now : 50));
  }
  KillTree(signal_fd);
  if (g_leader_done) ExitLike(g_leader_status);
  _exit(127);
}
