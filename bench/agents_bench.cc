// agents_bench: N simulated agents against one real control plane, under hostile user load.
//
//   build/bench/agents_bench --agents 1000 --duration 300 --followers 100 --slow-headers 100
//       --submitters 8 --out bench-results/agents
//   build/bench/agents_bench --sweep 100,250,500,1000,1500,2000 --duration 60 --out bench-results/agents
//
// Goal (issue: control plane at scale): 1,000 agents heartbeating every 1 s over HTTP keep-alive on a
// 2-core machine while users hammer the API, with no healthy node declared down. One run starts a real
// ControlPlaneServer in this process (127.0.0.1, port 0, SQLite in a temp dir, default heartbeat
// interval and node timeout) and drives it over loopback with:
//
//  - N agents (sim-0001 ...), one thread and one keep-alive connection each, registering an emulated
//    inventory (--gpus) at a jittered start and heartbeating every 1 s. They act like a fast real agent:
//    a new assignment is reported running on the next heartbeat and exited 0 (with a 3-byte log chunk)
//    on the one after; a cancelled one is reported killed by SIGTERM; a job whose command is not "true"
//    runs until cancelled and logs one line per heartbeat (the log followers' target).
//  - K submitters POSTing small 1-GPU jobs as fast as they can, on the user port.
//  - F log followers, each on one connection, long-polling the ranged log API
//    (GET /v1/jobs/{id}/logs?rank=0&offset=O&wait_ms=5000 -> {"next_offset","data_b64","complete"}) of a
//    long-running job; against a server without it (a text reply) they hold `follow=1` streams instead.
//  - S slow-header sockets on the user port, each sending an HTTP request head one byte every 2 s and
//    reconnecting when cut.
//  - A watcher listing the nodes every 2 s (GET /v1/nodes, paged when the server pages) that counts
//    every change of a sim node from ready to another state: a false node-down (all agents are alive).
//
// Heartbeat round trips are measured on the steady clock from send to decoded reply, failures
// included (at their elapsed time). "Holds" means: every agent registered, 0 false node-downs, 0 jobs
// requeued, heartbeat p99 <= --hold-p99-ms (100) and >= --hold-submissions (1,000) accepted submissions/s.
// With --check the exit status is 1 when any run does not hold (the CTest "bench" label runs it so).
//
// The bench shares the process (and the cores) with the server: it reports its own CPU (its threads'
// CLOCK_THREAD_CPUTIME_ID) apart from the server's (the process's getrusage minus the bench's), and
// the process RSS (VmRSS of /proc/self/status; the server's tables dominate it at large N).

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/strings/escaping.h"
#include "api/agent_protocol.h"
#include "auth/role.h"
#include "common/absl_fmt.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/table.h"
#include "controlplane/server.h"
#include "http/client.h"
#include "hw/emulated_discovery.h"
#include "sim/report.h"

namespace gpugeek::bench {
namespace {

using Steady = std::chrono::steady_clock;
using SteadyPoint = Steady::time_point;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kHeartbeatEvery = seconds(1);  // the server's default heartbeat interval
constexpr auto kNodePollEvery = seconds(2);
constexpr auto kSlowByteEvery = seconds(2);
constexpr int kLogWaitMs = 5000;
constexpr int kNodePageLimit = 500;
// The cursor query parameter of a paged GET /v1/nodes (the reply's "next"; as GET /v1/jobs's "after").
constexpr const char* kNodesCursorParam = "after";
constexpr const char* kQuickJob = "name: b\nresources: {accelerators: A100-80GB:1}\nrun: \"true\"\n";
constexpr const char* kFollowedJob = "name: follow\nresources: {accelerators: A100-80GB:1}\nrun: \"sleep infinity\"\n";
constexpr const char* kQuickRun = "true";

struct BenchOptions {
  std::vector<int> agents;  // one run per entry
  double duration_s = 30;
  int followers = 10;
  int slow_headers = 10;
  int submitters = 8;
  std::string gpus = "8xA100-SXM-80GB";
  std::string out;
  bool check = false;
  double hold_p99_ms = 100;
  double hold_submissions_per_s = 1000;
  uint64_t seed = 1;
};

struct RunResult {
  int agents = 0;
  int registered = 0;
  int64_t heartbeats = 0;  // sent in the window, answered or not
  int64_t heartbeat_errors = 0;
  double hb_p50_ms = 0, hb_p99_ms = 0, hb_max_ms = 0;
  int64_t false_downs = 0;
  int64_t node_polls = 0, node_poll_errors = 0;
  int64_t requeues = 0;
  int64_t jobs_finished = 0;  // exits the server acknowledged
  int64_t submissions = 0, submit_errors = 0;
  double submissions_per_s = 0;
  int64_t follower_reads = 0, follower_errors = 0;
  double follower_reads_per_s = 0;
  std::string follower_mode = "-";
  int64_t slow_cuts = 0;
  double rss_mib = 0;
  double bench_cores = 0, server_cores = 0;
  double window_s = 0, wall_s = 0;
  bool holds = false;
};

int64_t ThisThreadCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CPU nanoseconds of the bench's own threads, summed as each one ends.
std::atomic<int64_t> g_bench_cpu_ns{0};

// Adds the calling thread's CPU time to g_bench_cpu_ns when it goes out of scope.
class ThreadCpu {
 public:
  ~ThreadCpu() { g_bench_cpu_ns += ThisThreadCpuNs(); }
};

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// VmRSS of this process in MiB; 0 when /proc is unreadable.
double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

// Sleeps until `t` or until stop is requested; false when stopped.
bool SleepUntil(const std::stop_token& stop, SteadyPoint t) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(mu);
  return !cv.wait_until(lock, stop, t, [] { return false; }) && !stop.stop_requested();
}

double Ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// What every thread of one run shares. The window opens once the agents are registered.
struct RunShared {
  std::string agent_url;
  std::string user_url;
  std::string admin_token;                          // the users' calls (submissions, log follows) run as the admin
  std::string join_token;                           // good for every agent of the run
  std::atomic<int64_t> window_start_ns{INT64_MAX};  // Steady ns; INT64_MAX until the load starts
  int64_t window_ns = 0;
  std::atomic<int> registered{0};
  std::atomic<bool> registration_error_logged{false};  // the first failure is logged, not every retry

  bool InWindow(SteadyPoint t) const {
    const int64_t ns = t.time_since_epoch().count();
    const int64_t start = window_start_ns.load();
    return ns >= start && ns - start < window_ns;
  }
};

// One simulated agent: its registration, its keep-alive connection and the workloads it "runs".
class SimAgent {
 public:
  struct Stats {
    std::vector<float> rtt_ms;  // heartbeats sent in the window
    int64_t errors = 0;         // in the window
    int64_t finished = 0;       // exits acknowledged
  };

  SimAgent(int index, const hw::EmulateSpec& spec, RunShared& shared, uint64_t seed) : shared_(shared) {
    name_ = fmt::format("sim-{:04d}", index + 1);
    Rng rng(seed * 1'000'003 + static_cast<uint64_t>(index));
    instance_id_ = fmt::format("{:016x}{:016x}", rng.engine()(), rng.engine()());
    jitter_ = std::chrono::microseconds(rng.Uniform(1'000'000));
    const hw::HostInfo host{name_, 128, uint64_t{2} << 40, 2, ""};
    registration_.node = name_;
    registration_.address = "127.0.0.1";
    registration_.inventory = hw::BuildEmulatedInventory(spec, name_, host);
    registration_.instance_id = instance_id_;
    auto discovery = hw::EmulatedDiscovery::Create({.spec = spec.Canonical(), .host_name = name_, .host = host});
    if (discovery.ok() && (*discovery)->Discover().ok()) {
      if (auto s = (*discovery)->Sample(); s.ok()) samples_ = std::move(*s);
    }
  }

  void Run(const std::stop_token& stop) {
    ThreadCpu cpu;
    // Joins with the run's join token, then speaks with its own node credential, as a real agent.
    auto client = http::Client::Create({.base_url = shared_.agent_url,
                                        .connect_timeout = seconds(3),
                                        .read_timeout = seconds(10),
                                        .bearer_token = shared_.join_token});
    if (!client.ok()) return;
    client_ = std::move(*client);
    SteadyPoint next = Steady::now() + jitter_;
    if (!SleepUntil(stop, next)) return;
    while (!Register()) {
      next += kHeartbeatEvery;
      if (!SleepUntil(stop, next)) return;
    }
    shared_.registered++;
    for (;;) {
      next += kHeartbeatEvery;
      // A heartbeat that took longer than the interval delays the next one, as in a real agent.
      next = std::max(next, Steady::now());
      if (!SleepUntil(stop, next)) return;
      Beat();
    }
  }

  const Stats& stats() const { return stats_; }

 private:
  // One assignment as this agent sees it. stage: 0 = seen, 1 = running reported, 2 = exit reported.
  struct Work {
    int64_t epoch = 0;
    int node_rank = 0;
    bool quick = true;  // `run: true`: exits at once; anything else runs until cancelled
    bool cancel = false;
    int stage = 0;
    uint64_t log_offset = 0;
    int ticks = 0;
  };

  bool Register() {
    auto reply = client_->Post("/v1/agents/register", api::ToJson(registration_));
    if (!reply.ok() && !shared_.registration_error_logged.exchange(true)) {
      spdlog::error("agents_bench: {} cannot register: {}", name_, reply.status());
    }
    if (reply.ok() && reply->contains("node_credential")) {
      auto client = http::Client::Create({.base_url = shared_.agent_url,
                                          .connect_timeout = seconds(3),
                                          .read_timeout = seconds(10),
                                          .bearer_token = (*reply)["node_credential"].get<std::string>()});
      if (!client.ok()) return false;
      client_ = std::move(*client);
    }
    return reply.ok();
  }

  void Beat() {
    api::Heartbeat hb;
    hb.node = name_;
    hb.instance_id = instance_id_;
    hb.samples = samples_;
    std::map<std::string, int> sent_stage;  // what this heartbeat reports, by job id
    std::map<std::string, size_t> sent_log;
    for (auto& [job_id, w] : work_) {
      api::WorkloadReport r;
      r.job_id = job_id;
      r.epoch = w.epoch;
      r.node_rank = w.node_rank;
      api::LogChunk log;
      log.job_id = job_id;
      log.node_rank = w.node_rank;
      log.offset = w.log_offset;
      log.epoch = w.epoch;
      if (w.cancel || (w.quick && w.stage >= 1)) {
        r.phase = api::WorkloadPhase::kExited;
        if (w.cancel) {
          r.term_signal = 15;
        } else {
          r.exit_code = 0;
        }
        if (w.quick && w.stage == 1 && !w.cancel) log.data = "ok\n";
        sent_stage[job_id] = 2;
      } else {
        r.phase = api::WorkloadPhase::kRunning;
        if (!w.quick) log.data = fmt::format("tick {}\n", w.ticks);
        sent_stage[job_id] = 1;
      }
      hb.workloads.push_back(std::move(r));
      if (!log.data.empty()) {
        sent_log[job_id] = log.data.size();
        hb.logs.push_back(std::move(log));
      }
    }
    const SteadyPoint sent = Steady::now();
    auto reply = client_->Post("/v1/agents/" + name_ + "/heartbeat", api::ToJson(hb));
    absl::StatusOr<api::HeartbeatReply> decoded =
        reply.ok() ? api::HeartbeatReplyFromJson(*reply) : absl::StatusOr<api::HeartbeatReply>(reply.status());
    const bool in_window = shared_.InWindow(sent);
    if (in_window) stats_.rtt_ms.push_back(static_cast<float>(Ms(Steady::now() - sent)));
    if (!decoded.ok()) {
      if (in_window) stats_.errors++;
      return;
    }
    for (const auto& [job_id, stage] : sent_stage) {
      Work& w = work_.at(job_id);
      if (stage == 2 && w.stage < 2) stats_.finished++;
      w.stage = std::max(w.stage, stage);
      if (auto it = sent_log.find(job_id); it != sent_log.end()) {
        w.log_offset += it->second;
        w.ticks++;
      }
    }
    if (decoded->reregister) {
      work_.clear();
      (void)Register();
      return;
    }
    std::map<std::string, Work> next;
    for (const api::Assignment& a : decoded->assignments) {
      // A job's members on one node are told apart by rank; the bench places 1-node jobs only.
      Work w;
      if (auto it = work_.find(a.job_id); it != work_.end() && it->second.epoch == a.epoch) w = it->second;
      w.epoch = a.epoch;
      w.node_rank = a.node_rank;
      w.quick = a.run == kQuickRun;
      w.cancel = w.cancel || a.cancel;
      next[a.job_id] = w;
    }
    work_ = std::move(next);
  }

  RunShared& shared_;
  std::string name_;
  std::string instance_id_;
  Steady::duration jitter_{};
  api::Registration registration_;
  std::vector<hw::GpuSample> samples_;
  std::unique_ptr<http::Client> client_;
  std::map<std::string, Work> work_;  // by job id
  Stats stats_;
};

// Submits kQuickJob as fast as the server takes it.
void Submitter(const std::stop_token& stop, const RunShared& shared, std::atomic<int64_t>& ok,
               std::atomic<int64_t>& errors) {
  ThreadCpu cpu;
  auto client = http::Client::Create(
      {.base_url = shared.user_url, .read_timeout = seconds(10), .bearer_token = shared.admin_token});
  if (!client.ok()) return;
  const nlohmann::json body = {{"spec_yaml", kQuickJob}};
  while (!stop.stop_requested()) {
    if ((*client)->Post("/v1/jobs", body).ok()) {
      ok++;
    } else {
      errors++;
      std::this_thread::sleep_for(milliseconds(10));  // a refused or cut call: no busy loop
    }
  }
}

// Long-polls the ranged log API of `job_id` (or, against a server without it, holds follow=1 streams).
// `client` is shared with the main thread, which calls stop() on it to end a wait early.
void Follower(const std::stop_token& stop, httplib::Client& client, const std::string& job_id,
              std::atomic<int64_t>& reads, std::atomic<int64_t>& errors, std::atomic<int>& legacy) {
  ThreadCpu cpu;
  uint64_t offset = 0;
  bool ranged = true;
  while (!stop.stop_requested()) {
    if (ranged) {
      auto res = client.Get(fmt::format("/v1/jobs/{}/logs?rank=0&offset={}&wait_ms={}", job_id, offset, kLogWaitMs));
      if (!res || res->status != 200) {
        if (!stop.stop_requested()) errors++;
        std::this_thread::sleep_for(milliseconds(100));
        continue;
      }
      const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("next_offset") && j["next_offset"].is_number_unsigned()) {
        offset = j["next_offset"].get<uint64_t>();
        reads++;
        continue;
      }
      ranged = false;  // a text reply: the server has no ranged reads
      legacy++;
    }
    auto res = client.Get(fmt::format("/v1/jobs/{}/logs?rank=0&follow=1", job_id), [&](const char*, size_t) {
      reads++;
      return !stop.stop_requested();
    });
    if (!res && res.error() != httplib::Error::Canceled && !stop.stop_requested()) {
      errors++;
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
}

// Holds `count` connections to the user port, each sending a request head one byte every 2 s and
// reconnecting when the server cuts it (or answers). Returns how many times the server cut one.
int64_t SlowHeaders(const std::stop_token& stop, int port, int count) {
  ThreadCpu cpu;
  const std::string head = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  struct Conn {
    int fd = -1;
    size_t sent = 0;
    SteadyPoint next;
  };
  std::vector<Conn> conns(static_cast<size_t>(count));
  const SteadyPoint start = Steady::now();
  for (int i = 0; i < count; ++i) conns[i].next = start + kSlowByteEvery * i / std::max(count, 1);
  int64_t cuts = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto close_conn = [&](Conn& c) {
    ::close(c.fd);
    c.fd = -1;
    c.sent = 0;
  };
  while (SleepUntil(stop, Steady::now() + milliseconds(50))) {
    const SteadyPoint now = Steady::now();
    for (Conn& c : conns) {
      if (c.next > now) continue;
      c.next += kSlowByteEvery;
      if (c.fd < 0) {
        c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        // Linux bounds a blocking connect by SO_SNDTIMEO: a full accept backlog must not stall the others.
        timeval tv{.tv_sec = 0, .tv_usec = 200'000};
        ::setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
          close_conn(c);
          continue;
        }
      } else {
        char buf[512];
        const ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || n > 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {  // closed, answered or reset
          cuts++;
          close_conn(c);
          continue;
        }
      }
      const char byte = c.sent < head.size() ? head[c.sent] : 'a';
      if (::send(c.fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
        cuts++;
        close_conn(c);
        continue;
      }
      c.sent++;
    }
  }
  for (Conn& c : conns) {
    if (c.fd >= 0) ::close(c.fd);
  }
  return cuts;
}

// Lists the nodes every 2 s and counts sim nodes leaving "ready". The listing goes over the user port
// (paged when the server pages: "next" is the cursor, or a path); when that fails the control plane is
// asked in-process, so a starved user port does not blind the count.
class NodeWatcher {
 public:
  NodeWatcher(const RunShared& shared, controlplane::ControlPlane& cp) : shared_(shared), cp_(cp) {}

  void Run(const std::stop_token& stop) {
    ThreadCpu cpu;
    auto client = http::Client::Create(
        {.base_url = shared_.user_url, .read_timeout = seconds(5), .bearer_token = shared_.admin_token});
    if (!client.ok()) return;
    client_ = std::move(*client);
    SteadyPoint next = Steady::now();
    do {
      Poll();
      next += kNodePollEvery;
    } while (SleepUntil(stop, next));
    Poll();
  }

  int64_t false_downs() const { return false_downs_; }
  int64_t polls() const { return polls_; }
  int64_t errors() const { return errors_; }

 private:
  void Poll() {
    polls_++;
    std::map<std::string, std::string> states;
    if (!ListOverHttp(states)) {
      errors_++;
      states.clear();
      for (const auto& n : cp_.Nodes()) states[n.registration.node] = n.state;
    }
    for (const auto& [name, state] : states) {
      if (!name.starts_with("sim-")) continue;
      auto [it, fresh] = last_.try_emplace(name, state);
      if (!fresh && it->second == "ready" && state != "ready") {
        false_downs_++;
        spdlog::warn("agents_bench: {} went {} while its agent heartbeats", name, state);
      }
      it->second = state;
    }
  }

  bool ListOverHttp(std::map<std::string, std::string>& states) {
    std::string path = fmt::format("/v1/nodes?limit={}", kNodePageLimit);
    for (int page = 0; page < 1000; ++page) {
      auto j = client_->Get(path);
      if (!j.ok() || !j->contains("nodes") || !(*j)["nodes"].is_array()) return false;
      for (const auto& n : (*j)["nodes"]) states[n.value("name", "")] = n.value("state", "");
      const auto next = j->find("next");
      if (next == j->end() || !next->is_string() || next->get<std::string>().empty()) return true;
      const std::string cursor = next->get<std::string>();
      path = cursor.starts_with("/")
                 ? cursor
                 : fmt::format("/v1/nodes?limit={}&{}={}", kNodePageLimit, kNodesCursorParam, http::UrlEncode(cursor));
    }
    return false;
  }

  const RunShared& shared_;
  controlplane::ControlPlane& cp_;
  std::unique_ptr<http::Client> client_;
  std::map<std::string, std::string> last_;
  int64_t false_downs_ = 0, polls_ = 0, errors_ = 0;
};

// Sum of gpugeek_job_transitions_total{to="PENDING"}: a job goes back to PENDING only when requeued.
int64_t Requeues(controlplane::ControlPlaneServer& server) {
  const std::string text = server.metrics().Render();
  int64_t total = 0;
  size_t pos = 0;
  while ((pos = text.find("gpugeek_job_transitions_total{", pos)) != std::string::npos) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol;
    if (line.find("to=\"PENDING\"") == std::string::npos) continue;
    total += static_cast<int64_t>(std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr));
  }
  return total;
}

double Percentile(const std::vector<float>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// Submits the job the followers read and waits (bounded) until an agent runs it; its id.
std::string StartFollowedJob(const std::string& user_url, const std::string& token) {
  auto client = http::Client::Create({.base_url = user_url, .read_timeout = seconds(10), .bearer_token = token});
  if (!client.ok()) return "";
  auto job = (*client)->Post("/v1/jobs", {{"spec_yaml", kFollowedJob}});
  if (!job.ok()) {
    spdlog::error("agents_bench: cannot submit the followed job: {}", job.status());
    return "";
  }
  const std::string id = (*job)["id"];
  for (int i = 0; i < 100; ++i) {
    auto j = (*client)->Get("/v1/jobs/" + id);
    if (j.ok() && (*j)["state"] == "RUNNING") return id;
    std::this_thread::sleep_for(milliseconds(100));
  }
  spdlog::warn("agents_bench: the followed job {} is not RUNNING after 10 s; followers wait on it anyway", id);
  return id;
}

absl::StatusOr<RunResult> RunOnce(const BenchOptions& o, int n) {
  RunResult result;
  result.agents = n;
  ASSIGN_OR_RETURN(const hw::EmulateSpec spec, hw::ParseEmulateSpec(o.gpus));
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("gpugeek_agents_bench_{}_{}", ::getpid(), n);
  std::filesystem::remove_all(dir);
  const SteadyPoint run_start = Steady::now();
  const double cpu_start = ProcessCpuSeconds();
  const int64_t bench_cpu_start = g_bench_cpu_ns.load();
  const int64_t main_cpu_start = ThisThreadCpuNs();  // the main thread builds the agents' inventories

  controlplane::ServerOptions so;
  so.port = 0;
  so.agent_port = 0;
  so.data_dir = dir.string();
  ASSIGN_OR_RETURN(auto server, controlplane::ControlPlaneServer::Start(so));
  RunShared shared;
  shared.user_url = server->url();
  shared.admin_token = server->admin_token();
  {
    auto join =
        server->nodes().CreateJoinToken({.user = "bench", .role = auth::Role::kAdmin}, "agents_bench", std::nullopt, n);
    if (!join.ok()) return join.status();
    shared.join_token = join->text;
  }
  shared.agent_url = server->agent_url();  // the agents' own listener (server->url() on a server without one)
  shared.window_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(o.duration_s)).count();

  std::vector<std::unique_ptr<SimAgent>> agents;
  agents.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) agents.push_back(std::make_unique<SimAgent>(i, spec, shared, o.seed));
  std::stop_source agents_stop;
  std::vector<std::jthread> agent_threads;
  agent_threads.reserve(agents.size());
  for (auto& a : agents) {
    agent_threads.emplace_back([a = a.get(), stop = agents_stop.get_token()] { a->Run(stop); });
  }
  // Registration: jittered over the first second; a slow server gets up to 30 s more (the load starts then
  // anyway, and `registered` tells).
  const SteadyPoint reg_deadline = Steady::now() + seconds(30);
  while (shared.registered.load() < n && Steady::now() < reg_deadline) std::this_thread::sleep_for(milliseconds(50));
  result.registered = shared.registered.load();
  fmt::print(stderr, "agents_bench: {}/{} agents registered in {:.1f} s\n", result.registered, n,
             Ms(Steady::now() - run_start) / 1000);

  const std::string followed = StartFollowedJob(shared.user_url, shared.admin_token);
  fmt::print(stderr, "agents_bench: load window opens at {:.1f} s\n", Ms(Steady::now() - run_start) / 1000);

  // The load window.
  const SteadyPoint window_start = Steady::now();
  shared.window_start_ns = window_start.time_since_epoch().count();
  std::stop_source load_stop;
  NodeWatcher watcher(shared, server->control_plane());
  std::jthread watcher_thread([&watcher, stop = load_stop.get_token()] { watcher.Run(stop); });
  std::atomic<int64_t> submitted{0}, submit_errors{0}, reads{0}, read_errors{0}, slow_cuts{0};
  std::atomic<int> legacy{0};
  std::vector<std::jthread> load_threads;
  for (int i = 0; i < o.submitters; ++i) {
    load_threads.emplace_back([&, stop = load_stop.get_token()] { Submitter(stop, shared, submitted, submit_errors); });
  }
  std::vector<std::unique_ptr<httplib::Client>> follower_clients;
  for (int i = 0; i < o.followers && !followed.empty(); ++i) {
    auto c = std::make_unique<httplib::Client>(shared.user_url);
    c->set_bearer_token_auth(shared.admin_token);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_connection_timeout(seconds(3));
    c->set_read_timeout(std::chrono::milliseconds(kLogWaitMs) + seconds(5));
    load_threads.emplace_back(
        [&, c = c.get(), stop = load_stop.get_token()] { Follower(stop, *c, followed, reads, read_errors, legacy); });
    follower_clients.push_back(std::move(c));
  }
  if (o.slow_headers > 0) {
    load_threads.emplace_back([&, port = server->port(), stop = load_stop.get_token()] {
      slow_cuts = SlowHeaders(stop, port, o.slow_headers);
    });
  }
  SleepUntil(std::stop_token(), window_start + std::chrono::nanoseconds(shared.window_ns));
  const double window_s = Ms(Steady::now() - window_start) / 1000;

  load_stop.request_stop();
  for (auto& c : follower_clients) c->stop();
  for (auto& t : load_threads) t.join();
  watcher_thread.join();
  result.requeues = Requeues(*server);
  result.rss_mib = RssMiB();
  agents_stop.request_stop();
  for (auto& t : agent_threads) t.join();
  const double cpu_s = ProcessCpuSeconds() - cpu_start;
  const double bench_cpu_s =
      static_cast<double>(g_bench_cpu_ns.load() - bench_cpu_start + ThisThreadCpuNs() - main_cpu_start) / 1e9;
  const SteadyPoint stopping = Steady::now();
  server->Stop();
  server.reset();
  fmt::print(stderr, "agents_bench: load and agents stopped in {:.1f} s, server in {:.1f} s\n",
             Ms(stopping - window_start) / 1000 - window_s, Ms(Steady::now() - stopping) / 1000);
  std::filesystem::remove_all(dir);

  std::vector<float> rtt;
  for (const auto& a : agents) {
    rtt.insert(rtt.end(), a->stats().rtt_ms.begin(), a->stats().rtt_ms.end());
    result.heartbeat_errors += a->stats().errors;
    result.jobs_finished += a->stats().finished;
  }
  std::sort(rtt.begin(), rtt.end());
  result.heartbeats = static_cast<int64_t>(rtt.size());
  result.hb_p50_ms = Percentile(rtt, 0.50);
  result.hb_p99_ms = Percentile(rtt, 0.99);
  result.hb_max_ms = rtt.empty() ? 0 : rtt.back();
  result.false_downs = watcher.false_downs();
  result.node_polls = watcher.polls();
  result.node_poll_errors = watcher.errors();
  result.submissions = submitted.load();
  result.submit_errors = submit_errors.load();
  result.window_s = window_s;
  result.submissions_per_s = static_cast<double>(result.submissions) / window_s;
  result.follower_reads = reads.load();
  result.follower_errors = read_errors.load();
  result.follower_reads_per_s = static_cast<double>(result.follower_reads) / window_s;
  result.follower_mode = o.followers == 0 ? "-" : legacy.load() > 0 ? "follow=1" : "ranged";
  result.slow_cuts = slow_cuts.load();
  result.wall_s = Ms(Steady::now() - run_start) / 1000;
  const double run_s = Ms(Steady::now() - run_start) / 1000;
  result.bench_cores = bench_cpu_s / run_s;
  result.server_cores = std::max(0.0, cpu_s - bench_cpu_s) / run_s;
  result.holds = result.registered == n && result.false_downs == 0 && result.requeues == 0 && result.heartbeats > 0 &&
                 result.hb_p99_ms <= o.hold_p99_ms && result.submissions_per_s >= o.hold_submissions_per_s;
  return result;
}

const std::vector<std::string>& Columns() {
  static const std::vector<std::string> kColumns = {
      "agents",      "registered",   "heartbeats",     "hb_errors",   "hb_p50_ms", "hb_p99_ms",
      "hb_max_ms",   "false_downs",  "node_poll_errs", "requeues",    "jobs_done", "submissions_per_s",
      "submit_errs", "follow_mode",  "follow_reads_s", "follow_errs", "slow_cuts", "rss_mib",
      "bench_cores", "server_cores", "window_s",       "wall_s",      "holds"};
  return kColumns;
}

std::vector<std::string> Row(const RunResult& r) {
  return {fmt::format("{}", r.agents),
          fmt::format("{}", r.registered),
          fmt::format("{}", r.heartbeats),
          fmt::format("{}", r.heartbeat_errors),
          fmt::format("{:.1f}", r.hb_p50_ms),
          fmt::format("{:.1f}", r.hb_p99_ms),
          fmt::format("{:.1f}", r.hb_max_ms),
          fmt::format("{}", r.false_downs),
          fmt::format("{}", r.node_poll_errors),
          fmt::format("{}", r.requeues),
          fmt::format("{}", r.jobs_finished),
          fmt::format("{:.0f}", r.submissions_per_s),
          fmt::format("{}", r.submit_errors),
          r.follower_mode,
          fmt::format("{:.1f}", r.follower_reads_per_s),
          fmt::format("{}", r.follower_errors),
          fmt::format("{}", r.slow_cuts),
          fmt::format("{:.0f}", r.rss_mib),
          fmt::format("{:.2f}", r.bench_cores),
          fmt::format("{:.2f}", r.server_cores),
          fmt::format("{:.1f}", r.window_s),
          fmt::format("{:.1f}", r.wall_s),
          r.holds ? "yes" : "no"};
}

absl::Status WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(fmt::format("cannot write {}", path.string()));
  return absl::OkStatus();
}

// agents.csv, heartbeat_p99.svg and submissions.svg under `dir` (created).
absl::Status WriteOutputs(const std::string& dir, const std::vector<RunResult>& results) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(fmt::format("cannot create {}: {}", dir, ec.message()));
  std::string csv;
  for (size_t i = 0; i < Columns().size(); ++i) csv += (i ? "," : "") + Columns()[i];
  csv += "\n";
  for (const RunResult& r : results) {
    const auto row = Row(r);
    for (size_t i = 0; i < row.size(); ++i) csv += (i ? "," : "") + row[i];
    csv += "\n";
  }
  const std::filesystem::path root(dir);
  RETURN_IF_ERROR(WriteText(root / "agents.csv", csv));
  sim::Series p50{"heartbeat p50", {}}, p99{"heartbeat p99", {}}, subs{"submissions/s", {}};
  double x_max = 1;
  for (const RunResult& r : results) {
    p50.points.emplace_back(r.agents, r.hb_p50_ms);
    p99.points.emplace_back(r.agents, r.hb_p99_ms);
    subs.points.emplace_back(r.agents, r.submissions_per_s);
    x_max = std::max(x_max, static_cast<double>(r.agents));
  }
  RETURN_IF_ERROR(WriteText(root / "heartbeat_p99.svg",
                            sim::LineChartSvg("Heartbeat round trip vs agents (1 s heartbeats, hostile load)", "agents",
                                              "ms", {p50, p99}, 0, x_max)));
  return WriteText(root / "submissions.svg",
                   sim::LineChartSvg("Accepted submissions/s vs agents", "agents", "submissions/s", {subs}, 0, x_max));
}

int Main(int argc, char** argv) {
  BenchOptions o;
  int agents = 100;
  std::vector<int> sweep;
  bool verbose = false;
  CLI::App app{"agents_bench: N simulated agents against one real control plane, under hostile user load",
               "agents_bench"};
  app.add_option("--agents", agents, "simulated agents (one run)")->check(CLI::Range(1, 100000));
  app.add_option("--sweep", sweep, "comma list of agent counts, one run each (e.g. 100,250,500,1000)")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  app.add_option("--duration", o.duration_s, "seconds of load per run, after registration")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--followers", o.followers, "log followers (long-polls on the user port)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--slow-headers", o.slow_headers, "slow-header sockets on the user port")
      ->check(CLI::Range(0, 100000));
  app.add_option("--submitters", o.submitters, "threads submitting jobs as fast as they can")
      ->check(CLI::Range(0, 1000));
  app.add_option("--gpus", o.gpus, "emulate spec of each agent's node");
  app.add_option("--out", o.out, "folder for agents.csv, heartbeat_p99.svg, submissions.svg");
  app.add_option("--hold-p99-ms", o.hold_p99_ms, "holds: heartbeat p99 at most this (ms)");
  app.add_option("--hold-submissions", o.hold_submissions_per_s, "holds: at least this many submissions/s");
  app.add_option("--seed", o.seed, "seed of the agents' start jitter");
  app.add_flag("--check", o.check, "exit 1 when a run does not hold");
  app.add_flag("-v,--verbose", verbose, "the server's info logs too");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_level(verbose ? spdlog::level::info : spdlog::level::warn);
  o.agents = sweep.empty() ? std::vector<int>{agents} : sweep;

  std::vector<RunResult> results;
  for (int n : o.agents) {
    fmt::print(stderr, "agents_bench: {} agents, {} s, {} submitters, {} followers, {} slow-header sockets\n", n,
               o.duration_s, o.submitters, o.followers, o.slow_headers);
    auto r = RunOnce(o, n);
    if (!r.ok()) {
      fmt::print(stderr, "agents_bench: {}\n", r.status());
      return 2;
    }
    results.push_back(*r);
  }
  // The terminal shows the headline columns; agents.csv has them all.
  const std::set<std::string> csv_only = {"node_poll_errs", "jobs_done", "submit_errs", "follow_mode",
                                          "follow_errs",    "slow_cuts", "window_s"};
  std::vector<size_t> shown;
  std::vector<std::string> header;
  for (size_t i = 0; i < Columns().size(); ++i) {
    if (csv_only.contains(Columns()[i])) continue;
    shown.push_back(i);
    header.push_back(Columns()[i]);
  }
  TextTable table(header);
  for (size_t i = 0; i + 1 < header.size(); ++i) table.AlignRight(i);
  for (const RunResult& r : results) {
    const auto row = Row(r);
    std::vector<std::string> cells;
    for (size_t i : shown) cells.push_back(row[i]);
    table.AddRow(std::move(cells));
  }
  fmt::print("{}", table.Render());
  const RunResult* best = nullptr;
  for (const RunResult& r : results) {
    if (r.holds && (best == nullptr || r.agents > best->agents)) best = &r;
  }
  fmt::print(
      "holds = every agent registered, 0 false node-downs, 0 requeues, heartbeat p99 <= {} ms, >= {} "
      "submissions/s\nlargest N that holds: {}\n",
      o.hold_p99_ms, o.hold_submissions_per_s, best ? fmt::format("{}", best->agents) : std::string("none"));
  if (!o.out.empty()) {
    if (absl::Status s = WriteOutputs(o.out, results); !s.ok()) {
      fmt::print(stderr, "agents_bench: {}\n", s);
      return 2;
    }
    fmt::print("wrote {}/agents.csv, heartbeat_p99.svg, submissions.svg\n", o.out);
  }
  if (o.check && std::any_of(results.begin(), results.end(), [](const RunResult& r) { return !r.holds; })) return 1;
  return 0;
}

}  // namespace
}  // namespace gpugeek::bench

int main(int argc, char** argv) { return gpugeek::bench::Main(argc, argv); }
