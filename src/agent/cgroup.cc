#include "agent/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "common/status_macros.h"

namespace gpugeek::agent {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(fmt::format("cannot open {}: {}", path, ErrnoText(errno)));
  std::string out;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(fmt::format("cannot read {}: {}", path, ErrnoText(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Writes `content` with one write(2): cgroup files parse each write as one value. O_CREAT|O_TRUNC is a
// no-op on cgroupfs (its files always exist) and lets the same code fill a plain directory tree in tests.
absl::Status WriteFile(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(fmt::format("cannot open {} for writing: {}", path, ErrnoText(errno)));
  ssize_t n;
  do {
    n = ::write(fd, content.data(), content.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return absl::InternalError(fmt::format("cannot write \"{}\" to {}: {}", content, path, ErrnoText(err)));
  if (static_cast<size_t>(n) != content.size()) {
    return absl::InternalError(fmt::format("short write of \"{}\" to {}", content, path));
  }
  return absl::OkStatus();
}

// mkdir that accepts an existing directory.
absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return absl::OkStatus();
  return absl::InternalError(fmt::format("cannot create {}: {}", path, ErrnoText(errno)));
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) parts.push_back(part);
  return parts;
}

bool HasWord(const std::string& text, const std::string& word) {
  std::stringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

// Reads "key value" lines (memory.events, memory.oom_control) and returns the value of `key`, or 0.
uint64_t ReadKeyedValue(const std::string& path, const std::string& key) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return 0;
  std::stringstream in(*text);
  std::string k;
  uint64_t v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// On cgroupfs a group's control files vanish with rmdir. A root on a plain file system (a test's
// temporary tree) holds the files this manager wrote, which must go first for rmdir to succeed.
void RemovePlainFiles(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) return;
  if (fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC) return;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const struct dirent* e = ::readdir(d)) {
    if (e->d_type == DT_REG) ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

// The directories of the groups nested in `dir` (not `dir` itself), innermost first, so that removing
// them in this order removes each one's children before it.
void NestedGroups(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> children;
  while (const struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && Exists(dir + "/" + name + "/."))) {
      children.push_back(dir + "/" + name);
    }
  }
  ::closedir(d);
  for (const std::string& child : children) {
    NestedGroups(child, out);
    out.push_back(child);
  }
}

// Whether `pid` still runs code: absent and zombie processes do not (a zombie holds nothing but its pid,
// and its parent, not us, reaps it).
bool ProcessRuns(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return false;
  const size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

// Never init nor the agent itself, whatever a group lists (a misplaced agent, a corrupt test tree).
bool Killable(pid_t pid) { return pid > 1 && pid != ::getpid(); }

}  // namespace

absl::Status ValidateWorkloadId(const std::string& id) {
  if (id.empty() || id.size() > 128) {
    return absl::InvalidArgumentError(fmt::format("workload id \"{}\" must be 1-128 characters", id));
  }
  if (id[0] == '.') return absl::InvalidArgumentError(fmt::format("workload id \"{}\" must not start with '.'", id));
  for (char c : id) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          fmt::format("workload id \"{}\" has character '{}'; allowed are A-Z a-z 0-9 . _ -", id, c));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CgroupManager>> CgroupManager::Create(const CgroupOptions& options) {
  if (options.root.empty() || options.root[0] != '/') {
    return absl::InvalidArgumentError(fmt::format("cgroup root \"{}\" must be an absolute path", options.root));
  }
  const std::vector<std::string> parts = SplitPath(options.parent);
  if (options.parent.empty() || options.parent[0] == '/' || parts.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("cgroup parent \"{}\" must be a non-empty relative path", options.parent));
  }
  for (const std::string& part : parts) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          fmt::format("cgroup parent \"{}\" has an empty, '.' or '..' component", options.parent));
    }
  }
  // The kernel accepts CFS periods of 1 ms to 1 s.
  if (options.cpu_period < std::chrono::milliseconds(1) || options.cpu_period > std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("cpu_period must be between 1 ms and 1 s");
  }

  std::vector<std::string> why_not;

  // v2: the root itself (a unified host) or root/unified (a hybrid host).
  for (const std::string& mount : {options.root, options.root + "/unified"}) {
    const std::string controllers_file = mount + "/cgroup.controllers";
    if (!Exists(controllers_file)) continue;
    absl::StatusOr<std::string> controllers = ReadFile(controllers_file);
    if (!controllers.ok()) {
      why_not.push_back(std::string(controllers.status().message()));
      break;
    }
    std::vector<std::string> missing;
    for (const char* c : {"memory", "cpu"}) {
      if (!HasWord(*controllers, c)) missing.push_back(c);
    }
    if (!missing.empty()) {
      why_not.push_back(fmt::format("cgroup v2 at {} lacks the {} controller{}", mount, fmt::join(missing, ", "),
                                    missing.size() > 1 ? "s" : ""));
      break;
    }
    // Enable memory and cpu for the children of every level from the root down to the parent, creating
    // the levels on the way.
    absl::Status status;
    std::string dir = mount;
    for (size_t i = 0; i <= parts.size() && status.ok(); ++i) {
      status = WriteFile(dir + "/cgroup.subtree_control", "+memory +cpu");
      if (status.ok() && i < parts.size()) {
        dir += "/" + parts[i];
        status = MakeDir(dir);
      }
    }
    if (!status.ok()) {
      why_not.push_back(fmt::format("cgroup v2 at {} is unusable: {}", mount, status.message()));
      break;
    }
    return std::unique_ptr<CgroupManager>(
        new CgroupManager(CgroupMode::kV2, "", {Hierarchy{mount, mount + "/" + options.parent}}, options));
  }

  // v1: separate memory and cpu hierarchies (cpu may be a link to a joint "cpu,cpuacct" mount).
  const std::string memory_mount = options.root + "/memory";
  const std::string cpu_mount = options.root + "/cpu";
  const bool has_memory = Exists(memory_mount + "/memory.limit_in_bytes");
  const bool has_cpu = Exists(cpu_mount + "/cpu.cfs_quota_us");
  if (has_memory && has_cpu) {
    std::vector<Hierarchy> hierarchies = {{memory_mount, memory_mount + "/" + options.parent},
                                          {cpu_mount, cpu_mount + "/" + options.parent}};
    absl::Status status;
    for (const Hierarchy& h : hierarchies) {
      std::string dir = h.mount;
      for (const std::string& part : parts) {
        dir += "/" + part;
        if (status.ok()) status = MakeDir(dir);
      }
    }
    if (status.ok()) {
      return std::unique_ptr<CgroupManager>(new CgroupManager(CgroupMode::kV1, "", std::move(hierarchies), options));
    }
    why_not.push_back(fmt::format("cgroup v1 is unusable: {}", status.message()));
  } else {
    if (!has_memory) why_not.push_back(fmt::format("no cgroup v1 memory hierarchy at {}", memory_mount));
    if (!has_cpu) why_not.push_back(fmt::format("no cgroup v1 cpu hierarchy at {}", cpu_mount));
  }
  return std::unique_ptr<CgroupManager>(
      new CgroupManager(CgroupMode::kNone, fmt::format("{}", fmt::join(why_not, "; ")), {}, options));
}

std::string CgroupManager::Describe() const {
  switch (mode_) {
    case CgroupMode::kV2:
      return "cgroup v2";
    case CgroupMode::kV1:
      return "cgroup v1";
    case CgroupMode::kNone:
      break;
  }
  return "none: " + reason_;
}

absl::StatusOr<CgroupGroup> CgroupManager::CreateGroup(const std::string& id, const ResourceLimits& limits,
                                                       Duration leftover_timeout) const {
  RETURN_IF_ERROR(ValidateWorkloadId(id));
  CgroupGroup group{.id = id};
  if (mode_ == CgroupMode::kNone) {
    if (limits.cpu_millis != 0 || limits.memory_bytes != 0) {
      return absl::FailedPreconditionError(
          fmt::format("workload {} asks for CPU/memory limits but the host offers no cgroups ({})", id, Describe()));
    }
    return group;
  }
  const auto deadline = std::chrono::steady_clock::now() + leftover_timeout;
  for (const Hierarchy& h : hierarchies_) {
    const std::string dir = h.parent + "/" + id;
    int err = ::mkdir(dir.c_str(), 0755) == 0 ? 0 : errno;
    if (err == ENOENT) {
      // The parent went away (an operator's cleanup of empty groups): create it again.
      std::string level = h.mount;
      for (const std::string& part : SplitPath(options_.parent)) {
        level += "/" + part;
        (void)MakeDir(level);
        if (mode_ == CgroupMode::kV2) (void)WriteFile(level + "/cgroup.subtree_control", "+memory +cpu");
      }
      err = ::mkdir(dir.c_str(), 0755) == 0 ? 0 : errno;
    }
    if (err == EEXIST) {
      // A leftover (see the header): end what runs in it, then take the name over.
      int killed = 0;
      const absl::Status status = KillAndRemove({dir}, deadline, killed);
      if (killed > 0) {
        spdlog::warn("cgroup {}: killed {} process(es) left in it before starting workload {}", dir, killed, id);
      }
      if (!status.ok()) {
        (void)Remove(group);  // only what this call created
        if (absl::IsUnavailable(status)) {
          return absl::UnavailableError(fmt::format(
              "cgroup {} of an earlier workload {} still has processes {} ms after SIGKILL; try again later", dir, id,
              std::chrono::duration_cast<std::chrono::milliseconds>(leftover_timeout).count()));
        }
        return status;
      }
      err = ::mkdir(dir.c_str(), 0755) == 0 ? 0 : errno;
    }
    if (err != 0) {
      // Remove only what this call created.
      (void)Remove(group);
      return absl::InternalError(fmt::format("cannot create cgroup {}: {}", dir, ErrnoText(err)));
    }
    group.dirs.push_back(dir);
    group.procs_files.push_back(dir + "/cgroup.procs");
  }
  if (absl::Status status = WriteLimits(group, limits); !status.ok()) {
    (void)Remove(group);
    return status;
  }
  return group;
}

absl::Status CgroupManager::KillAndRemove(const std::vector<std::string>& dirs,
                                          std::chrono::steady_clock::time_point deadline, int& killed) const {
  // Innermost first: a group with children cannot be removed.
  CgroupGroup all;
  for (const std::string& dir : dirs) {
    NestedGroups(dir, all.dirs);
    all.dirs.push_back(dir);
  }
  for (const std::string& dir : all.dirs) all.procs_files.push_back(dir + "/cgroup.procs");
  std::set<pid_t> signalled;
  while (true) {
    // Every pass signals again: a process may have forked since the last one.
    for (pid_t pid : Pids(all)) {
      if (Killable(pid) && ::kill(pid, SIGKILL) == 0) signalled.insert(pid);
    }
    bool running = false;
    for (pid_t pid : Pids(all)) running = running || (pid > 0 && ProcessRuns(pid));
    if (!running) {
      // On cgroupfs rmdir also fails (EBUSY) while a killed process is still leaving; a plain tree (tests)
      // lists pids in a file that nobody updates, so there the processes' deaths are what counts.
      const absl::Status status = Remove(all);
      if (status.ok() || !absl::IsUnavailable(status)) {
        killed += static_cast<int>(signalled.size());
        return status;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  killed += static_cast<int>(signalled.size());
  return absl::UnavailableError(fmt::format("cgroup {} still has processes after SIGKILL", fmt::join(dirs, ", ")));
}

std::vector<ReapedGroup> CgroupManager::ReapOrphans(Duration timeout) const {
  std::vector<ReapedGroup> reaped;
  // By name, the group's directory in each hierarchy where it exists.
  std::map<std::string, std::vector<std::string>> found;
  for (const Hierarchy& h : hierarchies_) {
    DIR* d = ::opendir(h.parent.c_str());
    if (d == nullptr) continue;
    while (const struct dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string dir = h.parent + "/" + name;
      if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && Exists(dir + "/."))) found[name].push_back(dir);
    }
    ::closedir(d);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [name, dirs] : found) {
    ReapedGroup& r = reaped.emplace_back(ReapedGroup{.id = name, .dirs = dirs});
    r.status = KillAndRemove(dirs, deadline, r.killed);
  }
  return reaped;
}

absl::Status CgroupManager::RemoveParent() const {
  for (const Hierarchy& h : hierarchies_) {
    RemovePlainFiles(h.parent);
    if (::rmdir(h.parent.c_str()) == 0 || errno == ENOENT) continue;
    const int err = errno;
    if (err == EBUSY || err == ENOTEMPTY) {
      return absl::FailedPreconditionError(fmt::format("cgroup {} still holds groups", h.parent));
    }
    return absl::InternalError(fmt::format("cannot remove cgroup {}: {}", h.parent, ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::Status CgroupManager::WriteLimits(const CgroupGroup& group, const ResourceLimits& limits) const {
  const int64_t period_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.cpu_period).count();
  // The kernel rejects quotas under 1 ms.
  const int64_t quota_us = std::max<int64_t>(1000, static_cast<int64_t>(limits.cpu_millis) * period_us / 1000);
  if (mode_ == CgroupMode::kV2) {
    const std::string& dir = group.dirs[0];
    if (limits.memory_bytes != 0) {
      RETURN_IF_ERROR(WriteFile(dir + "/memory.max", std::to_string(limits.memory_bytes)));
      if (Exists(dir + "/memory.swap.max")) RETURN_IF_ERROR(WriteFile(dir + "/memory.swap.max", "0"));
    }
    if (limits.cpu_millis != 0) {
      RETURN_IF_ERROR(WriteFile(dir + "/cpu.max", fmt::format("{} {}", quota_us, period_us)));
    }
    return absl::OkStatus();
  }
  const std::string& memory_dir = group.dirs[0];
  const std::string& cpu_dir = group.dirs[1];
  if (limits.memory_bytes != 0) {
    RETURN_IF_ERROR(WriteFile(memory_dir + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes)));
    // memsw (RAM + swap) must not be below limit_in_bytes, so it is written second.
    if (Exists(memory_dir + "/memory.memsw.limit_in_bytes")) {
      RETURN_IF_ERROR(WriteFile(memory_dir + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes)));
    }
  }
  if (limits.cpu_millis != 0) {
    RETURN_IF_ERROR(WriteFile(cpu_dir + "/cpu.cfs_period_us", std::to_string(period_us)));
    RETURN_IF_ERROR(WriteFile(cpu_dir + "/cpu.cfs_quota_us", std::to_string(quota_us)));
  }
  return absl::OkStatus();
}

std::vector<pid_t> CgroupManager::Pids(const CgroupGroup& group) const {
  // Every hierarchy: a process may have joined one and not yet (or never) the other.
  std::set<pid_t> pids;
  for (const std::string& file : group.procs_files) {
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) continue;
    std::stringstream in(*text);
    long pid;
    while (in >> pid) pids.insert(static_cast<pid_t>(pid));
  }
  return {pids.begin(), pids.end()};
}

int CgroupManager::KillAll(const CgroupGroup& group) const {
  // A process may fork between reading cgroup.procs and the kill; a few passes catch the children (a
  // fork bomb is bounded by the pids limit, not by this loop).
  std::set<pid_t> signalled;
  for (int pass = 0; pass < 5; ++pass) {
    bool any_new = false;
    for (pid_t pid : Pids(group)) {
      if (!Killable(pid)) continue;
      if (::kill(pid, SIGKILL) == 0 && signalled.insert(pid).second) any_new = true;
    }
    if (!any_new) break;
  }
  return static_cast<int>(signalled.size());
}

uint64_t CgroupManager::OomKills(const CgroupGroup& group) const {
  if (group.dirs.empty()) return 0;
  if (mode_ == CgroupMode::kV2) return ReadKeyedValue(group.dirs[0] + "/memory.events", "oom_kill");
  return ReadKeyedValue(group.dirs[0] + "/memory.oom_control", "oom_kill");
}

absl::Status CgroupManager::Remove(const CgroupGroup& group) const {
  absl::Status result;
  for (const std::string& dir : group.dirs) {
    RemovePlainFiles(dir);
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
    const int err = errno;
    if (err == EBUSY) {
      if (result.ok()) result = absl::UnavailableError(fmt::format("cgroup {} still has processes", dir));
    } else {
      result = absl::InternalError(fmt::format("cannot remove cgroup {}: {}", dir, ErrnoText(err)));
    }
  }
  return result;
}

}  // namespace gpugeek::agent
