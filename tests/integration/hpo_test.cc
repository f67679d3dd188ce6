// A hyper-parameter experiment on a real pool (docs/hpo.md): `gpugeek server`, two agents with two emulated
// H100 each, and `gpugeek hpo run` with 40 trials, 4 at once, TPE and ASHA. Each trial is a Python process
// (examples/gpt/gpugeek_hpo.py) that reports a synthetic learning curve of its parameters, one step every
// 0.25 s, and writes what the agent acknowledged and when it got SIGTERM to a file of its own. Half-way the
// server is SIGKILLed and restarted on its ports and data. Checked:
//   - the experiment ends SUCCEEDED with exactly 40 trials, some pruned and some complete;
//   - every value a trial saw acknowledged is stored with its trial (none lost to the kill);
//   - a pruned trial's job is cancelled and its member exits within one heartbeat (1 s) of it, while
//     the server is up (measured from the cancel event to the member's exit; printed);
//   - `gpugeek hpo status`, `export` (CSV) and `--svg` give the same trials.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "absl/strings/str_split.h"
#include "pool_fixture.h"

namespace gpugeek::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// loss(step) = base(params) + 2 / step: the better configurations are better at every step, so ASHA's
// early verdicts are right and a test can tell pruning works.
constexpr char kTrialScript[] = R"py(
import json, os, signal, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpugeek_hpo

out_dir = sys.argv[1]
trial = gpugeek_hpo.trial_id()
log = open(os.path.join(out_dir, f"trial-{trial}.{os.getpid()}.log"), "a", buffering=1)

def on_term(signum, frame):
    log.write(f"sigterm {time.time():.3f}\n")
    log.write(f"exit {time.time():.3f}\n")
    os._exit(0)

signal.signal(signal.SIGTERM, on_term)
p = gpugeek_hpo.params()
base = (p["x"] - 0.3) ** 2 + (0.1 if p["opt"] == "sgd" else 0.0) + 0.01 * abs(p["depth"] - 4)
for step in range(1, 10):
    time.sleep(0.25)
    value = base + 2.0 / step
    stop = gpugeek_hpo.report(step, value)
    log.write(f"acked {step} {value!r}\n")
    if stop:
        log.write(f"asked-to-stop {time.time():.3f}\n")
        time.sleep(5)  # SIGTERM comes
log.write(f"exit {time.time():.3f}\n")
)py";

constexpr char kSpec[] = R"(name: synthetic
objective: {metric: val_loss, direction: minimize}
space:
  - {name: x, type: float, low: 0.0, high: 1.0}
  - {name: depth, type: int, low: 1, high: 8}
  - {name: opt, type: categorical, choices: [adam, sgd]}
budget: {trials: 40}
parallelism: 4
sampler: tpe
pruner: {name: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
seed: 11
trial:
  resources: {accelerators: "H100-SXM-80GB:1"}
  checkpoint: {grace: 5s}
  run: /usr/bin/python3 {dir}/trial.py {dir}/reports
)";

// "2026-11-29T21:04:21.123Z" -> seconds since the epoch.
double EventSeconds(const std::string& t) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(t.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &ms) < 6) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

class HpoTest : public PoolFixture {
 protected:
  // Restarts the server on its ports and data (after a SIGKILL).
  void RestartServer(int port, int agent_port) {
    server_ = std::make_unique<subprocess::Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", fmt::format("127.0.0.1:{}", port),
                                 "--agent-listen", fmt::format("127.0.0.1:{}", agent_port), "--data-dir",
                                 (dir_ / "server").string()},
        dir_ / "server.2.log");
    for (auto end = steady_clock::now() + seconds(30); steady_clock::now() < end;) {
      if (server_->output().find("listening on") != std::string::npos) return;
      std::this_thread::sleep_for(milliseconds(20));
    }
    FAIL() << "the server did not restart: " << server_->output();
  }
};

TEST_F(HpoTest, FortyTrialsFourAtOnceWithAshaSurviveAServerKill) {
  const std::string agent_url = StartPool("hpo", 2);
  ASSERT_FALSE(agent_url.empty());
  ASSERT_NO_FATAL_FAILURE(StartAgent(agent_url, "hpo-a", "2xH100-SXM-80GB"));
  ASSERT_NO_FATAL_FAILURE(StartAgent(agent_url, "hpo-b", "2xH100-SXM-80GB"));
  const fs::path trial_dir = dir_ / "trial";
  fs::create_directories(trial_dir / "reports");
  fs::permissions(trial_dir / "reports", fs::perms::all, fs::perm_options::replace);
  std::ofstream(trial_dir / "trial.py") << kTrialScript;
  fs::copy_file(fs::path(GPUGEEK_SOURCE_DIR) / "examples/gpt/gpugeek_hpo.py", trial_dir / "gpugeek_hpo.py");
  std::string spec = kSpec;
  for (size_t at; (at = spec.find("{dir}")) != std::string::npos;) spec.replace(at, 5, trial_dir.string());
  std::ofstream(dir_ / "experiment.yaml") << spec;

  auto [code, out] = Cli({"hpo", "run", (dir_ / "experiment.yaml").string()});
  ASSERT_EQ(code, 0) << out;
  ASSERT_NE(out.find("experiment x-000001 (synthetic) started: 40 trials, 4 at once"), std::string::npos) << out;
  const std::string id = "x-000001";

  // Half-way: SIGKILL the server and start it again on the same ports and data.
  const int port = std::stoi(url_.substr(url_.rfind(':') + 1));
  const int agent_port = std::stoi(agent_url.substr(agent_url.rfind(':') + 1));
  double killed_at = 0, back_at = 0;
  for (auto end = steady_clock::now() + seconds(120); steady_clock::now() < end;) {
    auto e = Client().Get("/v1/experiments/" + id + "?limit=1");
    ASSERT_TRUE(e.ok()) << e.status();
    const nlohmann::json& c = (*e)["counts"];
    if (c.value("complete", 0) + c.value("pruned", 0) + c.value("failed", 0) >= 16) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  killed_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  ::kill(server_->pid(), SIGKILL);
  server_->Stop();  // reaps it
  ASSERT_NO_FATAL_FAILURE(RestartServer(port, agent_port));
  back_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

  nlohmann::json experiment;
  for (auto end = steady_clock::now() + seconds(240); steady_clock::now() < end;) {
    auto e = Client().Get("/v1/experiments/" + id);
    if (e.ok()) experiment = *e;
    if (experiment.value("state", "") != "running") break;
    std::this_thread::sleep_for(milliseconds(250));
  }
  ASSERT_EQ(experiment.value("state", ""), "succeeded") << experiment.dump(1) << "\n"
                                                        << server_->output() << "\nagents:\n"
                                                        << AgentOutputs();
  const nlohmann::json& trials = experiment["trials"];
  ASSERT_EQ(trials.size(), 40u);
  const nlohmann::json& counts = experiment["counts"];
  EXPECT_EQ(counts.value("running", 0), 0);
  EXPECT_GE(counts.value("pruned", 0), 10) << counts.dump();
  EXPECT_GE(counts.value("complete", 0), 5) << counts.dump();
  EXPECT_EQ(counts.value("failed", 0), 0) << experiment.dump(1);
  ASSERT_FALSE(experiment["best"].is_null());
  // The best complete trial's value is its last report: base + 2/9.
  const double best = experiment["best"]["value"].get<double>();
  EXPECT_LT(best, 0.2222 + 0.1) << experiment["best"].dump();

  // What each trial's processes saw acknowledged, and when pruned ones got SIGTERM and exited.
  std::map<int64_t, std::map<int64_t, double>> acked;
  std::map<int64_t, double> exited_at;
  for (const auto& entry : fs::directory_iterator(trial_dir / "reports")) {
    const std::string name = entry.path().filename().string();
    const int64_t trial = std::stoll(name.substr(6, name.find('.') - 6));
    std::ifstream in(entry.path());
    std::string word;
    while (in >> word) {
      if (word == "acked") {
        int64_t step = 0;
        double value = 0;
        in >> step >> value;
        acked[trial][step] = value;
      } else {
        double t = 0;
        in >> t;
        if (word == "exit") exited_at[trial] = std::max(exited_at[trial], t);
      }
    }
  }
  int checked = 0;
  std::vector<double> release_ms;
  int no_exit = 0;
  for (const nlohmann::json& t : trials) {
    const int64_t n = t["number"];
    auto one = Client().Get(fmt::format("/v1/experiments/{}/trials/{}", id, n));
    ASSERT_TRUE(one.ok()) << one.status();
    std::map<int64_t, double> stored;
    for (const nlohmann::json& p : (*one)["intermediate"]) stored[p[0].get<int64_t>()] = p[1].get<double>();
    for (const auto& [step, value] : acked[n]) {
      ASSERT_TRUE(stored.contains(step)) << "trial " << n << " step " << step << " was acknowledged, not stored";
      EXPECT_DOUBLE_EQ(stored[step], value) << "trial " << n << " step " << step;
      ++checked;
    }
    if (t["state"] == "complete") {
      EXPECT_EQ(t["last_step"], 9) << t.dump();
      EXPECT_DOUBLE_EQ(t["value"].get<double>(), stored[9]);
    }
    if (t["state"] != "pruned") continue;
    EXPECT_NE(t["reason"].get<std::string>().find("pruned by asha at step"), std::string::npos) << t.dump();
    auto events = Client().Get("/v1/events?job=" + t["job_id"].get<std::string>());
    ASSERT_TRUE(events.ok());
    double cancelled = 0;
    for (const nlohmann::json& ev : (*events)["events"]) {
      if (ev["to"] == "CANCELLED") cancelled = EventSeconds(ev["time"]);
    }
    ASSERT_GT(cancelled, 0) << (*events).dump();
    // While the server was down the agents could not hear of a prune: only those decided while it was up.
    if (cancelled > killed_at - 2 && cancelled < back_at + 3) continue;
    if (!exited_at.contains(n)) {
      ++no_exit;  // its process wrote no exit line (killed before its handler ran): not measured
      continue;
    }
    release_ms.push_back(1000 * (exited_at[n] - cancelled));
  }
  EXPECT_GE(checked, 80);
  ASSERT_GE(release_ms.size(), 5u);
  std::sort(release_ms.begin(), release_ms.end());
  std::cout << fmt::format(
      "pruned trials: cancel -> member exit, {} trials: p50 {:.0f} ms, max {:.0f} ms ({} without an exit line)\n",
      release_ms.size(), release_ms[release_ms.size() / 2], release_ms.back(), no_exit);
  // One heartbeat (1 s) plus the event time's millisecond rounding.
  EXPECT_LE(release_ms.back(), 1100) << "a pruned trial ran on more than one heartbeat after its cancel";

  // The CLI's views of the same experiment.
  auto [status_code, status] = Cli({"hpo", "status", id, "--svg", (dir_ / "charts").string()});
  EXPECT_EQ(status_code, 0) << status;
  EXPECT_NE(status.find("0 running, "), std::string::npos) << status;
  EXPECT_NE(status.find("importance (share of eta^2 of the loss ranks): "), std::string::npos) << status;
  EXPECT_TRUE(fs::exists(dir_ / "charts" / (id + "-best-vs-trials.svg")));
  EXPECT_TRUE(fs::exists(dir_ / "charts" / (id + "-best-vs-gpu-hours.svg")));
  auto [csv_code, csv] = Cli({"hpo", "export", id});
  EXPECT_EQ(csv_code, 0) << csv;
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 41u) << csv;
  EXPECT_EQ(lines[0], "number,state,value,x,depth,opt,last_step,last_intermediate");
}

}  // namespace
}  // namespace gpugeek::testing
