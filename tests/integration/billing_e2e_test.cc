// Metering and billing survive control-plane SIGKILLs without double charges, with real processes: one
// `gpugeek server` (lease 20 s, so no outage here fences a workload) and two emulated `gpugeek agent`s of
// 4 x A100-SXM-80GB each, one on-demand at 3.600000 per GPU-hour and one spot at 1.800000; trial credit 0.05.
// Three jobs of 2 GPUs per member run `sleep`: one on-demand (8 s), one spot (18 s) and a 2-node gang (16 s,
// one member on each node). The server is SIGKILLed three times and restarted on its ports and data:
//   1. right after all three are RUNNING, down for 3 s: every member's segment is open;
//   2. the moment the on-demand job's workload exits (its clock file appears), down for 3 s: its exit report
//      reaches the restarted server, while the other two run on;
//   3. after all have SUCCEEDED, restarted at once: the ledger is replayed from the store.
// Then, with exact integers (docs/billing.md, src/controlplane/billing.h):
//   - the ledger holds exactly one charge per (job, epoch, rank) segment, usage/JOB/e1/rR, no "/2" (no member
//     runs twice: each job keeps epoch 1 and 0 restarts);
//   - each charge is exactly its GPU time at its node's price (the prices make a millisecond of 2 GPUs a whole
//     number of micro-units, so rounding and carry are out of the picture), and each job's charges sum exactly to
//     its stored usage (cost_micros, per capacity line and in all);
//   - every balance sums to 0 (from the postings, and the server's gpugeek_ledger_imbalance_micros), the
//     tenant's credit and cash fell by exactly the charges, the platform's revenue rose by them, and
//     /v1/balance, /v1/bill and gpugeek_spend_micros_total say the same;
//   - each member's metered time equals the workload's own clock (`date` at its start and end) and the job's
//     RUNNING -> SUCCEEDED span of its committed events (less the wait of an exit that happened while the
//     server was down: metered to the exit, api::WorkloadReport::ended_ms_ago): the outages were metered (the
//     workloads ran on) and not twice; the job views mid-run grew through each outage by its length at the
//     job's rate;
//   - a restart after the end changes nothing in the ledger or the jobs' usage.
// About 25 s.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "common/testing/process.h"
#include "http/client.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using J = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using subprocess::Process;

constexpr int64_t kOnDemandPrice = 3'600'000;  // micro-units per GPU-hour: 1 micro-unit per GPU-millisecond
constexpr int64_t kSpotPrice = 1'800'000;      // half that
constexpr int64_t kGpusPerMember = 2;          // so a member's millisecond costs a whole number of micro-units
constexpr int64_t kTrialCredit = 50'000;       // 0.05: less than the run costs, so charges take credit, then cash
constexpr auto kOutage = seconds(3);           // each time the server is down (1 and 2)

// Tolerances, in ms. (a) A member's metering and the job's events are committed by the same writer's pass
// (the first "running" report: StartMetering and RUNNING; the exit report: MeterMember and SUCCEEDED), so for
// a single-node job they differ by the time between two clock reads in one pass, plus the events' ms
// truncation; a restart carries the segment's start in wall-clock ms (usage.h OpenSegment). 250 ms is ample.
constexpr int64_t kSamePassMs = 250;
// (b) Between members of a gang, or between a workload's own clock and the server: the agent tells the server
// of a start or an exit within a poll period (100 ms, agent.cc report_soon_), or at its next 1 s heartbeat when
// a report failed; then the pass and the HTTP round trip. 1.5 s: half the outage, so an outage that was not
// metered (3 s missing) or metered twice (3 s extra) cannot pass.
constexpr int64_t kReportMs = 1500;

int64_t WallMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "2026-12-05T03:09:07.123Z" (controlplane/api_views.cc FormatTime) -> ms since the Unix epoch; -1 if malformed.
int64_t ParseTimeMs(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &ms) != 7) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
}

// One job of the test: its spec's name, nodes and capacity constraint ("" = any), how long its workload sleeps.
struct JobCase {
  std::string name;
  int nodes = 1;
  std::string capacity;
  int sleep_s = 0;
  std::string id;
};

// One outage of the server, in wall-clock ms: SIGKILL sent, and the restarted server answering.
struct Outage {
  int64_t down = 0;
  int64_t up = 0;
};

class BillingAcrossServerKills : public ::testing::Test {
 protected:
  void SetUp() override {
    // The server is SIGKILLed under keep-alive TLS connections: a write on one must fail, not end this process.
    ::signal(SIGPIPE, SIG_IGN);
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_billing_e2e_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "clock");
    // Workloads run as their tenant's unprivileged uid: the clock folder is theirs to write.
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(dir_ / "clock", fs::perms::all);
    ASSERT_NO_FATAL_FAILURE(StartServer());
    auto join = Client()->Post("/v1/join-tokens", {{"uses", 2}});
    ASSERT_TRUE(join.ok()) << join.status();
    subprocess::UseJoinToken((*join)["token"]);
    // Node names carry the pid: test processes running side by side share this host's cgroups.
    od_node_ = fmt::format("od-{}", ::getpid());
    spot_node_ = fmt::format("spot-{}", ::getpid());
    for (const auto& [node, capacity, price] :
         {std::tuple{od_node_, "on-demand", "3.600000"}, std::tuple{spot_node_, "spot", "1.800000"}}) {
      agents_.push_back(std::make_unique<Process>(
          std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url_, "--ca-file", ca_, "--name", node,
                                   "--emulate", "4xA100-SXM-80GB", "--capacity", capacity, "--gpu-hour-price", price,
                                   "--data-dir", (dir_ / node).string()},
          dir_ / (node + ".log")));
    }
    ASSERT_TRUE(WaitUntil(seconds(30),
                          [&] {
                            auto nodes = Client()->Get("/v1/nodes");
                            if (!nodes.ok() || (*nodes)["nodes"].size() != 2) return false;
                            for (const J& n : (*nodes)["nodes"]) {
                              if (n["state"] != "ready") return false;
                            }
                            return true;
                          }))
        << "the agents did not register: " << Diagnostics();
  }

  void TearDown() override {
    agents_.clear();
    server_.reset();
    if (HasFailure()) {
      std::cout << "kept " << dir_ << " (server.N.log, one log per agent)\n";
    } else {
      fs::remove_all(dir_);
    }
  }

  // Starts (or restarts, on the same ports and data) the server; the first start sets the URLs, token and CA.
  void StartServer() {
    const std::string listen = fmt::format("127.0.0.1:{}", port_);
    const std::string agent_listen = fmt::format("127.0.0.1:{}", agent_port_);
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", listen, "--agent-listen", agent_listen,
                                 "--data-dir", (dir_ / "server").string(), "--lease", "20s", "--trial-credit",
                                 "0.050000"},
        dir_ / fmt::format("server.{}.log", server_starts_++));
    const std::regex listening(
        R"(listening on (https://127\.0\.0\.1:([0-9]+)), agents on (https://127\.0\.0\.1:([0-9]+)))");
    std::smatch m;
    std::string out;
    for (auto end = steady_clock::now() + seconds(30); steady_clock::now() < end;) {
      out = server_->output();
      if (std::regex_search(out, m, listening)) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    ASSERT_FALSE(m.empty()) << "the server did not start: " << out;
    if (port_ != 0) {
      ASSERT_EQ(url_, m[1].str()) << "the restarted server is not on its port";
      ASSERT_EQ(agent_url_, m[3].str()) << "the restarted server's agent listener is not on its port";
      return;
    }
    url_ = m[1];
    port_ = std::stoi(m[2]);
    agent_url_ = m[3];
    agent_port_ = std::stoi(m[4]);
    token_ = subprocess::UseAdminToken(dir_ / "server");
    ca_ = subprocess::UseServerCa(dir_ / "server");
  }

  // SIGKILLs the server, keeps it down for `outage`, restarts it; returns the outage in wall-clock ms.
  Outage KillAndRestart(steady_clock::duration outage) {
    Outage o{.down = WallMs()};
    EXPECT_EQ(::kill(server_->pid(), SIGKILL), 0);
    server_->Stop();  // reaps it
    std::this_thread::sleep_for(outage);
    StartServer();
    EXPECT_TRUE(WaitUntil(seconds(30), [&] { return Client()->Get("/v1/healthz").ok(); })) << Diagnostics();
    o.up = WallMs();
    return o;
  }

  // The API as the admin: a new client each call (a client is one thread's, and the server restarts).
  std::unique_ptr<http::Client> Client() {
    return *http::Client::Create(
        {.base_url = url_, .read_timeout = seconds(10), .ca_file = ca_, .bearer_token = token_});
  }
  J Get(const std::string& path) {
    absl::StatusOr<J> j;
    for (int i = 0; i < 50; ++i) {
      j = Client()->Get(path);
      if (j.ok()) return *j;
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << "GET " << path << ": " << j.status();
    return J::object();
  }

  // Polls `done` every 20 ms until it holds or `limit` passes.
  static bool WaitUntil(steady_clock::duration limit, const std::function<bool()>& done) {
    for (auto end = steady_clock::now() + limit; steady_clock::now() < end;) {
      if (done()) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return done();
  }

  std::string Submit(const JobCase& c) {
    std::string spec = fmt::format("name: {}\nnum_nodes: {}\nresources: {{accelerators: A100-SXM-80GB:{}{}}}\n", c.name,
                                   c.nodes, kGpusPerMember, c.capacity.empty() ? "" : ", capacity: " + c.capacity);
    const std::string clock = (dir_ / "clock" / c.name).string();
    spec += fmt::format(
        "run: |\n  date +%s%3N > {0}-r$GPUGEEK_NODE_RANK.start\n  sleep {1}\n  date +%s%3N > "
        "{0}-r$GPUGEEK_NODE_RANK.end\n",
        clock, c.sleep_s);
    auto job = Client()->Post("/v1/jobs", {{"spec_yaml", spec}});
    EXPECT_TRUE(job.ok()) << job.status() << "\n" << spec;
    return job.ok() ? (*job)["id"].get<std::string>() : "";
  }

  // The workload's own clock: ms since the Unix epoch written by `date` at its start or end; -1 if not yet.
  int64_t WorkloadClock(const std::string& job_name, int rank, const std::string& what) const {
    std::ifstream in(dir_ / "clock" / fmt::format("{}-r{}.{}", job_name, rank, what));
    int64_t ms = -1;
    in >> ms;
    return in ? ms : -1;
  }

  // Every ledger entry, oldest first (GET /v1/ledger, paged).
  std::vector<J> Ledger() {
    std::vector<J> entries;
    std::string after;
    for (int page = 0; page < 100; ++page) {
      const J p = Get("/v1/ledger?limit=2&" + (after.empty() ? std::string() : "after=" + after));
      for (const J& e : p.value("entries", J::array())) entries.push_back(e);
      if (!p.contains("next_after") || p["next_after"].is_null()) break;
      after = p["next_after"].get<std::string>();
    }
    return entries;
  }

  std::string Diagnostics() const {
    std::string all = server_ ? server_->output() : "";
    for (const auto& a : agents_) all += "\n---\n" + a->output();
    return all;
  }

  fs::path dir_;
  int port_ = 0, agent_port_ = 0, server_starts_ = 0;
  std::string url_, agent_url_, token_, ca_, od_node_, spot_node_;
  std::unique_ptr<Process> server_;
  std::vector<std::unique_ptr<Process>> agents_;
};

TEST_F(BillingAcrossServerKills, ChargesMatchUsageAndEventsOnceEach) {
  std::vector<JobCase> jobs = {{.name = "solo-od", .nodes = 1, .capacity = "on-demand", .sleep_s = 8},
                               {.name = "solo-spot", .nodes = 1, .capacity = "spot", .sleep_s = 18},
                               {.name = "gang", .nodes = 2, .capacity = "", .sleep_s = 16}};
  for (JobCase& c : jobs) {
    c.id = Submit(c);
    ASSERT_FALSE(c.id.empty());
  }
  const std::map<std::string, int64_t> price_of = {{od_node_, kOnDemandPrice}, {spot_node_, kSpotPrice}};
  // Micro-units per millisecond of a job, all its members together, from where they run.
  std::map<std::string, int64_t> rate;
  ASSERT_TRUE(WaitUntil(seconds(30), [&] {
    for (const JobCase& c : jobs) {
      if (Get("/v1/jobs/" + c.id).value("state", "") != "RUNNING") return false;
    }
    return true;
  })) << Diagnostics();
  for (const JobCase& c : jobs) {
    const J job = Get("/v1/jobs/" + c.id);
    for (const J& m : job["allocation"]["members"]) {
      ASSERT_EQ(m["gpus"].size(), static_cast<size_t>(kGpusPerMember)) << job.dump(2);
      rate[c.id] += kGpusPerMember * price_of.at(m["node"].get<std::string>()) / kOnDemandPrice;
    }
  }
  // The views of the running jobs grew through the outage by its length at each job's rate: the restarted
  // server resumed each open segment from its start, not from the restart, and not twice.
  const auto expect_views_grew = [&](const std::map<std::string, J>& before, steady_clock::time_point before_at,
                                     const std::string& when) {
    for (const auto& [id, view] : before) {
      if (view.value("state", "") != "RUNNING") continue;
      const J after = Get("/v1/jobs/" + id);
      const int64_t elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - before_at).count();
      if (after.value("state", "") != "RUNNING") continue;  // ended meanwhile: its final usage is checked below
      const int64_t grew = after["usage"]["cost_micros"].get<int64_t>() - view["usage"]["cost_micros"].get<int64_t>();
      EXPECT_NEAR(static_cast<double>(grew), static_cast<double>(rate[id] * elapsed),
                  static_cast<double>(rate[id] * kReportMs))
          << id << " " << when << ": its view grew by " << grew << " micro-units in " << elapsed << " ms";
      std::cout << "[ view ] " << id << " " << when << ": +" << grew << " micro-units in " << elapsed << " ms at "
                << rate[id] << "/ms\n";
    }
  };
  const auto views = [&] {
    std::map<std::string, J> v;
    for (const JobCase& c : jobs) v[c.id] = Get("/v1/jobs/" + c.id);
    return v;
  };

  // Kill 1: every segment open.
  std::vector<Outage> outages;
  auto before = views();
  auto before_at = steady_clock::now();
  outages.push_back(KillAndRestart(kOutage));
  ASSERT_FALSE(HasFatalFailure());
  expect_views_grew(before, before_at, "through kill 1");

  // Kill 2: the moment the on-demand job's workload exits, before (or as) its agent reports it.
  // (The views are read first, so that nothing stands between the exit and the kill.)
  before = views();
  before_at = steady_clock::now();
  ASSERT_TRUE(WaitUntil(seconds(30), [&] { return WorkloadClock("solo-od", 0, "end") >= 0; })) << Diagnostics();
  outages.push_back(KillAndRestart(kOutage));
  ASSERT_FALSE(HasFatalFailure());
  expect_views_grew(before, before_at, "through kill 2");

  std::map<std::string, J> done;
  for (const JobCase& c : jobs) {
    ASSERT_TRUE(WaitUntil(seconds(40), [&] { return Get("/v1/jobs/" + c.id).value("state", "") == "SUCCEEDED"; }))
        << Get("/v1/jobs/" + c.id).dump(2) << Diagnostics();
    done[c.id] = Get("/v1/jobs/" + c.id);
    // Not requeued by a restart: one placement, so one segment per member.
    EXPECT_EQ(done[c.id]["epoch"], 1) << done[c.id].dump(2);
    EXPECT_EQ(done[c.id]["restarts"], 0) << done[c.id].dump(2);
  }

  // Kill 3, after the end, back at once: the ledger and usage come back from the store as they were, and the
  // agents' beats to the new server (each reports what it still lists) add nothing.
  const std::vector<J> ledger_before = Ledger();
  outages.push_back(KillAndRestart(seconds(0)));
  ASSERT_FALSE(HasFatalFailure());
  const int64_t restarted = outages.back().up;
  ASSERT_TRUE(WaitUntil(seconds(20), [&] {
    const J nodes = Get("/v1/nodes");
    int fresh = 0;
    for (const J& n : nodes.value("nodes", J::array())) {
      fresh += ParseTimeMs(n["last_heartbeat"].get<std::string>()) >= restarted + 2000;  // two beats since
    }
    return fresh == 2;
  })) << Get("/v1/nodes").dump(2);
  const std::vector<J> ledger = Ledger();
  ASSERT_EQ(ledger.size(), ledger_before.size());
  for (size_t i = 0; i < ledger.size(); ++i) EXPECT_EQ(ledger[i], ledger_before[i]) << i;
  for (const JobCase& c : jobs) {
    const J job = Get("/v1/jobs/" + c.id);
    EXPECT_EQ(job["usage"], done[c.id]["usage"]) << c.id;
  }

  // One charge per segment, exactly the segments there were; the grant; nothing else.
  const std::string tenant = done[jobs[0].id]["tenant"];
  std::set<std::string> expected_ids = {"grant/" + tenant + "/trial"};
  for (const JobCase& c : jobs) {
    for (int rank = 0; rank < c.nodes; ++rank) expected_ids.insert(fmt::format("usage/{}/e1/r{}", c.id, rank));
  }
  std::set<std::string> ids;
  std::map<std::string, int64_t> balances;  // account -> sum of its postings
  std::map<std::string, J> charges;         // id -> entry
  for (const J& e : ledger) {
    EXPECT_TRUE(ids.insert(e["id"].get<std::string>()).second) << "posted twice: " << e.dump();
    int64_t sum = 0;
    for (const J& p : e["postings"]) {
      balances[p["account"].get<std::string>()] += p["micros"].get<int64_t>();
      sum += p["micros"].get<int64_t>();
    }
    EXPECT_EQ(sum, 0) << e.dump();
    if (e["kind"] == "charge") charges[e["id"].get<std::string>()] = e;
  }
  EXPECT_EQ(ids, expected_ids) << "a segment charged twice (\"/2\"), or not at all";

  // Each charge: its GPU time at its node's price, exactly; each job's charges: exactly its stored usage.
  int64_t total = 0;
  std::map<std::string, int64_t> spend_by_capacity;
  for (const JobCase& c : jobs) {
    const J& job = done[c.id];
    std::map<std::string, int64_t> by_capacity;  // capacity type -> charged micro-units
    std::map<std::string, int64_t> gpu_ms_by_capacity;
    // Its committed events: when it turned RUNNING and SUCCEEDED.
    int64_t running = -1, succeeded = -1;
    const J events = Get("/v1/events?job=" + c.id);
    for (const J& ev : events.value("events", J::array())) {
      if (ev["to"] == "RUNNING") running = ParseTimeMs(ev["time"].get<std::string>());
      if (ev["to"] == "SUCCEEDED") succeeded = ParseTimeMs(ev["time"].get<std::string>());
    }
    ASSERT_GT(running, 0) << c.id << ": " << events.dump(2);
    ASSERT_GT(succeeded, running) << c.id << ": " << events.dump(2);
    for (int rank = 0; rank < c.nodes; ++rank) {
      const std::string id = fmt::format("usage/{}/e1/r{}", c.id, rank);
      ASSERT_TRUE(charges.contains(id)) << id;
      const J& charge = charges[id];
      const std::string node = job["allocation"]["members"][rank]["node"];
      const int64_t price = price_of.at(node);
      EXPECT_EQ(charge["capacity_type"], node == od_node_ ? "on-demand" : "spot") << charge.dump();
      EXPECT_EQ(charge["job"], c.id);
      int64_t cost = 0;
      for (const J& p : charge["postings"]) {
        if (p["account"].get<std::string>().starts_with("tenant:" + tenant + ":")) cost -= p["micros"].get<int64_t>();
      }
      const int64_t gpu_milli_seconds = charge["gpu_milli_seconds"];
      EXPECT_EQ(cost * 3'600'000, gpu_milli_seconds * price) << charge.dump();
      const std::string capacity = charge["capacity_type"];
      by_capacity[capacity] += cost;
      const int64_t metered_ms = gpu_milli_seconds / kGpusPerMember;
      gpu_ms_by_capacity[capacity] += gpu_milli_seconds;
      total += cost;
      spend_by_capacity[capacity] += cost;

      // The workload's own clock (`date` at its start and end). Metering starts at the agent's first "running"
      // report (within a report of the start) and ends at the exit: the agent's exit report says how long ago
      // the workload ended (api::WorkloadReport::ended_ms_ago), so an exit while the server was down is metered
      // to the exit, not to when the restarted server heard of it.
      const int64_t start = WorkloadClock(c.name, rank, "start");
      const int64_t end = WorkloadClock(c.name, rank, "end");
      ASSERT_GT(start, 0) << id;
      ASSERT_GE(end, start + c.sleep_s * 1000) << id;
      EXPECT_NEAR(static_cast<double>(metered_ms), static_cast<double>(end - start), static_cast<double>(kReportMs))
          << id << ": metered " << metered_ms << " ms, the workload ran " << end - start << " ms";
      // Against the committed events: one member's segment is the job's RUNNING -> SUCCEEDED span (a gang's
      // members start and end within a report of each other), less, for an exit during an outage, the wait
      // until the restarted server heard of it (SUCCEEDED is committed then).
      int64_t heard = end;
      for (size_t i = 0; i < 2; ++i) {  // the outages mid-run (the third came after every exit was heard)
        if (end >= outages[i].down - kReportMs && end <= outages[i].up) heard = std::max(heard, outages[i].up);
      }
      const int64_t span = succeeded - running;
      const int64_t tolerance = c.nodes == 1 ? kSamePassMs : kReportMs;
      EXPECT_LE(metered_ms, span + tolerance)
          << id << ": metered " << metered_ms << " ms, events say RUNNING for " << span << " ms";
      // (The restarted server hears of the exit at the agent's next heartbeat after it is up: a report more.)
      EXPECT_GE(metered_ms, span - (heard - end) - (heard == end ? tolerance : kReportMs))
          << id << ": metered " << metered_ms << " ms, events say RUNNING for " << span << " ms";
      std::cout << fmt::format(
          "[ {} ] {} on {}: charged {} micro-units for {} ms metered; events RUNNING->SUCCEEDED {} ms; the "
          "workload ran {} ms{}\n",
          c.name, id, node, cost, metered_ms, span, end - start,
          heard == end ? "" : fmt::format(" and exited up to {} ms before the restarted server was up", heard - end));
    }
    // The job's stored usage: exactly its charges, per capacity line and in all.
    int64_t usage_total = 0;
    for (const J& line : job["usage"]["lines"]) {
      const std::string capacity = line["capacity_type"];
      EXPECT_EQ(line["cost_micros"], by_capacity[capacity]) << c.id << " " << capacity << ": " << job["usage"].dump();
      EXPECT_NEAR(line["gpu_hours"].get<double>() * 3.6e6, static_cast<double>(gpu_ms_by_capacity[capacity]), 1e-3)
          << c.id << " " << capacity;
      usage_total += by_capacity[capacity];
      by_capacity.erase(capacity);
    }
    EXPECT_TRUE(by_capacity.empty()) << c.id << ": charged capacity types missing from its usage";
    EXPECT_EQ(job["usage"]["cost_micros"], usage_total) << c.id << ": " << job["usage"].dump();
    std::cout << fmt::format("[ {} ] usage {} micro-units = charges {}\n", c.name,
                             job["usage"]["cost_micros"].get<int64_t>(), usage_total);
  }

  // Balances: all sum to 0; the tenant paid exactly the charges (credit first), the platform got them.
  int64_t sum = 0;
  for (const auto& [account, micros] : balances) sum += micros;
  EXPECT_EQ(sum, 0);
  EXPECT_GT(total, kTrialCredit) << "the run should cost more than the credit";
  EXPECT_EQ(balances["platform:revenue"], total);
  EXPECT_EQ(balances["platform:grants"], -kTrialCredit);
  EXPECT_EQ(balances["tenant:" + tenant + ":credit:trial"], 0);
  EXPECT_EQ(balances["tenant:" + tenant + ":cash"], kTrialCredit - total);
  const J balance = Get("/v1/balance?tenant=" + tenant);
  EXPECT_EQ(balance["credit_micros"], 0) << balance.dump();
  EXPECT_EQ(balance["cash_micros"], kTrialCredit - total) << balance.dump();
  const J bill =
      Get("/v1/bill?tenant=" + tenant + "&period=" + charges.begin()->second["at"].get<std::string>().substr(0, 7));
  EXPECT_EQ(bill["usage_micros"], total) << bill.dump(2);
  EXPECT_EQ(bill["paid_from_credit_micros"], kTrialCredit) << bill.dump(2);
  int64_t billed_charges = 0;
  for (const J& line : bill["lines"]) billed_charges += line["charges"].get<int64_t>();
  EXPECT_EQ(billed_charges, 4) << bill.dump(2);
  absl::StatusOr<std::string> metrics = Client()->GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->find("\ngpugeek_ledger_imbalance_micros 0\n"), std::string::npos)
      << "gpugeek_ledger_imbalance_micros is not 0";
  for (const auto& [capacity, micros] : spend_by_capacity) {
    const std::regex sample(fmt::format(
        "\ngpugeek_spend_micros_total\\{{tenant=\"{}\",model=\"A100-SXM-80GB\",capacity_type=\"{}\"\\}} ([0-9.e+]+)\n",
        tenant, capacity));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*metrics, m, sample)) << capacity << "\n" << *metrics;
    EXPECT_EQ(std::stod(m[1]), static_cast<double>(micros)) << capacity;
  }
  std::cout << fmt::format("[ ledger ] {} entries, 4 charges, {} micro-units in all; outages", ledger.size(), total);
  for (const Outage& o : outages) std::cout << fmt::format(" {} ms", o.up - o.down);
  std::cout << "\n";
}

}  // namespace
}  // namespace gpugeek
