#include "agent/executor.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "agent/shim_protocol.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"

namespace gpugeek::agent {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Closes the file descriptors it holds when it goes out of scope.
class FdList {
 public:
  FdList() = default;
  FdList(const FdList&) = delete;
  FdList& operator=(const FdList&) = delete;
  ~FdList() {
    for (int fd : fds_) ::close(fd);
  }
  int Add(int fd) {
    fds_.push_back(fd);
    return fd;
  }
  // Stops holding `fd`: the caller keeps it open.
  void Release(int fd) { std::erase(fds_, fd); }

 private:
  std::vector<int> fds_;
};

// Returns a close-on-exec duplicate of `fd` numbered 3 or above and closes `fd`. The child dup2()s its
// log and /dev/null onto 0-2; a descriptor it still needs must not be among them (an agent started
// with stdin closed gets fd 0 from its first open()).
int MoveAbove2(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int err = errno;
  ::close(fd);
  errno = err;
  return moved;
}

absl::Status MakeDirs(const std::string& path) {
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(fmt::format("cannot create directory {}: {}", prefix, ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

using shim::RecordKind;

// The most ExecutorOptions::orphan_grace may be: what gpugeek-shim's --grace-ms accepts (one hour).
constexpr Duration kMaxOrphanGrace = std::chrono::hours(1);
// The most LaunchRequest::lease may be: what gpugeek-shim's --lease-ms accepts (one day).
constexpr Duration kMaxLease = std::chrono::hours(24);

// CLOCK_BOOTTIME in nanoseconds: the shim's lease clock (shim_protocol.h LeaseRenewal). Not the injected
// Clock: the value crosses into another process, which reads the kernel's clock.
int64_t BootTimeNs() {
  timespec ts;
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// `d` in whole milliseconds, rounded up.
int64_t CeilMillis(Duration d) { return std::chrono::ceil<std::chrono::milliseconds>(d).count(); }

// The step a failure record on the status pipe names.
const char* StepName(RecordKind kind) {
  switch (kind) {
    case RecordKind::kSetsid:
      return "setsid";
    case RecordKind::kCgroup:
      return "joining the workload's cgroup";
    case RecordKind::kChdir:
      return "chdir to the working directory";
    case RecordKind::kRedirect:
      return "redirecting stdin/stdout/stderr";
    case RecordKind::kExec:
      return "exec of the shell";
    case RecordKind::kExecShim:
      return "exec of the shim";
    case RecordKind::kShimSetup:
      return "the shim's setup";
    case RecordKind::kShimFork:
      return "the shim's fork of the workload";
    case RecordKind::kDropPrivileges:
      return "switching to the workload's user";
    case RecordKind::kStarted:
    case RecordKind::kExited:
      break;
  }
  return "setup";
}

// The shim to use: `configured` (made absolute: the child execs it after chdir), else `gpugeek-shim` next
// to /proc/self/exe, else the build tree's. FailedPrecondition naming every path looked at when none is
// an executable file.
absl::StatusOr<std::string> ResolveShim(const std::string& configured) {
  std::vector<std::string> candidates;
  std::error_code ec;
  if (!configured.empty()) {
    candidates.push_back(std::filesystem::absolute(configured, ec).string());
  } else {
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path() / "gpugeek-shim").string());
#ifdef GPUGEEK_SHIM_BUILD_PATH
    candidates.push_back(GPUGEEK_SHIM_BUILD_PATH);
#endif
  }
  for (const std::string& path : candidates) {
    if (std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0) return path;
  }
  return absl::FailedPreconditionError(
      fmt::format("gpugeek-shim is missing or not executable (looked at {}): install it next to the gpugeek "
                  "binary (the build puts it there), set ExecutorOptions.shim_path, or turn it off "
                  "(ExecutorOptions.use_shim = false: workloads then outlive an agent killed with SIGKILL)",
                  absl::StrJoin(candidates, ", ")));
}

// What the forked child does besides the common steps.
struct ChildExec {
  const char* path;         // the shim, or the shell without it
  char* const* argv;        // argv[0] == path
  bool keep_status_fd;      // true with the shim: the status pipe stays open across exec
  int lifeline_fd;          // the lifeline's read end, kept open across exec; -1 without the shim
  int env_fd;               // the workload's environment for the shim, kept open across exec; -1 without it
  RecordKind exec_failure;  // kExecShim or kExec
  // Without the shim, the child itself becomes the workload: it switches to this user (when not null)
  // and sets no_new_privs right before exec. With the shim, the shim's child does.
  const Identity* drop;
  bool no_new_privs;
};

// Runs in the forked child of a possibly multi-threaded parent: only async-signal-safe calls, no
// allocation, no locks. Never returns.
[[noreturn]] void RunChild(int status_fd, const std::vector<int>& procs_fds, const std::string& oom_score_adj,
                           const char* working_dir, int stdin_fd, int log_fd, const ChildExec& exec,
                           char* const envp[]) {
  auto fail = [status_fd](RecordKind step) {
    const shim::Record e{step, errno};
    ssize_t unused = ::write(status_fd, &e, sizeof(e));
    (void)unused;
    ::_exit(127);
  };
  if (::setsid() < 0) fail(RecordKind::kSetsid);

  // The agent may block or ignore signals (SIGPIPE, SIGCHLD for a signalfd); a workload starts clean.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL for libc-reserved ones
  }

  // Best effort (see ExecutorOptions::oom_score_adj): lowering it may need a privilege the agent lacks.
  if (const int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd >= 0) {
    ssize_t unused = ::write(fd, oom_score_adj.data(), oom_score_adj.size());
    (void)unused;
    ::close(fd);
  }

  // Join the cgroups before anything of the workload runs. The pid as decimal text, without snprintf.
  char digits[16];
  char* p = digits + sizeof(digits);
  unsigned long pid = static_cast<unsigned long>(::getpid());
  do {
    *--p = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid != 0);
  const size_t len = static_cast<size_t>(digits + sizeof(digits) - p);
  for (int fd : procs_fds) {
    if (::write(fd, p, len) != static_cast<ssize_t>(len)) fail(RecordKind::kCgroup);
  }

  if (::chdir(working_dir) != 0) fail(RecordKind::kChdir);
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) fail(RecordKind::kRedirect);
  // Descriptors the agent opened without O_CLOEXEC (another thread, a library) must not leak into the
  // workload: close_range (Linux 5.11+), else each descriptor up to the limit. Then the ones the shim needs
  // are opened up again.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    rlimit files{};
    const rlim_t top = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                           ? std::min<rlim_t>(files.rlim_cur, rlim_t{1} << 20)
                           : rlim_t{1} << 16;
    for (int fd = 3; static_cast<rlim_t>(fd) < top; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // EBADF when not open
  }
  if (exec.keep_status_fd && ::fcntl(status_fd, F_SETFD, 0) != 0) fail(exec.exec_failure);
  if (exec.lifeline_fd >= 0 && ::fcntl(exec.lifeline_fd, F_SETFD, 0) != 0) fail(exec.exec_failure);
  if (exec.env_fd >= 0 && ::fcntl(exec.env_fd, F_SETFD, 0) != 0) fail(exec.exec_failure);
  if (exec.drop != nullptr) {
    const int err =
        shim::DropPrivileges(exec.drop->uid, exec.drop->gid, exec.drop->groups.data(), exec.drop->groups.size());
    if (err != 0) {
      errno = err;
      fail(RecordKind::kDropPrivileges);
    }
  }
  if (exec.no_new_privs) {
    if (const int err = shim::SetNoNewPrivs(); err != 0) {
      errno = err;
      fail(RecordKind::kDropPrivileges);
    }
  }
  ::execve(exec.path, exec.argv, envp);
  fail(exec.exec_failure);
  ::_exit(127);  // not reached: fail() exits
}

std::string Join(const std::vector<int>& v) { return absl::StrJoin(v, ","); }

// A tenant name as api::NameKind::kTenant has it (a DNS label starting with a letter), or "" for the
// default tenant. Checked here too: the name becomes a line of the uid map file.
bool ValidTenant(const std::string& t) {
  if (t.empty()) return true;
  auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (t.size() > 63 || !lower(t.front()) || !(lower(t.back()) || digit(t.back()))) return false;
  return std::all_of(t.begin(), t.end(), [&](char c) { return lower(c) || digit(c) || c == '-'; });
}

// How the default tenant is written in the uid map ("-" is no valid tenant name).
constexpr std::string_view kDefaultTenantKey = "-";

// FNV-1a, 64 bits: a stable hash (the same on every node and build), unlike std::hash.
uint64_t Fnv1a64(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Whether the host's account databases (passwd, group: files, LDAP, ... through NSS) know `id` as a
// user or a group. A workload must never act as a real account.
bool AccountExists(uint32_t id) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* pw_found = nullptr;
  if (::getpwuid_r(static_cast<uid_t>(id), &pw, buf.data(), buf.size(), &pw_found) == 0 && pw_found != nullptr) {
    return true;
  }
  group gr;
  group* gr_found = nullptr;
  return ::getgrgid_r(static_cast<gid_t>(id), &gr, buf.data(), buf.size(), &gr_found) == 0 && gr_found != nullptr;
}

// The groups owning GPU device files that a process outside them could not open: /dev/kfd,
// /dev/dri/renderD*, /dev/nvidia* with group read-write, not world read-write, and a group other than
// root's. /dev/nvidia* is normally 0666 and contributes nothing.
std::vector<gid_t> DetectDeviceGroups() {
  std::set<gid_t> gids;
  auto consider = [&](const std::filesystem::path& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode) || st.st_gid == 0) return;
    if ((st.st_mode & 0060) == 0060 && (st.st_mode & 0006) != 0006) gids.insert(st.st_gid);
  };
  std::error_code ec;
  consider("/dev/kfd");
  for (const auto& entry : std::filesystem::directory_iterator("/dev/dri", ec)) {
    if (entry.path().filename().string().starts_with("renderD")) consider(entry.path());
  }
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    if (entry.path().filename().string().starts_with("nvidia")) consider(entry.path());
  }
  return {gids.begin(), gids.end()};
}

// A memfd holding `env` as NUL-ended NAME=VALUE strings, read by the shim (--env-fd), moved above 2,
// close-on-exec. -1 with errno on failure.
int WriteEnvMemfd(const std::vector<std::string>& env) {
  const int fd = MoveAbove2(::memfd_create("gpugeek-env", MFD_CLOEXEC));
  if (fd < 0) return -1;
  std::string data;
  for (const std::string& s : env) data.append(s).push_back('\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

EnvMap BuildWorkloadEnv(const WorkloadSpec& spec) {
  EnvMap env;
  const size_t gpus = spec.gpu_indices.size();
  env["GPUGEEK_JOB_ID"] = spec.job_id;
  env["GPUGEEK_NODE_RANK"] = std::to_string(spec.node_rank);
  env["GPUGEEK_NUM_NODES"] = std::to_string(spec.num_nodes);
  env["GPUGEEK_GPUS_PER_NODE"] = std::to_string(gpus);
  env["GPUGEEK_WORLD_SIZE"] = std::to_string(static_cast<uint64_t>(spec.num_nodes) * std::max<size_t>(1, gpus));
  env["GPUGEEK_MASTER_ADDR"] = spec.master_addr.empty() ? "127.0.0.1" : spec.master_addr;
  env["GPUGEEK_MASTER_PORT"] = std::to_string(spec.master_port == 0 ? 29500 : spec.master_port);
  env["GPUGEEK_RESTART_COUNT"] = std::to_string(spec.restart_count);
  if (!spec.checkpoint_dir.empty()) env["GPUGEEK_CHECKPOINT_DIR"] = spec.checkpoint_dir;
  if (spec.tp > 0 && spec.pp > 0 && spec.dp > 0) {
    env["GPUGEEK_TP"] = std::to_string(spec.tp);
    env["GPUGEEK_PP"] = std::to_string(spec.pp);
    env["GPUGEEK_DP"] = std::to_string(spec.dp);
    env["GPUGEEK_ZERO_STAGE"] = std::to_string(spec.zero_stage);
  }
  if (spec.micro_batch > 0) {
    env["GPUGEEK_MICRO_BATCH"] = std::to_string(spec.micro_batch);
  }
  if (gpus == 0) {
    env["CUDA_VISIBLE_DEVICES"] = "";
    env["HIP_VISIBLE_DEVICES"] = "";
    return env;
  }
  if (spec.vendor == hw::Vendor::kAmd) {
    std::vector<int> relative(gpus);
    for (size_t i = 0; i < gpus; ++i) relative[i] = static_cast<int>(i);
    env["ROCR_VISIBLE_DEVICES"] = Join(spec.gpu_indices);
    env["HIP_VISIBLE_DEVICES"] = Join(relative);
  } else {
    env["CUDA_VISIBLE_DEVICES"] = Join(spec.gpu_indices);
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  }
  return env;
}

std::string WorkloadExit::Describe() const {
  std::string text;
  if (exit_code.has_value()) {
    text = fmt::format("exited with code {}", *exit_code);
    if (cancelled) text += " after cancel";
  } else if (term_signal != 0) {
    const char* abbrev = ::sigabbrev_np(term_signal);
    text = fmt::format("killed by signal {} (SIG{})", term_signal, abbrev != nullptr ? abbrev : "?");
    if (core_dumped) text += ", core dumped";
    if (killed_after_grace) {
      text += " after the cancel grace period";
    } else if (cancelled) {
      text += " on cancel";
    }
  } else {
    text = "ended with an unknown status (reaped by someone else)";
  }
  if (oom_kills > 0) text += fmt::format("; out of memory: the cgroup limit was hit ({} OOM kills)", oom_kills);
  return text;
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(ExecutorOptions options) {
  if (options.log_dir.empty()) return absl::InvalidArgumentError("ExecutorOptions.log_dir must be set");
  if (options.clock == nullptr) return absl::InvalidArgumentError("ExecutorOptions.clock must not be null");
  if (options.shell.empty() || options.shell[0] != '/') {
    return absl::InvalidArgumentError(fmt::format("shell \"{}\" must be an absolute path", options.shell));
  }
  if (::access(options.shell.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("shell {} is not executable: {}", options.shell, ErrnoText(errno)));
  }
  if (options.default_grace < Duration::zero()) return absl::InvalidArgumentError("default_grace must be >= 0");
  if (options.orphan_grace < Duration::zero() || options.orphan_grace > kMaxOrphanGrace) {
    return absl::InvalidArgumentError("ExecutorOptions.orphan_grace must be within 0 .. 1 hour");
  }
  if (options.oom_score_adj < -1000 || options.oom_score_adj > 1000) {
    return absl::InvalidArgumentError(
        fmt::format("ExecutorOptions.oom_score_adj {} is outside -1000..1000", options.oom_score_adj));
  }
  const RunAsOptions& run_as = options.run_as;
  const uint64_t last_uid = uint64_t{run_as.first_uid} + run_as.count - 1;
  if (run_as.first_uid == 0 || run_as.count == 0 || last_uid >= 0xffffffffull) {
    return absl::InvalidArgumentError(
        fmt::format("ExecutorOptions.run_as: uids {}..{} must be a non-empty range within 1..4294967294 (uid 0 "
                    "is root, which workloads never get from the range)",
                    run_as.first_uid, last_uid));
  }
  if (!options.run_as.device_gids.has_value()) options.run_as.device_gids = DetectDeviceGroups();
  if (options.use_shim) {
    ASSIGN_OR_RETURN(options.shim_path, ResolveShim(options.shim_path));
  }
  RETURN_IF_ERROR(MakeDirs(options.log_dir));
  std::unique_ptr<Executor> executor(new Executor(std::move(options)));
  RETURN_IF_ERROR(executor->LoadUidMap());
  return executor;
}

absl::Status Executor::LoadUidMap() {
  const RunAsOptions& run_as = options_.run_as;
  if (run_as.map_path.empty()) return absl::OkStatus();
  std::ifstream in(run_as.map_path);
  if (!in) {
    if (errno == ENOENT) return absl::OkStatus();  // nothing allocated yet
    return absl::InternalError(fmt::format("cannot read uid map {}: {}", run_as.map_path, ErrnoText(errno)));
  }
  std::string line;
  std::set<uid_t> seen;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    uint64_t uid = 0;
    bool ok = space != std::string::npos && space > 0 && space <= 10;
    for (size_t i = 0; ok && i < space; ++i) {
      ok = line[i] >= '0' && line[i] <= '9';
      uid = uid * 10 + static_cast<uint64_t>(line[i] - '0');
    }
    std::string tenant = ok ? line.substr(space + 1) : "";
    if (tenant == kDefaultTenantKey) {
      tenant.clear();
    } else {
      ok = ok && !tenant.empty() && ValidTenant(tenant);
    }
    if (!ok || tenant_uids_.contains(tenant) || !seen.insert(static_cast<uid_t>(uid)).second) {
      return absl::DataLossError(fmt::format(
          "uid map {} line {}: expected \"<uid> <tenant>\" with each tenant and uid once, got \"{}\"; repair or "
          "remove the file (workloads' files keep their old owners)",
          run_as.map_path, number, absl::CEscape(line)));
    }
    if (uid < run_as.first_uid || uid >= uint64_t{run_as.first_uid} + run_as.count) {
      return absl::FailedPreconditionError(
          fmt::format("uid map {} line {}: uid {} is outside the configured range {}..{}: the range changed; "
                      "restore it or move the file away",
                      run_as.map_path, number, uid, run_as.first_uid, uint64_t{run_as.first_uid} + run_as.count - 1));
    }
    tenant_uids_[tenant] = static_cast<uid_t>(uid);
  }
  return absl::OkStatus();
}

absl::StatusOr<Identity> Executor::IdentityFor(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  return IdentityForLocked(tenant);
}

absl::StatusOr<Identity> Executor::IdentityForLocked(const std::string& tenant) {
  if (!ValidTenant(tenant)) {
    return absl::InvalidArgumentError(
        fmt::format("tenant \"{}\" is not a valid tenant name (1-63 of a-z, 0-9, '-', starting with a letter and "
                    "ending with a letter or digit; \"\" for the default tenant)",
                    absl::CEscape(tenant)));
  }
  if (!switch_users_) return Identity{.uid = ::getuid(), .gid = ::getgid(), .switched = false};
  const RunAsOptions& run_as = options_.run_as;
  auto known = tenant_uids_.find(tenant);
  uid_t uid = 0;
  if (known != tenant_uids_.end()) {
    uid = known->second;
  } else {
    std::set<uid_t> taken;
    for (const auto& [t, u] : tenant_uids_) taken.insert(u);
    const uint64_t start = Fnv1a64(tenant.empty() ? kDefaultTenantKey : tenant) % run_as.count;
    bool found = false;
    for (uint64_t i = 0; i < run_as.count && !found; ++i) {
      const uid_t candidate = static_cast<uid_t>(run_as.first_uid + (start + i) % run_as.count);
      if (taken.contains(candidate) || AccountExists(candidate)) continue;
      uid = candidate;
      found = true;
    }
    if (!found) {
      return absl::ResourceExhaustedError(
          fmt::format("no free uid for tenant \"{}\": all {} uids of {}..{} belong to other tenants or to accounts "
                      "of this host; widen ExecutorOptions.run_as",
                      tenant, run_as.count, run_as.first_uid, uint64_t{run_as.first_uid} + run_as.count - 1));
    }
    if (!run_as.map_path.empty()) {
      // Durable before any process runs as it: a restart must not hand this uid to another tenant.
      RETURN_IF_ERROR(MakeDirs(std::filesystem::path(run_as.map_path).parent_path().string()));
      const int fd = ::open(run_as.map_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      const std::string line = fmt::format("{} {}\n", uid, tenant.empty() ? kDefaultTenantKey : tenant);
      const bool written =
          fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
      const int err = errno;
      if (fd >= 0) ::close(fd);
      if (!written) {
        return absl::InternalError(fmt::format("cannot record uid {} for tenant \"{}\" in {}: {}", uid, tenant,
                                               run_as.map_path, ErrnoText(err)));
      }
    }
    tenant_uids_[tenant] = uid;
  }
  return Identity{.uid = uid, .gid = static_cast<gid_t>(uid), .groups = *run_as.device_gids, .switched = true};
}

Executor::~Executor() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, w] : running_) {
    SignalGroupLocked(w, SIGKILL);
    int status;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    // The shim was SIGKILLed and reaped: closing its lifeline ends nothing more.
    CloseFds(w);
    RemoveCgroupLocked(w.cgroup);
  }
  running_.clear();
  // Killed processes leave their cgroup a moment after the signal; give them up to a second.
  for (int attempt = 0; attempt < 100 && !pending_removals_.empty(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<CgroupGroup> busy;
    for (const CgroupGroup& g : pending_removals_) {
      if (absl::IsUnavailable(options_.cgroups->Remove(g))) busy.push_back(g);
    }
    pending_removals_ = std::move(busy);
  }
  for (const CgroupGroup& g : pending_removals_) {
    spdlog::warn("executor: cgroup of workload {} still busy at shutdown; left in place", g.id);
  }
}

std::string Executor::LogPath(const std::string& id) const { return options_.log_dir + "/" + id + ".log"; }

std::string Executor::CgroupDescription() const {
  return options_.cgroups != nullptr ? options_.cgroups->Describe() : "none: no cgroup manager configured";
}

absl::StatusOr<pid_t> Executor::Start(const LaunchRequest& request) {
  RETURN_IF_ERROR(ValidateWorkloadId(request.id));
  if (request.command.empty()) {
    return absl::InvalidArgumentError(fmt::format("workload {}: the command is empty", request.id));
  }
  for (const auto& [name, value] : request.env) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("workload {}: environment variable name \"{}\" is empty or has '=' or NUL", request.id, name));
    }
    if (value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("workload {}: environment variable {} has a NUL in its value", request.id, name));
    }
  }
  struct stat st;
  if (::stat(request.working_dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(
          fmt::format("workload {}: working directory {} does not exist", request.id, request.working_dir));
    }
    return absl::InternalError(fmt::format("workload {}: cannot stat working directory {}: {}", request.id,
                                           request.working_dir, ErrnoText(err)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        fmt::format("workload {}: working directory {} is not a directory", request.id, request.working_dir));
  }
  if (request.lease.has_value() && (*request.lease <= Duration::zero() || *request.lease > kMaxLease)) {
    return absl::InvalidArgumentError(
        fmt::format("workload {}: the lease must be within 1 ms .. 24 h (got {} ms)", request.id,
                    std::chrono::duration_cast<std::chrono::milliseconds>(*request.lease).count()));
  }
  const bool wants_limits = request.limits.cpu_millis != 0 || request.limits.memory_bytes != 0;
  if (wants_limits && options_.cgroups == nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("workload {} asks for CPU/memory limits but the executor has no cgroup manager", request.id));
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (running_.contains(request.id)) {
    return absl::AlreadyExistsError(fmt::format("workload {} is already running", request.id));
  }
  absl::StatusOr<Identity> identity = IdentityForLocked(request.tenant);
  if (!identity.ok()) {
    return absl::Status(identity.status().code(),
                        fmt::format("workload {}: {}", request.id, identity.status().message()));
  }
  EnvMap env = request.env;
  if (identity->switched) {
    // The working directory becomes the tenant's alone. O_NOFOLLOW: the agent names a directory it made;
    // a symlink there would hand the workload's user whatever it points to.
    const int dir_fd = ::open(request.working_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
      return absl::FailedPreconditionError(
          fmt::format("workload {}: cannot open working directory {} (it must be a "
                      "directory, not a symlink): {}",
                      request.id, request.working_dir, ErrnoText(errno)));
    }
    const bool owned = ::fchown(dir_fd, identity->uid, identity->gid) == 0 && ::fchmod(dir_fd, 0700) == 0;
    const int err = errno;
    ::close(dir_fd);
    if (!owned) {
      return absl::InternalError(fmt::format("workload {}: cannot give working directory {} to uid {}: {}", request.id,
                                             request.working_dir, identity->uid, ErrnoText(err)));
    }
    if (!request.as_agent) env["HOME"] = request.working_dir;
  }
  if (request.as_agent) identity->switched = false;  // only the working directory was the tenant's
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);

  FdList fds;
  const std::string log_path = LogPath(request.id);
  const int log_fd = MoveAbove2(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (log_fd < 0) {
    return absl::InternalError(
        fmt::format("workload {}: cannot open log {}: {}", request.id, log_path, ErrnoText(errno)));
  }
  fds.Add(log_fd);
  const int null_fd = MoveAbove2(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null_fd < 0) return absl::InternalError(fmt::format("cannot open /dev/null: {}", ErrnoText(errno)));
  fds.Add(null_fd);

  // A group left over from an earlier run of this id whose processes were slow to leave.
  for (auto it = pending_removals_.begin(); it != pending_removals_.end();) {
    if (it->id == request.id && options_.cgroups->Remove(*it).ok()) {
      it = pending_removals_.erase(it);
    } else {
      ++it;
    }
  }
  CgroupGroup group{.id = request.id};
  if (options_.cgroups != nullptr) {
    ASSIGN_OR_RETURN(group, options_.cgroups->CreateGroup(request.id, request.limits));
  }
  // From here on, every error path removes the group.
  auto fail = [&](absl::Status status) {
    RemoveCgroupLocked(group);
    return status;
  };
  std::vector<int> procs_fds;
  for (const std::string& path : group.procs_files) {
    // O_APPEND|O_CREAT: harmless on cgroupfs, and lets a test's plain directory tree record the pid.
    const int fd = MoveAbove2(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
    if (fd < 0) return fail(absl::InternalError(fmt::format("cannot open {}: {}", path, ErrnoText(errno))));
    procs_fds.push_back(fds.Add(fd));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return fail(absl::InternalError(fmt::format("pipe2: {}", ErrnoText(errno))));
  }
  const int status_read = MoveAbove2(pipe_fds[0]);
  const int status_write = MoveAbove2(pipe_fds[1]);
  fds.Add(status_read);
  if (status_read < 0 || status_write < 0) {
    if (status_write >= 0) ::close(status_write);
    return fail(absl::InternalError(fmt::format("fcntl: {}", ErrnoText(errno))));
  }

  // The lifeline: the shim gets the read end; the write end stays here (close-on-exec, so no other child
  // keeps it open past its exec), non-blocking so that a renewal never blocks the agent.
  const bool shim = options_.use_shim;
  int lifeline_read = -1;
  int lifeline_write = -1;
  if (shim) {
    int lifeline[2];
    if (::pipe2(lifeline, O_CLOEXEC) != 0) {
      return fail(absl::InternalError(fmt::format("lifeline pipe2: {}", ErrnoText(errno))));
    }
    lifeline_read = fds.Add(MoveAbove2(lifeline[0]));
    lifeline_write = fds.Add(MoveAbove2(lifeline[1]));
    if (lifeline_read < 0 || lifeline_write < 0 || ::fcntl(lifeline_write, F_SETFL, O_NONBLOCK) != 0) {
      return fail(absl::InternalError(fmt::format("lifeline fcntl: {}", ErrnoText(errno))));
    }
  }

  // The shim may be root: it gets an empty environment of its own, and the workload's through a memfd.
  int env_fd = -1;
  if (shim) {
    env_fd = fds.Add(WriteEnvMemfd(env_strings));
    if (env_fd < 0) return fail(absl::InternalError(fmt::format("environment memfd: {}", ErrnoText(errno))));
  }

  // Everything the child needs, prepared before fork: the child must not allocate.
  const Duration orphan_grace =
      std::clamp(request.orphan_grace.value_or(options_.orphan_grace), Duration::zero(), options_.orphan_grace);
  std::vector<std::string> args;
  if (shim) {
    args = {options_.shim_path,
            "--status-fd",
            std::to_string(status_write),
            "--lifeline-fd",
            std::to_string(lifeline_read),
            "--grace-ms",
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(orphan_grace).count())};
    if (request.lease.has_value()) args.insert(args.end(), {"--lease-ms", std::to_string(CeilMillis(*request.lease))});
    args.insert(args.end(), {"--env-fd", std::to_string(env_fd)});
    if (identity->switched) {
      args.insert(args.end(), {"--uid", std::to_string(identity->uid), "--gid", std::to_string(identity->gid)});
      if (!identity->groups.empty()) args.insert(args.end(), {"--groups", absl::StrJoin(identity->groups, ",")});
    }
    args.push_back("--");
  }
  args.insert(args.end(), {options_.shell, "-c", request.command});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const ChildExec exec{.path = argv[0],
                       .argv = argv.data(),
                       .keep_status_fd = shim,
                       .lifeline_fd = lifeline_read,
                       .env_fd = env_fd,
                       .exec_failure = shim ? RecordKind::kExecShim : RecordKind::kExec,
                       .drop = !shim && identity->switched ? &*identity : nullptr,
                       .no_new_privs = !shim};
  std::vector<char*> envp;
  if (!shim) {
    envp.reserve(env_strings.size() + 1);
    for (std::string& s : env_strings) envp.push_back(s.data());
  }
  envp.push_back(nullptr);

  const std::string oom_score_adj = std::to_string(options_.oom_score_adj);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(status_write);
    return fail(absl::InternalError(fmt::format("workload {}: fork failed: {}", request.id, ErrnoText(err))));
  }
  if (pid == 0) {
    RunChild(status_write, procs_fds, oom_score_adj, request.working_dir.c_str(), null_fd, log_fd, exec, envp.data());
  }
  ::close(status_write);

  // Without the shim, EOF means the shell was exec'd (the pipe is close-on-exec). With it, the shim says
  // kStarted once the shell was exec'd. Any other record names the step that failed.
  shim::Record record{};
  ssize_t n;
  do {
    n = ::read(status_read, &record, sizeof(record));
  } while (n < 0 && errno == EINTR);
  const bool full = n == static_cast<ssize_t>(sizeof(record));
  if (shim ? !(full && record.kind == RecordKind::kStarted) : n != 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!full || record.kind == RecordKind::kStarted || record.kind == RecordKind::kExited) {
      return fail(
          absl::InternalError(fmt::format("workload {}: gpugeek-shim ({}) ended before it started the "
                                          "workload (wait status {:#x})",
                                          request.id, options_.shim_path, status)));
    }
    const char* path = request.working_dir.c_str();
    if (record.kind == RecordKind::kExec) path = options_.shell.c_str();
    if (record.kind == RecordKind::kDropPrivileges) {
      return fail(absl::InternalError(fmt::format("workload {}: switching to uid {} gid {} failed: {}", request.id,
                                                  identity->uid, identity->gid, ErrnoText(record.value))));
    }
    if (record.kind == RecordKind::kExecShim || record.kind == RecordKind::kShimSetup ||
        record.kind == RecordKind::kShimFork) {
      path = options_.shim_path.c_str();
    }
    const std::string what = fmt::format("workload {}: {} ({}) failed: {}", request.id, StepName(record.kind), path,
                                         ErrnoText(record.value));
    if (record.kind == RecordKind::kChdir && record.value == ENOENT) return fail(absl::NotFoundError(what));
    return fail(absl::InternalError(what));
  }

  Workload& w = running_[request.id];
  w.id = request.id;
  w.pid = pid;
  w.cgroup = std::move(group);
  w.started = options_.clock->Now();
  if (shim) {
    // Kept to read the shim's kExited record once it is reaped; by then nothing writes to it any more.
    ::fcntl(status_read, F_SETFL, O_NONBLOCK);
    fds.Release(status_read);
    w.status_fd = status_read;
    fds.Release(lifeline_read);
    fds.Release(lifeline_write);
    w.lifeline_read = lifeline_read;
    w.lifeline_write = lifeline_write;
    w.leased = request.lease.has_value();
  }
  return pid;
}

void Executor::SignalGroupLocked(const Workload& w, int sig) {
  // The leader is our unreaped child, so its pid (the group id) cannot have been reused.
  ::kill(-w.pid, sig);
  if (sig == SIGKILL && options_.cgroups != nullptr) options_.cgroups->KillAll(w.cgroup);
}

absl::Status Executor::Cancel(const std::string& id, std::optional<Duration> grace) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(id);
  if (it == running_.end()) return absl::NotFoundError(fmt::format("no running workload {}", id));
  Workload& w = it->second;
  const Duration g = std::max(Duration::zero(), grace.value_or(options_.default_grace));
  const MonoTime deadline = options_.clock->Monotonic() + g;
  const bool first = !w.cancelled;
  w.cancelled = true;
  if (!w.kill_deadline.has_value() || deadline < *w.kill_deadline) w.kill_deadline = deadline;
  if (g == Duration::zero()) {
    if (!w.killed_after_grace) {
      SignalGroupLocked(w, SIGKILL);
      w.killed_after_grace = true;
    }
  } else if (first) {
    SignalGroupLocked(w, SIGTERM);
  }
  return absl::OkStatus();
}

bool Executor::TryReapLocked(Workload& w, WorkloadExit& exit) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int r;
  do {
    r = ::waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  exit.id = w.id;
  exit.pid = w.pid;
  exit.cancelled = w.cancelled;
  exit.killed_after_grace = w.killed_after_grace;
  exit.started = w.started;
  if (r < 0) {
    // ECHILD: someone else reaped it (SIGCHLD set to SIG_IGN, or a waitpid(-1) elsewhere in the agent).
    spdlog::warn("executor: workload {} (pid {}) was reaped elsewhere: {}", w.id, w.pid, ErrnoText(errno));
    if (options_.cgroups != nullptr) options_.cgroups->KillAll(w.cgroup);
    RemoveCgroupLocked(w.cgroup);
    CloseFds(w);
    return true;
  }
  if (info.si_pid == 0) return false;
  // The leader is a zombie, which keeps its pid and group id reserved: clean up what it left behind in
  // its group and cgroup, then reap it.
  SignalGroupLocked(w, SIGKILL);
  int status = 0;
  while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (w.status_fd >= 0) {
    // The shell's own status when the shim recorded it; else the shim's (SIGKILLed with its group).
    shim::Record record{};
    while (::read(w.status_fd, &record, sizeof(record)) == static_cast<ssize_t>(sizeof(record))) {
      if (record.kind == RecordKind::kExited) status = record.value;
    }
  }
  CloseFds(w);
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.term_signal = WTERMSIG(status);
    exit.core_dumped = WCOREDUMP(status);
  }
  if (options_.cgroups != nullptr) exit.oom_kills = options_.cgroups->OomKills(w.cgroup);
  RemoveCgroupLocked(w.cgroup);
  return true;
}

void Executor::CloseFds(Workload& w) {
  for (int* fd : {&w.status_fd, &w.lifeline_read, &w.lifeline_write}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

size_t Executor::RenewLeases(Duration left) {
  if (left <= Duration::zero()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const shim::LeaseRenewal renewal{.until_ns = BootTimeNs() + std::min(left, kMaxLease).count()};
  size_t renewed = 0;
  for (const auto& [id, w] : running_) {
    if (!w.leased || w.lifeline_write < 0) continue;
    ssize_t n;
    do {
      n = ::write(w.lifeline_write, &renewal, sizeof(renewal));
    } while (n < 0 && errno == EINTR);
    // EAGAIN: the pipe is full, so the shim has not read thousands of renewals; it has no use for one more.
    if (n == static_cast<ssize_t>(sizeof(renewal))) ++renewed;
  }
  return renewed;
}

void Executor::RemoveCgroupLocked(const CgroupGroup& group) {
  if (options_.cgroups == nullptr || group.dirs.empty()) return;
  const absl::Status status = options_.cgroups->Remove(group);
  if (absl::IsUnavailable(status)) {
    pending_removals_.push_back(group);
  } else if (!status.ok()) {
    spdlog::warn("executor: {}", status);
  }
}

std::vector<WorkloadExit> Executor::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkloadExit> done;
  const TimePoint now = options_.clock->Now();  // finished, shown to users
  const MonoTime mono_now = options_.clock->Monotonic();
  for (auto it = running_.begin(); it != running_.end();) {
    Workload& w = it->second;
    WorkloadExit exit;
    if (TryReapLocked(w, exit)) {
      exit.finished = now;
      done.push_back(std::move(exit));
      it = running_.erase(it);
      continue;
    }
    if (w.kill_deadline.has_value() && mono_now >= *w.kill_deadline && !w.killed_after_grace) {
      SignalGroupLocked(w, SIGKILL);
      w.killed_after_grace = true;
    }
    ++it;
  }
  std::vector<CgroupGroup> busy;
  for (const CgroupGroup& g : pending_removals_) {
    const absl::Status status = options_.cgroups->Remove(g);
    if (absl::IsUnavailable(status)) {
      busy.push_back(g);
    } else if (!status.ok()) {
      spdlog::warn("executor: {}", status);
    }
  }
  pending_removals_ = std::move(busy);
  return done;
}

bool Executor::IsRunning(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_.contains(id);
}

size_t Executor::running_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_.size();
}

}  // namespace gpugeek::agent
