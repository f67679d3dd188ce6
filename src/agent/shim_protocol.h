#pragma once
// The status pipe between the executor and gpugeek-shim (shim_main.cc): fixed-size records, each written
// with one write() (smaller than PIPE_BUF, so never split or interleaved). Plain C types only: the shim
// links nothing but libc.
//
// Who writes what, in order:
//   the executor's forked child   a failure record (kSetsid .. kExecShim) if a step before exec fails;
//   the shim                      a failure record (kShimSetup, kShimFork, kExec) and exits 127, or
//                                 kStarted (value: the workload's pid) once the command was exec'd,
//                                 then kExited (value: the workload's raw wait status) once it ended.
// Without the shim (ExecutorOptions::use_shim false) the child writes only failure records and the pipe
// is close-on-exec: EOF means the shell was exec'd.
//
// The lifeline, the other direction: one pipe per workload whose write end only the agent process holds
// (close-on-exec, non-blocking). EOF means the agent is gone. A shim started with --lease-ms also reads
// LeaseRenewal records from it: each one extends its lease (see shim_main.cc).

#include <stdint.h>

namespace gpugeek::agent::shim {

enum class RecordKind : int32_t {
  // Failures; value is the errno.
  kSetsid = 1,     // executor child: setsid()
  kCgroup = 2,     // executor child: writing its pid to a cgroup.procs
  kChdir = 3,      // executor child: chdir to the working directory
  kRedirect = 4,   // executor child: dup2 of stdin/stdout/stderr
  kExec = 5,       // the shell (the workload's command) could not be exec'd
  kExecShim = 6,   // executor child: exec of gpugeek-shim
  kShimSetup = 7,  // shim: bad arguments, prctl, signal or pipe setup
  kShimFork = 8,   // shim: fork of the workload
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

}  // namespace gpugeek::agent::shim
