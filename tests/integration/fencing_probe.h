#pragma once
// Test support for the fencing tests (fencing_test.cc), header-only: a probe workload that records when
// it runs, and a checker that proves from those records that a job member never ran in two places at
// once and that two jobs never held one GPU at once.
//
// The probe (kProbeScript, run with /usr/bin/python3 as a job's `run:`) appends one line per event to
// the file named by its PROBE_FILE environment variable:
//   KIND JOB RANK RESTARTS NODE GPUS MONO_NS PID
// KIND is `start` (first thing it does), `alive` (every 100 ms), `stop` (on SIGTERM or SIGINT, and when
// PROBE_SECONDS, if set, have passed). JOB, RANK and RESTARTS are GPUGEEK_JOB_ID, GPUGEEK_NODE_RANK and
// GPUGEEK_RESTART_COUNT; NODE is the agent's node, read from the working directory the agent gives
// every member (`<data_dir>/work/<job>-<rank>`; the tests name each agent's data dir after its node);
// GPUS is CUDA_VISIBLE_DEVICES ("-" when empty); MONO_NS is CLOCK_MONOTONIC in nanoseconds
// (time.monotonic_ns(), the clock std::chrono::steady_clock reads on Linux, so the test's own
// timestamps compare with the probe's); PID tells two processes of one member apart. Each line is one
// O_APPEND write(), far below PIPE_BUF, so lines of concurrent probes never interleave.
//
// A probe ended by SIGKILL writes no `stop`: its interval then ends at its last line plus
// kProbeAlivePeriodNs, the latest it could have lived without writing the next `alive`. An interval
// starts at the probe's `start`, tens of milliseconds after the agent started the process (Python's
// start-up), so an overlap shorter than that can go unseen; the fencing timeline's margins are seconds.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpugeek::fencing {

// The probe: Python 3 (only the standard library).
inline constexpr const char* kProbeScript = R"PY(import os, signal, time
fd = os.open(os.environ["PROBE_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
job = os.environ.get("GPUGEEK_JOB_ID", "-")
rank = os.environ.get("GPUGEEK_NODE_RANK", "-")
restarts = os.environ.get("GPUGEEK_RESTART_COUNT", "-")
node = os.path.basename(os.path.dirname(os.path.dirname(os.getcwd())))
gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "") or "-"
def emit(kind):
    os.write(fd, ("%s %s %s %s %s %s %d %d\n" % (kind, job, rank, restarts, node, gpus, time.monotonic_ns(), os.getpid())).encode())
def on_signal(signum, frame):
    emit("stop")
    os._exit(128 + signum)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
emit("start")
seconds = float(os.environ.get("PROBE_SECONDS", "0"))
end = time.monotonic() + seconds
while seconds <= 0 or time.monotonic() < end:
    time.sleep(0.1)
    emit("alive")
emit("stop")
)PY";

// The probe's heartbeat period (its `time.sleep(0.1)`).
inline constexpr int64_t kProbeAlivePeriodNs = 100'000'000;

// One process of one member, from its `start` to its `stop` (or last line + kProbeAlivePeriodNs).
struct ProbeInterval {
  std::string job;
  int rank = 0;
  int restarts = 0;
  std::string node;
  std::vector<std::string> gpus;  // "NODE/INDEX" per CUDA_VISIBLE_DEVICES entry: one physical GPU each
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool stopped = false;  // a `stop` line was written (false: killed, or still running when read)
  int pid = 0;

  std::string Describe() const {
    return fmt::format("{} rank {} restarts {} on {} gpus [{}] pid {} [{:.3f} s, {:.3f} s]{}", job, rank, restarts,
                       node, fmt::join(gpus, ","), pid, start_ns / 1e9, end_ns / 1e9, stopped ? "" : " (no stop)");
  }
};

// Parses a probe file into intervals, ordered by start. Lines of a process before its `start` (none in
// practice), a last line without its newline (a probe writing as the file is read) and malformed lines
// are skipped; `errors`, when given, receives one message per malformed line.
inline std::vector<ProbeInterval> ParseProbe(std::string_view text, std::vector<std::string>* errors = nullptr) {
  std::vector<ProbeInterval> done;
  std::map<std::pair<std::string, int>, ProbeInterval> open;  // by (node, pid)
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    const std::string line(text.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    std::istringstream in(line);
    std::string kind, job, node, gpus, extra;
    int rank = 0, restarts = 0, pid = 0;
    int64_t ns = 0;
    if (!(in >> kind >> job >> rank >> restarts >> node >> gpus >> ns >> pid) || (in >> extra) ||
        (kind != "start" && kind != "alive" && kind != "stop")) {
      if (errors != nullptr) errors->push_back(fmt::format("line {}: malformed: '{}'", line_no, line));
      continue;
    }
    const auto key = std::make_pair(node, pid);
    if (kind == "start") {
      if (auto it = open.find(key); it != open.end()) {  // the pid was reused: the old process is gone
        done.push_back(it->second);
        open.erase(it);
      }
      ProbeInterval p{.job = job, .rank = rank, .restarts = restarts, .node = node, .start_ns = ns, .pid = pid};
      p.end_ns = ns + kProbeAlivePeriodNs;
      if (gpus != "-") {
        std::istringstream g(gpus);
        for (std::string index; std::getline(g, index, ',');) p.gpus.push_back(node + "/" + index);
      }
      open.emplace(key, std::move(p));
      continue;
    }
    auto it = open.find(key);
    if (it == open.end()) continue;
    if (kind == "alive") {
      it->second.end_ns = ns + kProbeAlivePeriodNs;
    } else {
      it->second.end_ns = ns;
      it->second.stopped = true;
      done.push_back(it->second);
      open.erase(it);
    }
  }
  for (auto& [key, p] : open) done.push_back(std::move(p));
  std::sort(done.begin(), done.end(), [](const ProbeInterval& a, const ProbeInterval& b) {
    return std::tie(a.start_ns, a.node, a.pid) < std::tie(b.start_ns, b.node, b.pid);
  });
  return done;
}

// Half-open intervals [start, end): one that ends exactly when the other starts does not overlap it.
inline bool Overlap(const ProbeInterval& a, const ProbeInterval& b) {
  return a.start_ns < b.end_ns && b.start_ns < a.end_ns;
}

// The fencing invariants over every pair of intervals; returns one message per violated pair (empty:
// all hold):
//   - a member (job, rank) never runs twice at once (two places, or twice in one place);
//   - the runs of one job with different restart counts never overlap: every member of a requeued job
//     (a gang's survivors included) has stopped before any member of the next run starts;
//   - two different jobs never hold the same GPU at once.
inline std::vector<std::string> FindFencingViolations(const std::vector<ProbeInterval>& intervals) {
  std::vector<std::string> violations;
  for (size_t i = 0; i < intervals.size(); ++i) {
    for (size_t j = i + 1; j < intervals.size(); ++j) {
      const ProbeInterval& a = intervals[i];
      const ProbeInterval& b = intervals[j];
      if (!Overlap(a, b)) continue;
      const double ms = (std::min(a.end_ns, b.end_ns) - std::max(a.start_ns, b.start_ns)) / 1e6;
      std::string what;
      if (a.job == b.job && a.rank == b.rank) {
        what = "one member ran twice at once";
      } else if (a.job == b.job && a.restarts != b.restarts) {
        what = "two runs of one job overlapped";
      } else if (a.job != b.job) {
        std::set<std::string> shared;
        for (const std::string& g : a.gpus) {
          if (std::find(b.gpus.begin(), b.gpus.end(), g) != b.gpus.end()) shared.insert(g);
        }
        if (shared.empty()) continue;
        what = fmt::format("two jobs held GPU {} at once", fmt::join(shared, ","));
      } else {
        continue;  // two ranks of one run: a gang running as it should
      }
      violations.push_back(fmt::format("{} for {:.1f} ms: {} and {}", what, ms, a.Describe(), b.Describe()));
    }
  }
  return violations;
}

}  // namespace gpugeek::fencing
