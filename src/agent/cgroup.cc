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
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>

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

absl::StatusOr<CgroupGroup> CgroupManager::CreateGroup(const std::string& id, const ResourceLimits& limits) const {
  RETURN_IF_ERROR(ValidateWorkloadId(id));
  CgroupGroup group{.id = id};
  if (mode_ == CgroupMode::kNone) {
    if (limits.cpu_millis != 0 || limits.memory_bytes != 0) {
      return absl::FailedPreconditionError(
          fmt::format("workload {} asks for CPU/memory limits but the host offers no cgroups ({})", id, Describe()));
    }
    return group;
  }
  for (const Hierarchy& h : hierarchies_) {
    const std::string dir = h.parent + "/" + id;
    int err = ::mkdir(dir.c_str(), 0755) == 0 ? 0 : errno;
    if (err == EEXIST) {
      // A group an agent that died left behind: reuse the name once it holds no process (rmdir
      // fails on a group that still has processes or children).
      absl::StatusOr<std::string> procs = ReadFile(dir + "/cgroup.procs");
      if (procs.ok() && procs->find_first_not_of(" \n") == std::string::npos && ::rmdir(dir.c_str()) == 0) {
        err = ::mkdir(dir.c_str(), 0755) == 0 ? 0 : errno;
      }
    }
    if (err != 0) {
      // Remove only what this call created.
      (void)Remove(group);
      if (err == EEXIST) {
        return absl::AlreadyExistsError(fmt::format("cgroup {} already exists (workload {} still present)", dir, id));
      }
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
  std::vector<pid_t> pids;
  if (group.procs_files.empty()) return pids;
  absl::StatusOr<std::string> text = ReadFile(group.procs_files[0]);
  if (!text.ok()) return pids;
  std::stringstream in(*text);
  long pid;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

int CgroupManager::KillAll(const CgroupGroup& group) const {
  // A process may fork between reading cgroup.procs and the kill; a few passes catch the children (a
  // fork bomb is bounded by the pids limit, not by this loop).
  std::set<pid_t> signalled;
  for (int pass = 0; pass < 5; ++pass) {
    bool any_new = false;
    for (pid_t pid : Pids(group)) {
      if (pid <= 0) continue;
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
