#include "agent/emulated_utilization.h"

#include "common/file.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpugeek::agent {
namespace {

// Fields 6 (session) and 14-17 (utime, stime, cutime, cstime) of /proc/PID/stat; the command name
// (field 2) is in parentheses and may hold spaces, so fields are counted after its last ')'.
bool ReadStat(const std::string& path, pid_t* session, uint64_t* ticks) {
  const std::optional<std::string> read = ReadProcFile(path);  // the process may exit meanwhile
  if (!read) return false;
  const std::string& text = *read;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string f;
  uint64_t sum = 0;
  for (int field = 3; field <= 17 && fields >> f; ++field) {
    if (field == 6) {
      long long v = 0;
      if (std::from_chars(f.data(), f.data() + f.size(), v).ec != std::errc()) return false;
      *session = static_cast<pid_t>(v);
    } else if (field >= 14) {
      long long v = 0;
      if (std::from_chars(f.data(), f.data() + f.size(), v).ec != std::errc()) return false;
      sum += static_cast<uint64_t>(std::max<long long>(0, v));
      if (field == 17) {
        *ticks = sum;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::map<pid_t, uint64_t> SessionsCpuTicks(const std::set<pid_t>& sids, const std::string& proc_root) {
  std::map<pid_t, uint64_t> total;
  for (pid_t sid : sids) total[sid] = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    pid_t session = 0;
    uint64_t ticks = 0;
    if (!ReadStat(entry.path().string() + "/stat", &session, &ticks)) continue;
    if (auto it = total.find(session); it != total.end()) it->second += ticks;
  }
  return total;
}

uint64_t SessionCpuTicks(pid_t sid, const std::string& proc_root) { return SessionsCpuTicks({sid}, proc_root)[sid]; }

std::map<int, uint32_t> EmulatedUtilization::Sample(const std::vector<GpuHolder>& holders, MonoTime now) {
  static const double kTicksPerSecond = static_cast<double>(std::max<long>(1, sysconf(_SC_CLK_TCK)));
  std::map<int, uint32_t> out;
  std::map<pid_t, Seen> next;
  std::set<pid_t> sessions;
  for (const GpuHolder& h : holders) {
    if (h.session > 0 && !h.devices.empty()) sessions.insert(h.session);
  }
  if (sessions.empty()) {
    seen_.clear();
    return out;
  }
  std::map<pid_t, uint64_t> ticks_by_session = SessionsCpuTicks(sessions, proc_root_);  // one pass over /proc
  for (const GpuHolder& h : holders) {
    if (h.session <= 0 || h.devices.empty()) continue;
    const uint64_t ticks = ticks_by_session[h.session];
    next[h.session] = {ticks, now};
    uint32_t percent = 0;
    if (auto it = seen_.find(h.session); it != seen_.end() && now > it->second.at) {
      const double seconds = std::chrono::duration<double>(now - it->second.at).count();
      const double cpu = static_cast<double>(ticks > it->second.ticks ? ticks - it->second.ticks : 0) / kTicksPerSecond;
      const double share = 100.0 * cpu / seconds / static_cast<double>(h.devices.size());
      percent = static_cast<uint32_t>(std::clamp(std::lround(share), 0L, 100L));
    }
    for (int d : h.devices) out[d] = percent;
  }
  seen_ = std::move(next);
  return out;
}

}  // namespace gpugeek::agent
