#pragma once
// Utilisation of emulated GPUs. Nothing runs kernels on an emulated GPU, so the agent reports for it
// what the workload holding it drives: the CPU time its processes used per second of wall time,
// spread over the member's GPUs, in percent (0..100). A 4-rank `launcher: torch` member busy on four
// emulated GPUs reads about 100% on each; a member that sleeps reads 0%. That is what `idle_timeout`
// (docs/job-spec.md) and `gpugeek top` see on an emulated pool; real GPUs report NVML's / ROCm SMI's
// own figure and are never touched.
//
// A member's processes are its session: the executor starts each workload with setsid, so the session
// id is the shim's pid. CPU time is utime + stime + cutime + cstime of every live process of the
// session (/proc/PID/stat, clock ticks): reaped children count through their parent's cutime/cstime.
//
// Not thread-safe: one instance per agent, called from the heartbeat thread.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"

namespace gpugeek::agent {

// CPU time used so far by the processes of session `sid`, in clock ticks (sysconf(_SC_CLK_TCK));
// 0 when none lives. Reads `proc_root` ("/proc"; tests pass a tree of their own).
uint64_t SessionCpuTicks(pid_t sid, const std::string& proc_root = "/proc");
// The same for several sessions in one pass over `proc_root`: session -> ticks (0 for one with no process).
std::map<pid_t, uint64_t> SessionsCpuTicks(const std::set<pid_t>& sids, const std::string& proc_root = "/proc");

// One running member: its session and the device indices (inventory order) of its GPUs.
struct GpuHolder {
  pid_t session = 0;
  std::vector<int> devices;
};

class EmulatedUtilization {
 public:
  explicit EmulatedUtilization(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  // Utilisation per device index for the GPUs `holders` hold, from the CPU time their sessions used
  // since the previous call (monotonic `now`); a session seen for the first time reads 0. Devices no
  // holder lists are absent (the caller reports 0 for them).
  std::map<int, uint32_t> Sample(const std::vector<GpuHolder>& holders, MonoTime now);

 private:
  struct Seen {
    uint64_t ticks = 0;
    MonoTime at{};
  };
  std::string proc_root_;
  std::map<pid_t, Seen> seen_;  // by session, from the previous call
};

}  // namespace gpugeek::agent
