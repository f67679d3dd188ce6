// Fencing with real processes: one `gpugeek server` and two or three `gpugeek agent`s (2 emulated
// A100-SXM-80GB each) on loopback, running probe jobs (fencing_probe.h) that log start, alive and stop
// times on CLOCK_MONOTONIC to one file per test. Each case breaks an agent the way nodes fail, then
// proves from the probe file that no member ran in two places (or two runs of one job at once) and no
// GPU was held by two jobs at once:
//   - SIGKILL: the shim stops the members; the job runs again elsewhere once the node is down. The
//     time from the kill to RUNNING elsewhere is measured (GPUGEEK_FENCING_KILLS kills, default 3;
//     GPUGEEK_FENCING_CSV=PATH writes one row per kill; bench/fencing_recovery.sh runs 20).
//   - SIGSTOP for 2x the lease (a partition or a frozen agent): the member stops before the server
//     re-places it; after SIGCONT the node is ready again.
//   - SIGKILL and restart within 0.5 s: the new agent's registration restarts the job (restarts + 1,
//     an event says why).
//   - a 2-node gang loses a node: its survivor stops before the gang runs again, and a job waiting for
//     GPUs never overlaps the survivor's.
// Timeline (control_plane.h, the defaults): lease 2 s, fence grace 0.5 s, margin 0.5 s: a node is down
// 3 s after the server last heard from it.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/testing/process.h"
#include "fencing_probe.h"
#include "http/client.h"
#include "nlohmann/json.hpp"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using fencing::FindFencingViolations;
using fencing::kProbeAlivePeriodNs;
using fencing::ParseProbe;
using fencing::ProbeInterval;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using subprocess::Process;

// steady_clock is CLOCK_MONOTONIC on Linux: the probe's clock.
int64_t MonoNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------------------------------------
// The checker, on hand-made probe files.

std::string Line(const std::string& kind, const std::string& job, int rank, int restarts, const std::string& node,
                 const std::string& gpus, int64_t ns, int pid) {
  return fmt::format("{} {} {} {} {} {} {} {}\n", kind, job, rank, restarts, node, gpus, ns, pid);
}

TEST(ProbeChecker, ParsesIntervalsFromStartToStopOrLastAlive) {
  std::vector<std::string> errors;
  const auto intervals =
      ParseProbe(Line("start", "j-1", 0, 0, "n0", "0,1", 1000, 7) + Line("start", "j-2", 0, 0, "n1", "-", 1500, 8) +
                     Line("alive", "j-1", 0, 0, "n0", "0,1", 2000, 7) +
                     Line("stop", "j-1", 0, 0, "n0", "0,1", 2500, 7) + Line("alive", "j-2", 0, 0, "n1", "-", 3000, 8) +
                     "garbage line\n" + "alive j-2 0 0 n1 - 9999",  // no newline: still being written
                 &errors);
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(intervals[0].job, "j-1");
  EXPECT_EQ(intervals[0].start_ns, 1000);
  EXPECT_EQ(intervals[0].end_ns, 2500);
  EXPECT_TRUE(intervals[0].stopped);
  EXPECT_EQ(intervals[0].gpus, (std::vector<std::string>{"n0/0", "n0/1"}));
  EXPECT_EQ(intervals[1].job, "j-2");
  EXPECT_EQ(intervals[1].start_ns, 1500);
  EXPECT_EQ(intervals[1].end_ns, 3000 + kProbeAlivePeriodNs);  // killed: its last line + one period
  EXPECT_FALSE(intervals[1].stopped);
  EXPECT_TRUE(intervals[1].gpus.empty());
  EXPECT_EQ(errors, (std::vector<std::string>{"line 6: malformed: 'garbage line'"}));
}

TEST(ProbeChecker, CatchesAMemberRunningInTwoPlaces) {
  const auto v = FindFencingViolations(
      ParseProbe(Line("start", "j-1", 0, 0, "n0", "0", 1000, 7) + Line("start", "j-1", 0, 0, "n1", "0", 1900, 9) +
                 Line("stop", "j-1", 0, 0, "n0", "0", 2000, 7) + Line("stop", "j-1", 0, 0, "n1", "0", 3000, 9)));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(v[0].starts_with("one member ran twice at once for 0.0 ms")) << v[0];
}

TEST(ProbeChecker, CatchesAGangSurvivorOverlappingTheNextRun) {
  // Rank 1 of run 0 (the survivor) still runs when rank 0 of run 1 starts elsewhere.
  const auto v = FindFencingViolations(ParseProbe(
      Line("start", "g", 0, 0, "n0", "0", 0, 1) + Line("start", "g", 1, 0, "n1", "0", 0, 2) +
      Line("stop", "g", 0, 0, "n0", "0", 1'000'000'000, 1) + Line("start", "g", 0, 1, "n2", "0", 2'000'000'000, 3) +
      Line("stop", "g", 1, 0, "n1", "0", 2'500'000'000, 2) + Line("start", "g", 1, 1, "n1", "0", 2'600'000'000, 4) +
      Line("stop", "g", 0, 1, "n2", "0", 3'000'000'000, 3) + Line("stop", "g", 1, 1, "n1", "0", 3'000'000'000, 4)));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(
      v[0],
      "two runs of one job overlapped for 500.0 ms: g rank 1 restarts 0 on n1 gpus [n1/0] pid 2 [0.000 s, 2.500 s] "
      "and g rank 0 restarts 1 on n2 gpus [n2/0] pid 3 [2.000 s, 3.000 s]");
}

TEST(ProbeChecker, CatchesTwoJobsOnOneGpuAndAKilledProbesLastAlive) {
  // j-1 is SIGKILLed after its alive at 1000 ns: it may have run until 1000 + one period.
  const auto v = FindFencingViolations(
      ParseProbe(Line("start", "j-1", 0, 0, "n0", "0,1", 0, 1) + Line("alive", "j-1", 0, 0, "n0", "0,1", 1000, 1) +
                 Line("start", "j-2", 0, 0, "n0", "1", 1000 + kProbeAlivePeriodNs - 1, 2) +
                 Line("stop", "j-2", 0, 0, "n0", "1", 5 * kProbeAlivePeriodNs, 2)));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(v[0].starts_with("two jobs held GPU n0/1 at once for 0.0 ms")) << v[0];
}

TEST(ProbeChecker, AllowsTouchingIntervalsGangRanksAndOtherGpus) {
  const auto v = FindFencingViolations(ParseProbe(
      // A member that moves: the new one starts exactly when the old one stopped.
      Line("start", "j-1", 0, 0, "n0", "0", 0, 1) + Line("stop", "j-1", 0, 0, "n0", "0", 100, 1) +
      Line("start", "j-1", 0, 1, "n1", "0", 100, 2) + Line("stop", "j-1", 0, 1, "n1", "0", 200, 2) +
      // The next job on n0's GPU 0 starts as the first one stops.
      Line("start", "j-2", 0, 0, "n0", "0", 100, 3) + Line("stop", "j-2", 0, 0, "n0", "0", 300, 3) +
      // Two ranks of one run at once, and another job on the same node's other GPU.
      Line("start", "g", 0, 0, "n2", "0", 0, 4) + Line("start", "g", 1, 0, "n3", "0", 0, 5) +
      Line("start", "j-3", 0, 0, "n2", "1", 0, 6) + Line("stop", "g", 0, 0, "n2", "0", 300, 4) +
      Line("stop", "g", 1, 0, "n3", "0", 300, 5) + Line("stop", "j-3", 0, 0, "n2", "1", 300, 6)));
  EXPECT_TRUE(v.empty()) << fmt::format("{}", fmt::join(v, "\n"));
}

TEST(ProbeChecker, AReusedPidStartsANewInterval) {
  const auto intervals =
      ParseProbe(Line("start", "j-1", 0, 0, "n0", "0", 0, 7) + Line("alive", "j-1", 0, 0, "n0", "0", 50, 7) +
                 Line("start", "j-2", 0, 0, "n0", "0", 900'000'000, 7));
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(intervals[0].end_ns, 50 + kProbeAlivePeriodNs);
  EXPECT_EQ(intervals[1].job, "j-2");
  EXPECT_TRUE(FindFencingViolations(intervals).empty());
}

// ---------------------------------------------------------------------------------------------------------
// The multi-process cases.

struct Agent {
  std::string name;
  std::unique_ptr<Process> process;
  int starts = 0;
  bool frozen = false;  // SIGSTOPped: TearDown sends SIGCONT before stopping it
};

class FencingWithRealAgents : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_fencing_{}_{}", ::getpid(), test);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    probe_script_ = dir_ / "probe.py";
    std::ofstream(probe_script_) << fencing::kProbeScript;
    probe_file_ = dir_ / "probe.log";
    // Workloads run as their tenant's unprivileged uid (agent/executor.h RunAsOptions), not as this
    // root test: the shared probe file is made writable for them, and the folder traversable.
    std::ofstream(probe_file_).flush();
    fs::permissions(probe_file_,
                    fs::perms::all & ~fs::perms::owner_exec & ~fs::perms::group_exec & ~fs::perms::others_exec);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }

  void TearDown() override {
    for (Agent& a : agents_) {
      if (a.frozen && a.process->pid() > 0) ::kill(a.process->pid(), SIGCONT);
    }
    agents_.clear();
    server_.reset();
    if (HasFailure()) {
      fmt::print("fencing: kept {} (probe.log, server.log, one log per agent start)\n", dir_.string());
    } else {
      fs::remove_all(dir_);
    }
  }

  // A server (API and agent listeners on free ports) and `n` agents; returns once all are ready. The
  // cases kill the same few nodes again and again on purpose: no node is blocked for it.
  void StartCluster(int n) {
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
                                 "--data-dir", (dir_ / "server").string(), "--block-after-losses", "0"},
        dir_ / "server.log");
    const std::regex listening(
        R"(listening on (https://127\.0\.0\.1:[0-9]+), agents on (https://127\.0\.0\.1:[0-9]+))");
    for (auto end = steady_clock::now() + seconds(20); steady_clock::now() < end && url_.empty();) {
      std::smatch m;
      const std::string out = server_->output();
      if (std::regex_search(out, m, listening)) {
        url_ = m[1];
        agent_url_ = m[2];
      } else {
        std::this_thread::sleep_for(milliseconds(50));
      }
    }
    ASSERT_FALSE(url_.empty()) << "server did not start: " << server_->output();
    admin_token_ = subprocess::UseAdminToken(dir_ / "server");
    ca_file_ = subprocess::UseServerCa(dir_ / "server");
    client_ = *http::Client::Create(
        {.base_url = url_, .read_timeout = seconds(5), .ca_file = ca_file_, .bearer_token = admin_token_});
    {
      auto join = client_->Post("/v1/join-tokens", {{"uses", 100}});
      ASSERT_TRUE(join.ok()) << join.status();
      subprocess::UseJoinToken((*join)["token"]);
    }
    // Node names carry the pid: test processes running side by side share this host's cgroups.
    for (int i = 0; i < n; ++i) {
      agents_.push_back({.name = fmt::format("fence{}-{}", i, ::getpid())});
      StartAgent(agents_.back());
    }
    for (const Agent& a : agents_) ASSERT_TRUE(WaitNode(a.name, "ready", seconds(30))) << a.name;
  }

  // Starts (or restarts) an agent with its name and data dir; the probe reads the node from the data dir.
  void StartAgent(Agent& a) {
    a.process = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url_, "--ca-file", ca_file_, "--name",
                                 a.name, "--emulate", "2xA100-SXM-80GB", "--data-dir", (dir_ / a.name).string()},
        dir_ / fmt::format("{}.{}.log", a.name, a.starts++));
  }

  // SIGKILLs the agent and reaps it (its workloads are left to their shims).
  void KillAgent(Agent& a) {
    ASSERT_GT(a.process->pid(), 0);
    ASSERT_EQ(::kill(a.process->pid(), SIGKILL), 0);
    a.process->Stop();
  }

  Agent& AgentNamed(const std::string& name) {
    for (Agent& a : agents_) {
      if (a.name == name) return a;
    }
    ADD_FAILURE() << "no agent " << name;
    return agents_.front();
  }

  // A probe job: `gpus` A100-SXM-80GB per node on `nodes` nodes.
  // `extra`: more spec lines (each ending in a newline).
  std::string Submit(const std::string& name, int nodes = 1, int priority = 0, int gpus = 2,
                     const std::string& extra = "") {
    const std::string spec = fmt::format(
        "name: {}\nresources: {{accelerators: A100-SXM-80GB:{}}}\nnum_nodes: {}\npriority: {}\n"
        "checkpoint: {{grace: 2s}}\nenv: {{PROBE_FILE: \"{}\"}}\n{}run: exec /usr/bin/python3 {}\n",
        name, gpus, nodes, priority, probe_file_.string(), extra, probe_script_.string());
    auto job = client_->Post("/v1/jobs", {{"spec_yaml", spec}});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<std::string>() : "";
  }

  nlohmann::json Job(const std::string& id) {
    auto job = client_->Get("/v1/jobs/" + id);
    return job.ok() ? *job : nlohmann::json();
  }

  // Polls the job every 50 ms until `done` holds; nullopt after `timeout` (the last answer is in `last`).
  std::optional<nlohmann::json> PollJob(const std::string& id, const std::function<bool(const nlohmann::json&)>& done,
                                        steady_clock::duration timeout, nlohmann::json* last = nullptr) {
    for (auto end = steady_clock::now() + timeout;;) {
      nlohmann::json job = Job(id);
      if (job.is_object() && done(job)) return job;
      if (last != nullptr) *last = job;
      if (steady_clock::now() >= end) return std::nullopt;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  // Waits for `state`; a failure names the job's last answer.
  nlohmann::json WaitState(const std::string& id, const std::string& state, steady_clock::duration timeout) {
    nlohmann::json last;
    auto job = PollJob(
        id, [&](const nlohmann::json& j) { return j["state"] == state; }, timeout, &last);
    EXPECT_TRUE(job.has_value()) << id << " did not reach " << state << ": " << last.dump();
    return job.value_or(last);
  }

  bool WaitNode(const std::string& name, const std::string& state, steady_clock::duration timeout) {
    for (auto end = steady_clock::now() + timeout; steady_clock::now() < end;) {
      auto node = client_->Get("/v1/nodes/" + name);
      if (node.ok() && (*node)["state"] == state) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  // Node of each rank of the job's allocation.
  static std::vector<std::string> Nodes(const nlohmann::json& job) {
    std::vector<std::string> nodes;
    if (!job.contains("allocation") || !job["allocation"].is_object()) return nodes;
    for (const auto& m : job["allocation"]["members"]) nodes.push_back(m["node"]);
    return nodes;
  }

  std::vector<ProbeInterval> Intervals() {
    std::vector<std::string> errors;
    auto intervals = ParseProbe(subprocess::ReadFile(probe_file_), &errors);
    EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n"));
    return intervals;
  }
  // The probe runs of (job, rank, restarts), in start order.
  std::vector<ProbeInterval> Runs(const std::string& job, int rank, int restarts) {
    std::vector<ProbeInterval> runs;
    for (const ProbeInterval& p : Intervals()) {
      if (p.job == job && p.rank == rank && p.restarts == restarts) runs.push_back(p);
    }
    return runs;
  }
  // Waits (up to 3 s) until the run of (job, rank, restarts) has a `start` line: a member reported
  // running has written it, or is about to.
  std::optional<ProbeInterval> WaitStarted(const std::string& job, int rank, int restarts) {
    for (auto end = steady_clock::now() + seconds(3); steady_clock::now() < end;) {
      if (auto runs = Runs(job, rank, restarts); !runs.empty()) return runs.back();
      std::this_thread::sleep_for(milliseconds(50));
    }
    return std::nullopt;
  }

  // The fencing invariants over the whole probe file, with every interval listed on failure.
  void ExpectFencingHeld() {
    const std::vector<ProbeInterval> intervals = Intervals();
    const std::vector<std::string> violations = FindFencingViolations(intervals);
    std::string timeline;
    for (const ProbeInterval& p : intervals) timeline += "  " + p.Describe() + "\n";
    EXPECT_TRUE(violations.empty()) << fmt::format("{}\nprobe intervals:\n{}", fmt::join(violations, "\n"), timeline);
  }

  fs::path dir_;
  fs::path probe_script_;
  fs::path probe_file_;
  std::string url_;
  std::string agent_url_;
  std::string admin_token_;
  std::string ca_file_;
  std::unique_ptr<Process> server_;
  std::unique_ptr<http::Client> client_;
  std::vector<Agent> agents_;
};

// Nearest-rank percentile of `values` (p in (0, 100]).
double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

int KillsFromEnv() {
  const char* v = std::getenv("GPUGEEK_FENCING_KILLS");
  const int kills = v == nullptr ? 3 : std::atoi(v);
  return std::clamp(kills, 1, 1000);
}

// (a) SIGKILL the agent running a job, again and again: each time the shim stops the member at once,
// the job runs elsewhere once the node is down, and the killed agent comes back to be the spare.
TEST_F(FencingWithRealAgents, KilledAgentsJobRunsElsewhereAndRecoveryIsMeasured) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3));
  const std::string job = Submit("moved");
  const std::string filler = Submit("filler");
  WaitState(job, "RUNNING", seconds(20));
  WaitState(filler, "RUNNING", seconds(20));
  const int kills = KillsFromEnv();
  struct Row {
    std::string victim, next;
    double to_running_s = 0, to_stopped_s = 0, to_started_s = 0;
  };
  std::vector<Row> rows;
  for (int k = 0; k < kills; ++k) {
    const nlohmann::json before = Job(job);
    ASSERT_EQ(before["state"], "RUNNING") << before.dump();
    ASSERT_EQ(before["restarts"], k);
    const std::string victim = Nodes(before).at(0);
    ASSERT_TRUE(WaitStarted(job, 0, k).has_value()) << "the probe of run " << k << " never started";
    const int64_t killed_ns = MonoNs();
    ASSERT_NO_FATAL_FAILURE(KillAgent(AgentNamed(victim)));
    nlohmann::json last;
    auto moved = PollJob(
        job,
        [&](const nlohmann::json& j) {
          return j["state"] == "RUNNING" && j["restarts"] == k + 1 && Nodes(j).at(0) != victim;
        },
        seconds(30), &last);
    const int64_t running_ns = MonoNs();
    ASSERT_TRUE(moved.has_value()) << "kill " << k << " of " << victim << ": not RUNNING elsewhere: " << last.dump();
    // The member the kill orphaned: stopped by its shim (SIGTERM: a `stop` line), long before the job
    // ran elsewhere.
    const std::vector<ProbeInterval> old = Runs(job, 0, k);
    ASSERT_EQ(old.size(), 1u);
    EXPECT_EQ(old[0].node, victim);
    EXPECT_TRUE(old[0].stopped) << old[0].Describe();
    const double to_stopped_s = (old[0].end_ns - killed_ns) / 1e9;
    EXPECT_LT(to_stopped_s, 3.0) << "the shim did not stop the member within its grace: " << old[0].Describe();
    // The new member's own start (the server says RUNNING once the agent reported it, a heartbeat later).
    const auto started = WaitStarted(job, 0, k + 1);
    ASSERT_TRUE(started.has_value()) << "the probe of run " << k + 1 << " never started";
    EXPECT_EQ(started->node, Nodes(*moved).at(0));
    rows.push_back({victim, Nodes(*moved).at(0), (running_ns - killed_ns) / 1e9, to_stopped_s,
                    (started->start_ns - killed_ns) / 1e9});
    // The killed agent comes back (a new instance): the node is ready again, the spare for the next kill.
    StartAgent(AgentNamed(victim));
    ASSERT_TRUE(WaitNode(victim, "ready", seconds(20))) << victim << " did not come back";
  }
  EXPECT_EQ(Job(filler)["restarts"], 0);
  ExpectFencingHeld();

  std::vector<double> to_running, to_stopped, to_started;
  for (const Row& r : rows) {
    to_running.push_back(r.to_running_s);
    to_stopped.push_back(r.to_stopped_s);
    to_started.push_back(r.to_started_s);
  }
  fmt::print(
      "fencing recovery over {} kills: kill -> RUNNING elsewhere p50 {:.2f} s, p99 {:.2f} s (min {:.2f}, max {:.2f}); "
      "kill -> member stopped p50 {:.3f} s, p99 {:.3f} s; kill -> new member started p50 {:.2f} s, p99 {:.2f} s\n",
      rows.size(), Percentile(to_running, 50), Percentile(to_running, 99),
      *std::min_element(to_running.begin(), to_running.end()), *std::max_element(to_running.begin(), to_running.end()),
      Percentile(to_stopped, 50), Percentile(to_stopped, 99), Percentile(to_started, 50), Percentile(to_started, 99));
  RecordProperty("kill_to_running_p50_ms", static_cast<int>(Percentile(to_running, 50) * 1000));
  RecordProperty("kill_to_running_p99_ms", static_cast<int>(Percentile(to_running, 99) * 1000));
  if (const char* csv = std::getenv("GPUGEEK_FENCING_CSV"); csv != nullptr && *csv != '\0') {
    std::ofstream out(csv);
    out << "kill,victim,next_node,kill_to_running_s,kill_to_member_stopped_s,kill_to_new_member_started_s\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      out << fmt::format("{},{},{},{:.3f},{:.3f},{:.3f}\n", i + 1, rows[i].victim, rows[i].next, rows[i].to_running_s,
                         rows[i].to_stopped_s, rows[i].to_started_s);
    }
    EXPECT_TRUE(out.good()) << "cannot write " << csv;
  }
}

// (b) SIGSTOP the agent running a job for 2x the lease, and past the moment the job runs elsewhere:
// the frozen agent cannot stop anything, so its member must have been stopped by its shim (whose lease
// the agent no longer renews) before the server re-placed it. After SIGCONT the node is ready again and
// takes new work.
TEST_F(FencingWithRealAgents, PartitionedAgentsMemberStopsBeforeTheJobRunsElsewhere) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3));
  const std::string job = Submit("partitioned");
  const std::string filler = Submit("filler");
  const nlohmann::json before = WaitState(job, "RUNNING", seconds(20));
  WaitState(filler, "RUNNING", seconds(20));
  const std::string victim = Nodes(before).at(0);
  ASSERT_TRUE(WaitStarted(job, 0, 0).has_value());
  Agent& agent = AgentNamed(victim);
  const auto stopped_at = steady_clock::now();
  const int64_t stopped_ns = MonoNs();
  ASSERT_EQ(::kill(agent.process->pid(), SIGSTOP), 0);
  agent.frozen = true;
  std::this_thread::sleep_until(stopped_at + seconds(6));
  // Past 2x the lease, stay frozen until the job runs elsewhere: any overlap is then certain to show.
  nlohmann::json last;
  auto moved = PollJob(
      job,
      [&](const nlohmann::json& j) {
        return j["state"] == "RUNNING" && j["restarts"] == 1 && Nodes(j).at(0) != victim;
      },
      seconds(15), &last);
  const auto moved_ns = MonoNs();
  auto new_run = WaitStarted(job, 0, 1);
  ASSERT_EQ(::kill(agent.process->pid(), SIGCONT), 0);
  agent.frozen = false;
  const int64_t continued_ns = MonoNs();
  ASSERT_TRUE(moved.has_value()) << "not RUNNING elsewhere while " << victim << " was frozen: " << last.dump();
  ASSERT_TRUE(new_run.has_value());
  EXPECT_TRUE(WaitNode(victim, "ready", seconds(15))) << victim << " did not come back after SIGCONT";
  // The node takes work again: the one free node left is the thawed one.
  const std::string waiter = Submit("after-thaw");
  const nlohmann::json w = WaitState(waiter, "RUNNING", seconds(20));
  EXPECT_EQ(Nodes(w), std::vector<std::string>{victim});
  ASSERT_TRUE(WaitStarted(waiter, 0, 0).has_value());

  const std::vector<ProbeInterval> old = Runs(job, 0, 0);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_LE(old[0].end_ns, new_run->start_ns) << fmt::format(
      "the frozen node's member was still running when the job started elsewhere (times from SIGSTOP: old member "
      "ended +{:.3f} s, new member started +{:.3f} s, server said RUNNING +{:.3f} s, SIGCONT +{:.3f} s)",
      (old[0].end_ns - stopped_ns) / 1e9, (new_run->start_ns - stopped_ns) / 1e9, (moved_ns - stopped_ns) / 1e9,
      (continued_ns - stopped_ns) / 1e9);
  fmt::print(
      "partition: member stopped +{:.2f} s after SIGSTOP ({}), job RUNNING elsewhere +{:.2f} s, SIGCONT +{:.2f} s\n",
      (old[0].end_ns - stopped_ns) / 1e9, old[0].stopped ? "SIGTERM" : "killed", (moved_ns - stopped_ns) / 1e9,
      (continued_ns - stopped_ns) / 1e9);
  ExpectFencingHeld();
}

// (c) SIGKILL an agent and start it again (same name and data dir) within 0.5 s: the new agent process
// registers with a new instance id, holds nothing, and the server restarts the job it ran (restarts + 1,
// with an event saying why). All GPUs are taken and a lower-priority job waits, so the restarted job can
// only run on the restarted node.
TEST_F(FencingWithRealAgents, AgentRestartedWithinHalfASecondRestartsItsJob) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3));
  const std::vector<std::string> jobs = {Submit("restarted"), Submit("steady-a"), Submit("steady-b")};
  for (const std::string& id : jobs) WaitState(id, "RUNNING", seconds(20));
  const std::string waiter = Submit("waiter", 1, -1);
  const std::string victim = Nodes(Job(jobs[0])).at(0);
  ASSERT_TRUE(WaitStarted(jobs[0], 0, 0).has_value());
  Agent& agent = AgentNamed(victim);
  const auto killed_at = steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(KillAgent(agent));
  StartAgent(agent);
  const auto restarted_in = steady_clock::now() - killed_at;
  EXPECT_LT(restarted_in, milliseconds(500));

  nlohmann::json last;
  auto again = PollJob(
      jobs[0], [](const nlohmann::json& j) { return j["state"] == "RUNNING" && j["restarts"] == 1; }, seconds(20),
      &last);
  ASSERT_TRUE(again.has_value()) << "not restarted: " << last.dump();
  EXPECT_EQ(Nodes(*again), std::vector<std::string>{victim});
  auto events = client_->Get("/v1/events?job=" + jobs[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  const std::string expected = fmt::format("the agent on {} restarted and ended the member there; restarting", victim);
  int restarts_reported = 0;
  for (const auto& e : (*events)["events"]) restarts_reported += e["reason"] == expected ? 1 : 0;
  EXPECT_EQ(restarts_reported, 1) << events->dump();
  EXPECT_EQ(Job(jobs[1])["restarts"], 0);
  EXPECT_EQ(Job(jobs[2])["restarts"], 0);
  EXPECT_EQ(Job(waiter)["state"], "PENDING");
  ASSERT_TRUE(WaitStarted(jobs[0], 0, 1).has_value());
  const std::vector<ProbeInterval> old = Runs(jobs[0], 0, 0);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_TRUE(old[0].stopped) << "the shim did not SIGTERM the orphaned member: " << old[0].Describe();
  ExpectFencingHeld();
}

// (d) A 2-node gang loses a node (SIGKILL of its agent). The surviving member must stop before any
// member of the gang runs again, and a lower-priority job waiting for GPUs may take the survivor's
// only after it stopped.
TEST_F(FencingWithRealAgents, GangLosingANodeStopsItsSurvivorBeforeRunningAgain) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(2));
  const std::string gang = Submit("gang", 2, 10);
  const nlohmann::json before = WaitState(gang, "RUNNING", seconds(20));
  const std::vector<std::string> nodes = Nodes(before);
  ASSERT_EQ(nodes.size(), 2u);
  ASSERT_NE(nodes[0], nodes[1]);
  const std::string waiter = Submit("waiter", 1, 0);
  ASSERT_TRUE(WaitStarted(gang, 0, 0).has_value());
  ASSERT_TRUE(WaitStarted(gang, 1, 0).has_value());
  const int64_t killed_ns = MonoNs();
  ASSERT_NO_FATAL_FAILURE(KillAgent(AgentNamed(nodes[0])));
  ASSERT_TRUE(WaitNode(nodes[0], "down", seconds(20))) << nodes[0] << " never went down";
  const int64_t down_ns = MonoNs();
  // Rank 1 survives on nodes[1]; the waiter (one node) may be placed there once it has stopped.
  auto waiter_ran = PollJob(
      waiter, [](const nlohmann::json& j) { return j["state"] == "RUNNING"; }, seconds(6));
  std::optional<ProbeInterval> waiter_run;
  if (waiter_ran) {
    EXPECT_EQ(Nodes(*waiter_ran), std::vector<std::string>{nodes[1]});
    waiter_run = WaitStarted(waiter, 0, 0);
  }
  StartAgent(AgentNamed(nodes[0]));
  if (waiter_ran) {  // it holds the GPUs the gang needs: make room
    ASSERT_TRUE(client_->Post("/v1/jobs/" + waiter + "/cancel", nlohmann::json::object()).ok());
    WaitState(waiter, "CANCELLED", seconds(20));
  }
  nlohmann::json last;
  auto again = PollJob(
      gang, [](const nlohmann::json& j) { return j["state"] == "RUNNING" && j["restarts"] == 1; }, seconds(30), &last);
  ASSERT_TRUE(again.has_value()) << "the gang did not run again: " << last.dump();
  auto rank0 = WaitStarted(gang, 0, 1);
  auto rank1 = WaitStarted(gang, 1, 1);
  ASSERT_TRUE(rank0.has_value() && rank1.has_value());

  const std::vector<ProbeInterval> survivor = Runs(gang, 1, 0);
  ASSERT_EQ(survivor.size(), 1u);
  EXPECT_EQ(survivor[0].node, nodes[1]);
  EXPECT_TRUE(survivor[0].stopped) << "the survivor was not stopped with SIGTERM: " << survivor[0].Describe();
  const int64_t next_start = std::min(rank0->start_ns, rank1->start_ns);
  EXPECT_LE(survivor[0].end_ns, next_start);
  if (waiter_run) {
    EXPECT_LE(survivor[0].end_ns, waiter_run->start_ns);
  }
  fmt::print("gang: node down +{:.2f} s after the kill, survivor stopped +{:.2f} s, {}gang running again +{:.2f} s\n",
             (down_ns - killed_ns) / 1e9, (survivor[0].end_ns - killed_ns) / 1e9,
             waiter_run
                 ? fmt::format("waiter on the survivor's GPUs +{:.2f} s, ", (waiter_run->start_ns - killed_ns) / 1e9)
                 : std::string("waiter never placed meanwhile, "),
             (next_start - killed_ns) / 1e9);
  ExpectFencingHeld();
}

// (f) An elastic gang (`elastic: {min_nodes: 1}`) of two nodes on three: SIGKILL rank 1's agent. Rank 1 is
// replaced on the spare node; rank 0 keeps its node and GPUs, is stopped (SIGTERM: its checkpoint moment)
// and runs again there at the next restart count; nothing ran twice at once. Prints the recovery time.
TEST_F(FencingWithRealAgents, AnElasticGangReplacesOnlyTheKilledMember) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3));
  const std::string job = Submit("elastic", 2, 0, 2, "elastic: {min_nodes: 1}\n");
  const nlohmann::json before = WaitState(job, "RUNNING", seconds(20));
  const std::vector<std::string> nodes = Nodes(before);
  ASSERT_EQ(nodes.size(), 2u) << before.dump();
  const std::string survivor = nodes[0], victim = nodes[1];
  const auto survivor_run = WaitStarted(job, 0, 0);
  ASSERT_TRUE(survivor_run.has_value());
  ASSERT_TRUE(WaitStarted(job, 1, 0).has_value());
  const int64_t killed_ns = MonoNs();
  ASSERT_NO_FATAL_FAILURE(KillAgent(AgentNamed(victim)));
  nlohmann::json last;
  auto after = PollJob(
      job, [](const nlohmann::json& j) { return j["state"] == "RUNNING" && j["restarts"] == 1; }, seconds(30), &last);
  const int64_t running_ns = MonoNs();
  ASSERT_TRUE(after.has_value()) << "not RUNNING again: " << last.dump();
  // The re-forming is an event of its own (the RUNNING that followed has its own reason).
  auto events = client_->Get("/v1/events?job=" + job + "&limit=100");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_NE(events->dump().find("re-formed (elastic): rank 1 on"), std::string::npos) << events->dump();
  const std::vector<std::string> now = Nodes(*after);
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[0], survivor) << "the survivor keeps its node";
  EXPECT_NE(now[1], victim);
  EXPECT_NE(now[1], survivor);
  EXPECT_EQ((*after)["allocation"]["members"][0]["gpu_uuids"], before["allocation"]["members"][0]["gpu_uuids"])
      << "and its GPUs";
  // The survivor's first run was stopped by its agent (SIGTERM), its second runs on the same node and GPUs.
  const std::vector<ProbeInterval> first = Runs(job, 0, 0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].stopped) << first[0].Describe();
  const auto again = WaitStarted(job, 0, 1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->node, survivor);
  EXPECT_EQ(again->gpus, survivor_run->gpus);
  const auto replaced = WaitStarted(job, 1, 1);
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->node, now[1]);
  ExpectFencingHeld();
  fmt::print("elastic gang: kill -> RUNNING again with the survivor kept {:.2f} s (replacement started {:.2f} s)\n",
             (running_ns - killed_ns) / 1e9, (replaced->start_ns - killed_ns) / 1e9);
}

}  // namespace
}  // namespace gpugeek
