#pragma once
// The status pipe between the executor and gpugeek-shim (shim_main.cc): fixed-size records, each written
// with one write() (smaller than PIPE_BUF, so never split or interleaved). Plain C types only: the shim
// links nothing but libc.
//
// Who writes what, in order:
//   the executor's forked child   a failure record (kSetsid .. kExecShim, kDropPrivileges without the
//                                 shim) if a step before exec fails;
//   the shim                      a failure record (kShimSetup, kShimFork, kDropPrivileges, kExec) and
//                                 exits 127, or
//                                 kStarted (value: the workload's pid) once the command was exec'd,
//                                 then kExited (value: the workload's raw wait status) once it ended.
// Without the shim (ExecutorOptions::use_shim false) the child writes only failure records and the pipe
// is close-on-exec: EOF means the shell was exec'd.
//
// The lifeline, the other direction: one pipe per workload whose write end only the agent process holds
// (close-on-exec, non-blocking). EOF means the agent is gone. A shim started with --lease-ms also reads
// LeaseRenewal records from it: each one extends its lease (see shim_main.cc).

#include <errno.h>
#include <grp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

namespace gpugeek::agent::shim {

enum class RecordKind : int32_t {
  // Failures; value is the errno.
  kSetsid = 1,          // executor child: setsid()
  kCgroup = 2,          // executor child: writing its pid to a cgroup.procs
  kChdir = 3,           // executor child: chdir to the working directory
  kRedirect = 4,        // executor child: dup2 of stdin/stdout/stderr
  kExec = 5,            // the shell (the workload's command) could not be exec'd
  kExecShim = 6,        // executor child: exec of gpugeek-shim
  kShimSetup = 7,       // shim: bad arguments, prctl, signal or pipe setup
  kShimFork = 8,        // shim: fork of the workload
  kDropPrivileges = 9,  // switching the workload to its user (DropPrivileges), or setting no_new_privs
  // Progress.
  kStarted = 64,  // value: the workload's pid (the shell; a child of the shim, in the shim's group)
  kExited = 65,   // value: the workload's wait status as waitpid() gave it to the shim
};

struct Record {
  RecordKind kind;
  int32_t value;
};

// One lease renewal on the lifeline: the workload may run until `until_ns`, on CLOCK_BOOTTIME (which,
// unlike CLOCK_MONOTONIC, keeps counting while the machine is suspended). Absolute, so a record read late
// (the shim was descheduled or throttled by its cgroup's CPU quota) still means the same deadline. Written
// with one write() of 8 bytes (< PIPE_BUF: whole or not at all, also on a non-blocking pipe).
struct LeaseRenewal {
  int64_t until_ns;
};
static_assert(sizeof(LeaseRenewal) == 8);

// Makes the calling process `uid`:`gid` for good, with exactly groups[0..n_groups) as supplementary
// groups, in the only order that works: setgroups and setgid while still privileged, setuid last. Then
// checks the result rather than trusting return codes: real, effective and saved ids all switched, the
// group list as asked, and (for uid != 0) that uid 0 cannot be taken back. Returns 0, or an errno (EPERM
// for a check that failed). Async-signal-safe: it runs between fork and exec.
inline int DropPrivileges(uid_t uid, gid_t gid, const gid_t* groups, size_t n_groups) {
  if (setgroups(n_groups, groups) != 0) return errno;
  if (setresgid(gid, gid, gid) != 0) return errno;
  if (setresuid(uid, uid, uid) != 0) return errno;
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || ruid != uid || euid != uid || suid != uid) return EPERM;
  if (getresgid(&rgid, &egid, &sgid) != 0 || rgid != gid || egid != gid || sgid != gid) return EPERM;
  if (getgroups(0, nullptr) != static_cast<int>(n_groups)) return EPERM;
  if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) return EPERM;
  return 0;
}

// PR_SET_NO_NEW_PRIVS: from here on no exec raises privileges (setuid bits and file capabilities are
// ignored). Inherited by every descendant. Returns 0 or an errno.
inline int SetNoNewPrivs() { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? 0 : errno; }

}  // namespace gpugeek::agent::shim
