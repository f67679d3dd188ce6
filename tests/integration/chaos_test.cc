// Chaos with real processes: one `gpugeek server` and 4 `gpugeek agent`s (8 emulated A100 each) on
// loopback, 12 jobs (4 of them 2-node gangs): 10 of the checkpointing workload (chaos_workload.h) and 2
// of the real GPT example (examples/gpt/train.py under launcher: torch, one of them a 2-node gang), and
// GPUGEEK_CHAOS_EVENTS (default 20) faults at seeded random moments (GPUGEEK_CHAOS_SEED, default the
// time): an agent SIGKILLed and restarted 0-3 s later, or SIGSTOPped for 1-5 s; at most two nodes out at
// once. Half-way the server is SIGKILLed and restarted on its ports and data. Six jobs are submitted
// before the faults begin and six during them (retried while the server is down).
//
// The server runs the default failure-detection timeline: heartbeats every 1 s, suspect after 2 s (two
// missed beats), its agent's members SIGKILLed 0.5 s later, down at 3 s.
//
// Checked when every fault is healed:
//   - every accepted submission is there, and every job SUCCEEDED with its last checkpoint at its last
//     step (the server's `checkpoint.step`, kept across the server's restart);
//   - no member ran twice at once and no GPU was held by two members at once (the fencing probe's lines,
//     fencing_probe.h);
//   - each run resumed from the job's last durable checkpoint, never more than one checkpoint interval
//     behind the furthest step any earlier run reached (the GPT jobs: by the steps rank 0 logged).
// Printed: recovery (an agent's SIGKILL -> each affected job RUNNING again) p50 / p99, of the isolated
// recoveries (no other fault on the job's nodes meanwhile) and of all, beside the anchors' defaults; the
// timeline of each recovery over 5 s; the server's own phases (detected, stopped, placed, running).
// bench/chaos.sh runs it with more faults; GPUGEEK_CHAOS_KEEP=1 keeps its folder (logs) when it passes.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "chaos_workload.h"
#include "common/testing/process.h"
#include "fencing_probe.h"
#include "http/client.h"
#include "nlohmann/json.hpp"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using subprocess::Process;

constexpr int kAgents = 4;
constexpr int kJobs = 12;
constexpr int kSteps = 150;  // x 0.3 s: 45 s of work per job
constexpr int kCheckpointEvery = 5;
// Two of the jobs are the real GPT example (examples/gpt/train.py, launcher: torch): job 4 on one node,
// job 9 a 2-node gang (gloo over loopback); about 0.2 s a step on one core.
constexpr int kGptSteps = 100;
constexpr int kGptCheckpointEvery = 10;
bool IsGpt(int i) { return i == 4 || i == 9; }

int64_t MonoNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

struct Agent {
  std::string name;
  std::unique_ptr<Process> process;
  int starts = 0;
  bool down = false;    // SIGKILLed, not yet restarted
  bool frozen = false;  // SIGSTOPped
};

// What the monitor saw of one job at one moment.
struct Seen {
  int64_t ns = 0;
  std::string state;
  int restarts = 0;
  std::vector<std::string> nodes;
};

class Chaos : public ::testing::Test {
 protected:
  void SetUp() override {
    // The server is SIGKILLed under the monitor's keep-alive TLS connection: a write on it must fail with
    // EPIPE, not end this process (OpenSSL writes with write(2), which raises SIGPIPE).
    ::signal(SIGPIPE, SIG_IGN);
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_chaos_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "ckpt");
    std::ofstream(dir_ / "workload.py") << chaos::kWorkloadScript;
    fs::copy_file(fs::path(GPUGEEK_SOURCE_DIR) / "examples/gpt/gpugeek_checkpoint.py", dir_ / "gpugeek_checkpoint.py");
    // The GPT example, where the workloads' unprivileged uid can read it.
    fs::create_directories(dir_ / "gpt");
    for (const auto& f : fs::directory_iterator(fs::path(GPUGEEK_SOURCE_DIR) / "examples/gpt")) {
      if (f.is_regular_file() && (f.path().extension() == ".py" || f.path().extension() == ".json")) {
        fs::copy_file(f.path(), dir_ / "gpt" / f.path().filename());
      }
    }
    // Workloads run as their tenant's unprivileged uid: the record files are world-writable, the
    // checkpoint folder too, the scratch folder traversable.
    for (const char* f : {"probe.log", "progress.log"}) {
      std::ofstream(dir_ / f).flush();
      fs::permissions(dir_ / f, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                    fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
    }
    fs::permissions(dir_ / "ckpt", fs::perms::all);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }

  void TearDown() override {
    stop_monitor_ = true;
    if (monitor_.joinable()) monitor_.join();
    for (Agent& a : agents_) {
      if (a.frozen && a.process && a.process->pid() > 0) ::kill(a.process->pid(), SIGCONT);
    }
    agents_.clear();
    server_.reset();
    if (HasFailure() || EnvInt("GPUGEEK_CHAOS_KEEP", 0) != 0) {
      fmt::print("chaos: kept {} (probe.log, progress.log, server.*.log, one log per agent start)\n", dir_.string());
    } else {
      fs::remove_all(dir_);
    }
  }

  // Starts (or restarts, on the same ports and data) the server. The URLs, token and CA are set by the first
  // start only (the monitor thread reads them; a restart keeps them all).
  void StartServer() {
    const std::string listen = port_ == 0 ? "127.0.0.1:0" : fmt::format("127.0.0.1:{}", port_);
    const std::string agent_listen = agent_port_ == 0 ? "127.0.0.1:0" : fmt::format("127.0.0.1:{}", agent_port_);
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", listen, "--agent-listen", agent_listen,
                                 "--data-dir", (dir_ / "server").string()},
        dir_ / fmt::format("server.{}.log", server_starts_++));
    const std::regex listening(
        R"(listening on (https://127\.0\.0\.1:([0-9]+)), agents on (https://127\.0\.0\.1:([0-9]+)))");
    std::smatch m;
    for (auto end = steady_clock::now() + seconds(30); steady_clock::now() < end;) {
      const std::string out = server_->output();
      if (std::regex_search(out, m, listening)) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_FALSE(m.empty()) << "server did not start: " << server_->output();
    if (port_ != 0) {
      ASSERT_EQ(url_, m[1].str()) << "the restarted server is not on its port";
      return;
    }
    url_ = m[1];
    port_ = std::stoi(m[2]);
    agent_url_ = m[3];
    agent_port_ = std::stoi(m[4]);
    admin_token_ = subprocess::UseAdminToken(dir_ / "server");
    ca_file_ = subprocess::UseServerCa(dir_ / "server");
  }

  std::unique_ptr<http::Client> NewClient() {
    return *http::Client::Create(
        {.base_url = url_, .read_timeout = seconds(5), .ca_file = ca_file_, .bearer_token = admin_token_});
  }

  void StartAgent(Agent& a) {
    a.process = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url_, "--ca-file", ca_file_, "--name",
                                 a.name, "--emulate", "8xA100-SXM-80GB", "--data-dir", (dir_ / a.name).string()},
        dir_ / fmt::format("{}.{}.log", a.name, a.starts++));
    a.down = false;
  }

  bool WaitNodes(const std::string& state, steady_clock::duration timeout) {
    auto client = NewClient();
    for (auto end = steady_clock::now() + timeout; steady_clock::now() < end;) {
      auto nodes = client->Get("/v1/nodes");
      if (nodes.ok()) {
        int n = 0;
        for (const auto& node : (*nodes)["nodes"]) n += node["state"] == state;
        if (n == kAgents) return true;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  }

  std::string Spec(int i) const {
    if (IsGpt(i)) {
      return fmt::format(
          "name: chaos-gpt-{}\nresources: {{accelerators: A100-SXM-80GB:1}}\nnum_nodes: {}\nlauncher: torch\n"
          "checkpoint: {{dir: \"{}\", grace: 5s}}\nenv: {{OMP_NUM_THREADS: \"1\"}}\n"
          "run: cd {} && exec /usr/bin/python3 train.py --steps {} --ckpt-every {} --batch-size 4 --seq-len 32 "
          "--log-every 10 --eval-windows 4\n",
          i, i % 3 == 0 ? 2 : 1, (dir_ / "ckpt" / fmt::format("chaos-{}", i)).string(), (dir_ / "gpt").string(),
          kGptSteps, kGptCheckpointEvery);
    }
    return fmt::format(
        "name: chaos-{}\nresources: {{accelerators: A100-SXM-80GB:1}}\nnum_nodes: {}\n"
        "checkpoint: {{dir: \"{}\", grace: 2s}}\n"
        "env: {{PROBE_FILE: \"{}\", PROGRESS_FILE: \"{}\", STEPS: \"{}\", STEP_SECONDS: \"0.3\", CKPT_EVERY: \"{}\"}}\n"
        "run: exec /usr/bin/python3 {}\n",
        i, i % 3 == 0 ? 2 : 1, (dir_ / "ckpt" / fmt::format("chaos-{}", i)).string(), (dir_ / "probe.log").string(),
        (dir_ / "progress.log").string(), kSteps, kCheckpointEvery, (dir_ / "workload.py").string());
  }

  // Submits job i, retrying while the server is away (at most 60 s); its id once accepted.
  std::string Submit(int i) {
    for (auto end = steady_clock::now() + seconds(60); steady_clock::now() < end;) {
      auto job = NewClient()->Post("/v1/jobs", {{"spec_yaml", Spec(i)}});
      if (job.ok() && job->contains("id")) return (*job)["id"];
      std::this_thread::sleep_for(milliseconds(200));
    }
    ADD_FAILURE() << "job " << i << " was never accepted";
    return "";
  }

  // Polls the job list every 100 ms into seen_ (each job's changes only).
  void Monitor() {
    std::unique_ptr<http::Client> client;
    while (!stop_monitor_) {
      if (!client) client = NewClient();
      auto list = client->Get("/v1/jobs?limit=100");
      if (!list.ok()) {
        client.reset();  // the server may be restarting
      } else {
        const int64_t now = MonoNs();
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& j : (*list)["jobs"]) {
          Seen s{now, j.value("state", ""), j.value("restarts", 0), {}};
          if (j.contains("allocation") && j["allocation"].is_object()) {
            for (const auto& m : j["allocation"]["members"]) s.nodes.push_back(m["node"]);
          }
          std::vector<Seen>& h = seen_[j["id"]];
          if (h.empty() || h.back().state != s.state || h.back().restarts != s.restarts || h.back().nodes != s.nodes) {
            h.push_back(s);
          }
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  fs::path dir_;
  int port_ = 0, agent_port_ = 0, server_starts_ = 0;
  std::string url_, agent_url_, admin_token_, ca_file_;
  std::unique_ptr<Process> server_;
  std::vector<Agent> agents_;
  std::thread monitor_;
  std::atomic<bool> stop_monitor_{false};
  std::mutex mu_;
  std::map<std::string, std::vector<Seen>> seen_;
};

// "j-00000003 on chaos1 killed: +3.1 s PENDING r2 [], +3.2 s SCHEDULED r2 [chaos0], ...": what the monitor saw of
// one job from the kill of its agent on.
template <typename K, typename H>
std::string Timeline(const std::string& id, const K& kill, const H& history) {
  std::vector<std::string> steps;
  for (const auto& s : history) {
    if (s.ns <= kill.ns) continue;
    steps.push_back(
        fmt::format("+{:.1f} s {} r{} [{}]", (s.ns - kill.ns) / 1e9, s.state, s.restarts, fmt::join(s.nodes, ",")));
    if (s.state == "RUNNING") break;
  }
  return fmt::format("  {} on {} killed: {}", id, kill.node, fmt::join(steps, ", "));
}

// The server's own account of each recovery (the RUNNING events' "recovered in ..." reasons, from its
// detection of the failure): p50 / p99 of each phase, to show where the time goes.
void PrintRecoveryPhases(http::Client& client) {
  const std::regex text(
      R"(recovered in ([0-9.]+) s: detected ([0-9.]+) s after the failure, stopped \+([0-9.]+) s, placed \+([0-9.]+) s, )"
      R"(running \+([0-9.]+) s)");
  std::vector<std::vector<double>> phases(5);
  int64_t after = 0;
  for (int page = 0; page < 100; ++page) {
    auto events = client.Get(fmt::format("/v1/events?after={}&limit=500", after));
    if (!events.ok() || (*events)["events"].empty()) break;
    for (const auto& e : (*events)["events"]) {
      after = e["seq"];
      std::smatch m;
      const std::string reason = e["reason"];
      if (!std::regex_search(reason, m, text)) continue;
      for (size_t i = 0; i < phases.size(); ++i) phases[i].push_back(std::stod(m[i + 1]));
    }
  }
  const char* names[] = {"total", "detected", "stopped", "placed", "running"};
  fmt::print("recovery phases by the server ({} recoveries; p50 / p99 s):", phases[0].size());
  for (size_t i = 0; i < phases.size(); ++i) {
    fmt::print("  {} {:.1f} / {:.1f}", names[i], Percentile(phases[i], 50), Percentile(phases[i], 99));
  }
  fmt::print("\n");
}

TEST_F(Chaos, EveryJobCompletesFromItsCheckpointsThroughKillsFreezesAndAServerCrash) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  {
    auto join = NewClient()->Post("/v1/join-tokens", {{"uses", 1000}});
    ASSERT_TRUE(join.ok()) << join.status();
    subprocess::UseJoinToken((*join)["token"]);
  }
  for (int i = 0; i < kAgents; ++i) {
    agents_.push_back({.name = fmt::format("chaos{}-{}", i, ::getpid())});
    StartAgent(agents_.back());
  }
  ASSERT_TRUE(WaitNodes("ready", seconds(30))) << "agents did not register";
  monitor_ = std::thread([this] { Monitor(); });

  const int events = std::clamp(EnvInt("GPUGEEK_CHAOS_EVENTS", 20), 1, 1000);
  const uint64_t seed = static_cast<uint64_t>(EnvInt("GPUGEEK_CHAOS_SEED", static_cast<int>(::time(nullptr))));
  std::mt19937_64 rng(seed);
  RecordProperty("seed", std::to_string(seed));
  fmt::print("chaos: seed {} (GPUGEEK_CHAOS_SEED), {} faults\n", seed, events);

  std::vector<std::string> ids;
  for (int i = 0; i < kJobs / 2; ++i) ids.push_back(Submit(i));
  std::this_thread::sleep_for(seconds(3));

  // Every fault: an agent SIGKILL (the recoveries measured), SIGSTOP, or the server's SIGKILL (node "").
  struct Fault {
    int64_t ns;
    std::string node;
    bool kill = false;
  };
  std::vector<Fault> faults;
  std::vector<std::string> log;
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Heals whatever fault has reached its time: (agent index, due ns, restart or SIGCONT).
  std::vector<std::pair<size_t, int64_t>> heal;
  auto heal_due = [&](bool all) {
    for (auto it = heal.begin(); it != heal.end();) {
      if (!all && it->second > MonoNs()) {
        ++it;
        continue;
      }
      Agent& a = agents_[it->first];
      if (a.frozen) {
        ::kill(a.process->pid(), SIGCONT);
        a.frozen = false;
      } else if (a.down) {
        StartAgent(a);
      }
      it = heal.erase(it);
    }
  };
  int submitted_during = 0;
  for (int e = 0; e < events; ++e) {
    std::this_thread::sleep_for(milliseconds(uniform(1000, 3000)));
    heal_due(false);
    if (e == events / 2) {
      // The server, once: SIGKILL, then the same binary on the same ports and data.
      faults.push_back({MonoNs(), ""});
      ::kill(server_->pid(), SIGKILL);
      server_->Stop();
      log.push_back("server SIGKILL + restart");
      ASSERT_NO_FATAL_FAILURE(StartServer());
    }
    if (submitted_during < kJobs / 2 && e % 2 == 1) {
      ids.push_back(Submit(kJobs / 2 + submitted_during++));
    }
    // A victim among the agents that are up, keeping at least two nodes up.
    std::vector<size_t> up;
    for (size_t i = 0; i < agents_.size(); ++i) {
      if (!agents_[i].down && !agents_[i].frozen) up.push_back(i);
    }
    if (up.size() <= 2) {
      log.push_back("(two nodes out: no fault)");
      continue;
    }
    const size_t v = up[uniform(0, static_cast<int>(up.size()) - 1)];
    Agent& a = agents_[v];
    if (uniform(0, 2) < 2) {
      const int back_ms = uniform(0, 3000);
      faults.push_back({MonoNs(), a.name, true});
      ::kill(a.process->pid(), SIGKILL);
      a.process->Stop();
      a.down = true;
      heal.emplace_back(v, MonoNs() + int64_t{back_ms} * 1'000'000);
      log.push_back(fmt::format("SIGKILL {} (back in {} ms)", a.name, back_ms));
    } else {
      const int stop_ms = uniform(1000, 5000);
      faults.push_back({MonoNs(), a.name});
      ::kill(a.process->pid(), SIGSTOP);
      a.frozen = true;
      heal.emplace_back(v, MonoNs() + int64_t{stop_ms} * 1'000'000);
      log.push_back(fmt::format("SIGSTOP {} for {} ms", a.name, stop_ms));
    }
  }
  while (submitted_during < kJobs / 2) ids.push_back(Submit(kJobs / 2 + submitted_during++));
  std::this_thread::sleep_for(seconds(5));
  heal_due(true);
  fmt::print("chaos: faults: {}\n", fmt::join(log, "; "));

  // Every accepted job is there and ends SUCCEEDED.
  ASSERT_EQ(ids.size(), static_cast<size_t>(kJobs));
  auto client = NewClient();
  std::map<std::string, nlohmann::json> final;
  for (auto end = steady_clock::now() + seconds(240); steady_clock::now() < end && final.size() < ids.size();) {
    for (const std::string& id : ids) {
      if (final.contains(id)) continue;
      auto j = client->Get("/v1/jobs/" + id);
      if (!j.ok()) continue;
      const std::string state = (*j)["state"];
      if (state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED") final[id] = *j;
    }
    std::this_thread::sleep_for(milliseconds(500));
  }
  stop_monitor_ = true;
  monitor_.join();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& id = ids[i];
    ASSERT_TRUE(final.contains(id)) << id << " did not end: " << client->Get("/v1/jobs/" + id)->dump();
    EXPECT_EQ(final[id]["state"], "SUCCEEDED") << final[id].dump();
    EXPECT_EQ(final[id]["checkpoint"]["step"], IsGpt(static_cast<int>(i)) ? kGptSteps : kSteps)
        << id << ": the server's last checkpoint";
  }

  // No member twice at once, no GPU shared.
  std::vector<std::string> errors;
  const auto intervals = fencing::ParseProbe(subprocess::ReadFile(dir_ / "probe.log"), &errors);
  EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n"));
  const std::vector<std::string> violations = fencing::FindFencingViolations(intervals);
  EXPECT_TRUE(violations.empty()) << fmt::format("{}", fmt::join(violations, "\n"));

  // Each run resumed from the job's last durable checkpoint, at most one interval behind its furthest step.
  std::map<std::string, int> furthest, durable;
  std::map<std::string, int> resumes;
  int lost_steps = 0, runs = 0;
  std::istringstream progress(subprocess::ReadFile(dir_ / "progress.log"));
  for (std::string kind, job, rank, restarts; progress >> kind >> job >> rank >> restarts;) {
    int step = 0;
    progress >> step;
    // Rank 0 checkpoints; the ranks of this stand-in do not step in lockstep, so its steps are the job's.
    if (kind == "step" && rank == "0") furthest[job] = std::max(furthest[job], step);
    if (kind == "ckpt") durable[job] = std::max(durable[job], step);
    if (kind == "resume" && rank == "0") {
      ++runs;
      ++resumes[job];
      // (A run SIGKILLed between its checkpoint's rename and the `ckpt` line leaves one step more.)
      EXPECT_GE(step, durable[job]) << job << " run " << restarts << " did not start from its last checkpoint";
      EXPECT_LE(step, furthest[job]) << job << " run " << restarts << " started past its furthest step";
      EXPECT_GE(step, furthest[job] - kCheckpointEvery)
          << job << " run " << restarts << " went back more than one checkpoint interval";
      lost_steps += std::max(0, furthest[job] - step);
    }
  }

  // The GPT runs: rank 0 appends each step it took to samples-rank0.txt (train.py); a step not above the
  // one before starts a run, resumed from the step below it.
  int gpt_restarts = 0, gpt_lost = 0;
  for (int i = 0; i < kJobs; ++i) {
    if (!IsGpt(i)) continue;
    std::istringstream samples(subprocess::ReadFile(dir_ / "ckpt" / fmt::format("chaos-{}", i) / "samples-rank0.txt"));
    int previous = 0, reached = 0;
    std::string line;
    for (int step = 0; std::getline(samples, line) && std::istringstream(line) >> step; previous = step) {
      reached = std::max(reached, previous);
      if (step > previous) continue;
      gpt_lost += reached - (step - 1);
      EXPECT_GE(step - 1, reached - kGptCheckpointEvery)
          << "GPT job " << ids[i] << " went back more than one checkpoint interval, from " << reached << " to "
          << step - 1;
    }
    EXPECT_EQ(std::max(previous, reached), kGptSteps) << "GPT job " << ids[i];
    gpt_restarts += final[ids[i]].value("restarts", 0);
  }

  // Recovery: for each agent SIGKILL, each job that was RUNNING on that node -> RUNNING again. It is
  // isolated when no other fault began from 3 s before the kill (a fault's effects take up to the 3-s
  // node-down to play out) until RUNNING, on a node the job was on or placed on meanwhile, nor on the server.
  std::vector<double> recovery, isolated;
  std::vector<std::string> slow;  // the timelines of recoveries over 5 s
  for (const Fault& k : faults) {
    if (!k.kill) continue;
    for (const auto& entry : seen_) {
      // (Not a structured binding: the lambda below captures `history`, which clang 14 refuses for one.)
      const std::string& id = entry.first;
      const std::vector<Seen>& history = entry.second;
      const Seen* before = nullptr;
      for (const Seen& s : history) {
        if (s.ns <= k.ns) before = &s;
      }
      if (before == nullptr || before->state != "RUNNING" ||
          std::find(before->nodes.begin(), before->nodes.end(), k.node) == before->nodes.end()) {
        continue;
      }
      for (const Seen& s : history) {
        if (s.ns <= k.ns || s.state != "RUNNING" || s.restarts <= before->restarts) continue;
        const double took = (s.ns - k.ns) / 1e9;
        recovery.push_back(took);
        const bool overlapped = std::any_of(faults.begin(), faults.end(), [&](const Fault& f) {
          const bool touches = f.node.empty() || std::ranges::count(before->nodes, f.node) > 0 ||
                               std::any_of(history.begin(), history.end(), [&](const Seen& h) {
                                 return h.ns > k.ns && h.ns <= s.ns && std::ranges::count(h.nodes, f.node) > 0;
                               });
          return &f != &k && touches && f.ns > k.ns - 3'000'000'000 && f.ns < s.ns;
        });
        if (!overlapped) isolated.push_back(took);
        if (took > 5) slow.push_back(Timeline(id, k, history) + (overlapped ? " (overlapped)" : ""));
        break;
      }
    }
  }
  fmt::print(
      "chaos: {} jobs SUCCEEDED, {} runs of rank 0 ({} resumed), {} steps redone in all (checkpoint every {} of {} "
      "steps)\n",
      final.size(), runs, runs - static_cast<int>(resumes.size()), lost_steps, kCheckpointEvery, kSteps);
  fmt::print("chaos: the 2 GPT jobs restarted {} times, {} steps redone in all (checkpoint every {} of {} steps)\n",
             gpt_restarts, gpt_lost, kGptCheckpointEvery, kGptSteps);
  fmt::print(
      "recovery, agent SIGKILL -> job RUNNING again (1 s heartbeats, suspect 2 s, down 3 s):\n"
      "  gpugeek, isolated          p50 {:6.2f} s   p99 {:6.2f} s   ({} samples: no other fault on its nodes)\n"
      "  gpugeek, all               p50 {:6.2f} s   p99 {:6.2f} s   ({} samples: faults stacked on its nodes too)\n"
      "  Kubernetes (defaults)      ~350 s  (node-monitor-grace-period 50 s + not-ready toleration 300 s)\n"
      "  Slurm (defaults)           >= 300 s (SlurmdTimeout 300 s before the node is DOWN)\n"
      "  SkyPilot managed jobs      15-20 s polling, then a relaunch of the whole cluster\n",
      Percentile(isolated, 50), Percentile(isolated, 99), isolated.size(), Percentile(recovery, 50),
      Percentile(recovery, 99), recovery.size());
  if (!slow.empty()) fmt::print("recoveries over 5 s:\n{}\n", fmt::join(slow, "\n"));
  PrintRecoveryPhases(*client);
  if (!recovery.empty()) {
    RecordProperty("recovery_p50_ms", static_cast<int>(Percentile(recovery, 50) * 1000));
    RecordProperty("recovery_p99_ms", static_cast<int>(Percentile(recovery, 99) * 1000));
  }
  if (!isolated.empty()) {
    RecordProperty("isolated_recovery_p50_ms", static_cast<int>(Percentile(isolated, 50) * 1000));
    RecordProperty("isolated_recovery_p99_ms", static_cast<int>(Percentile(isolated, 99) * 1000));
  }
}

}  // namespace
}  // namespace gpugeek
