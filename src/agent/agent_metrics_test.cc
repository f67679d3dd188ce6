// The agent's metrics (docs/metrics.md, "Agent"): an Agent with emulated GPUs, or NVML over the fake
// libnvidia-ml, heartbeating to a real HTTP server on loopback; the registry rendered and checked line by
// line; and MetricsListener serving it over a socket.
#include "agent/agent_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/executor_test_util.h"
#include "agent/metrics_listener.h"
#include "api/agent_protocol.h"
#include "common/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/client.h"
#include "http/server.h"
#include "hw/emulated_discovery.h"
#include "hw/nvml_discovery.h"
#include "hw/testing/script_file.h"
#include "metrics/registry.h"

namespace gpugeek::agent {
namespace {

using ::gpugeek::agent::testing::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// The control plane's two agent endpoints: registrations recorded, heartbeats answered with the
// scripted assignments.
class StubControlPlane {
 public:
  StubControlPlane() {
    auto server = http::Server::Create({.host = "127.0.0.1", .port = 0, .threads = 2});
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->Route("POST", "/v1/agents/register", [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
      auto j = r.JsonBody();
      if (!j.ok()) return j.status();
      auto reg = api::RegistrationFromJson(*j);
      if (!reg.ok()) return reg.status();
      std::lock_guard<std::mutex> lock(mu_);
      registrations_.push_back(*reg);
      return http::Reply::Json(api::ToJson(api::RegistrationReply{}));
    });
    server_->Route("POST", "/v1/agents/{node}/heartbeat",
                   [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
                     auto j = r.JsonBody();
                     if (!j.ok()) return j.status();
                     if (auto hb = api::HeartbeatFromJson(*j); !hb.ok()) return hb.status();
                     std::lock_guard<std::mutex> lock(mu_);
                     if (fail_ > 0) {
                       --fail_;
                       return absl::UnavailableError("scripted failure");
                     }
                     return http::Reply::Json(api::ToJson(api::HeartbeatReply{.assignments = assignments_}));
                   });
    EXPECT_TRUE(server_->Start().ok());
  }
  std::string url() const { return server_->url(); }
  void SetAssignments(std::vector<api::Assignment> a) {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_ = std::move(a);
  }
  void FailHeartbeats(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_ = n;
  }
  std::vector<api::Registration> registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }

 private:
  std::unique_ptr<http::Server> server_;
  mutable std::mutex mu_;
  std::vector<api::Assignment> assignments_;
  std::vector<api::Registration> registrations_;
  int fail_ = 0;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The series of `name` (sample lines starting with "name{" or "name "), for absence checks.
std::vector<std::string> Series(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& l : Lines(text)) {
    if (l.starts_with(name + "{") || l.starts_with(name + " ")) out.push_back(l);
  }
  return out;
}

// The label set of one GPU as the agent writes it.
std::string GpuLabels(const std::string& node, const hw::GpuDevice& d) {
  return fmt::format(R"(node="{}",gpu="{}",uuid="{}",model="{}",vendor="{}")", node, d.index, d.uuid,
                     d.model_id.empty() ? d.name : d.model_id, hw::VendorName(d.vendor));
}

// 2023-11-14T22:13:20Z.
constexpr TimePoint kNow{std::chrono::seconds(1'700'000'000)};

class AgentMetricsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Agent> MakeAgent(hw::Discovery* discovery, const std::string& node = "n1") {
    auto agent = Agent::Create({.server_url = cp_.url(),
                                .join_token = "ggj_0123456789abcdef_" + std::string(43, 'J'),
                                .node = node,
                                .address = "10.0.0.7",
                                .discovery = discovery,
                                .data_dir = dir_.path(),
                                .cgroup_limits = false,
                                .clock = &clock_,
                                .metrics = &registry_});
    EXPECT_TRUE(agent.ok()) << agent.status();
    return agent.ok() ? std::move(*agent) : nullptr;
  }
  std::unique_ptr<hw::EmulatedDiscovery> Emulate(const std::string& spec) {
    auto d = hw::EmulatedDiscovery::Create({.spec = spec, .host_name = "n1"});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  TempDir dir_;
  StubControlPlane cp_;
  FakeClock clock_{kNow};
  metrics::Registry registry_;
};

TEST_F(AgentMetricsTest, EmulatedGpusAndHeartbeats) {
  auto discovery = Emulate("2xA100-SXM-80GB");
  auto agent = MakeAgent(discovery.get());
  ASSERT_NE(agent, nullptr);
  const hw::GpuDevice& g0 = agent->inventory().gpus[0];
  const hw::GpuDevice& g1 = agent->inventory().gpus[1];
  const std::string l0 = GpuLabels("n1", g0);
  const std::string l1 = GpuLabels("n1", g1);
  ASSERT_TRUE(g0.uuid.starts_with("GPU-emu-")) << g0.uuid;
  EXPECT_THAT(l0, HasSubstr(R"(model="A100-SXM-80GB",vendor="nvidia")"));

  // Before any heartbeat: what the inventory says, nothing sampled yet (absent, not zero).
  std::string text = registry_.Render();
  auto lines = Lines(text);
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_memory_total_bytes{{{}}} 85899345920", l0)));
  EXPECT_THAT(lines, Contains(fmt::format(R"(gpugeek_gpu_info{{{},name="{}",driver="emulated"}} 1)", l1, g1.name)));
  EXPECT_THAT(Series(text, "gpugeek_gpu_utilization_ratio"), ::testing::IsEmpty());
  EXPECT_THAT(Series(text, "gpugeek_gpu_healthy"), ::testing::IsEmpty());
  EXPECT_THAT(Series(text, "gpugeek_agent_last_heartbeat_success_timestamp_seconds"), ::testing::IsEmpty());
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="ok"} 0)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_fenced_total{node="n1"} 0)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_build_info{node="n1",version="0.1.0"} 1)"));
  EXPECT_THAT(lines, Contains("# TYPE gpugeek_gpu_ecc_uncorrected_errors_total counter"));
  EXPECT_THAT(lines, Contains("# TYPE gpugeek_gpu_xid_errors_total counter"));
  EXPECT_THAT(lines, Contains("# TYPE gpugeek_agent_heartbeat_duration_seconds histogram"));

  // One heartbeat: the emulator's idle sample (0 % busy, nothing used, 30 C, a tenth of the 400 W TDP).
  ASSERT_TRUE(agent->Tick().ok());
  text = registry_.Render();
  lines = Lines(text);
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_utilization_ratio{{{}}} 0", l0)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_memory_used_bytes{{{}}} 0", l0)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_temperature_celsius{{{}}} 30", l0)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_power_watts{{{}}} 40", l0)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_ecc_uncorrected_errors_total{{{}}} 0", l0)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_retired_pages{{{}}} 0", l0)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_healthy{{{}}} 1", l1)));
  EXPECT_THAT(Series(text, "gpugeek_gpu_xid_errors_total"), ::testing::IsEmpty());
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="ok"} 1)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="error"} 0)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeat_duration_seconds_count{node="n1"} 1)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeat_duration_seconds_bucket{node="n1",le="+Inf"} 1)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_last_heartbeat_success_timestamp_seconds{node="n1"} 1700000000)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_workloads{node="n1"} 0)"));

  // GPU 1 gets busy, then an XID and ECC errors; every heartbeat's sample counts its XIDs.
  hw::GpuSample busy;
  busy.telemetry = {.utilization_percent = 55,
                    .memory_used_bytes = 42'949'672'960,
                    .temperature_celsius = 71,
                    .power_milliwatts = 312'500};
  busy.health.ecc_uncorrected = 3;
  busy.health.retired_pages = 2;
  busy.health.xid_errors = {79};
  ASSERT_TRUE(discovery->SetSample(1, busy).ok());
  clock_.Advance(1500ms);
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  lines = Lines(registry_.Render());
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_utilization_ratio{{{}}} 0.55", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_memory_used_bytes{{{}}} 42949672960", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_temperature_celsius{{{}}} 71", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_power_watts{{{}}} 312.5", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_ecc_uncorrected_errors_total{{{}}} 3", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_retired_pages{{{}}} 2", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_healthy{{{}}} 0", l1)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_healthy{{{}}} 1", l0)));
  EXPECT_THAT(lines, Contains(fmt::format(R"(gpugeek_gpu_xid_errors_total{{{},xid="79"}} 2)", l1)));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="ok"} 3)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_last_heartbeat_success_timestamp_seconds{node="n1"} 1700000001.5)"));

  // A heartbeat the server refuses counts as an error and leaves the last success where it was.
  cp_.FailHeartbeats(1);
  clock_.Advance(1s);
  EXPECT_FALSE(agent->Tick().ok());
  lines = Lines(registry_.Render());
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="ok"} 3)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="error"} 1)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_heartbeat_duration_seconds_count{node="n1"} 4)"));
  EXPECT_THAT(lines, Contains(R"(gpugeek_agent_last_heartbeat_success_timestamp_seconds{node="n1"} 1700000001.5)"));

  // The registration announced no metrics address (none was set).
  ASSERT_EQ(cp_.registrations().size(), 1u);
  EXPECT_EQ(cp_.registrations()[0].metrics_address, "");
}

TEST_F(AgentMetricsTest, WorkloadsAndTheirExitsByOutcome) {
  auto discovery = Emulate("2xA100-SXM-80GB");
  auto agent = MakeAgent(discovery.get());
  ASSERT_NE(agent, nullptr);
  cp_.SetAssignments({{.job_id = "ok", .epoch = 1, .run = "exit 0"},
                      {.job_id = "bad", .epoch = 1, .run = "exit 3"},
                      {.job_id = "long", .epoch = 1, .run = "sleep 30", .grace_ms = 100},
                      {.job_id = "nogpu", .epoch = 1, .gpu_uuids = {"GPU-not-here"}, .run = "true"}});
  ASSERT_TRUE(agent->Tick().ok());
  const auto value_of = [&](const std::string& series) {
    for (const std::string& l : Lines(registry_.Render())) {
      if (l.starts_with(series + " ")) return l.substr(series.size() + 1);
    }
    return std::string("absent");
  };
  const auto exit_count = [&](const std::string& outcome) {
    return value_of(R"(gpugeek_agent_workload_exits_total{node="n1",outcome=")" + outcome + "\"}");
  };
  // "nogpu" names a GPU the node lacks: it failed to start, counted as failed at once.
  EXPECT_EQ(exit_count("failed"), "1");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline && exit_count("succeeded") != "1") {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(agent->Tick().ok());
  }
  while (std::chrono::steady_clock::now() < deadline && exit_count("failed") != "2") {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(agent->Tick().ok());
  }
  EXPECT_EQ(exit_count("succeeded"), "1");
  EXPECT_EQ(exit_count("failed"), "2");
  EXPECT_EQ(value_of(R"(gpugeek_agent_workloads{node="n1"})"), "1") << "sleep 30 still runs";

  // The server unlists "long": stopped with its grace, counted as cancelled.
  cp_.SetAssignments({});
  ASSERT_TRUE(agent->Tick().ok());
  while (std::chrono::steady_clock::now() < deadline && exit_count("cancelled") != "1") {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(agent->Tick().ok());
  }
  EXPECT_EQ(exit_count("cancelled"), "1");
  EXPECT_EQ(exit_count("oom_killed"), "0");
  EXPECT_EQ(value_of(R"(gpugeek_agent_workloads{node="n1"})"), "0");
}

TEST(ExitOutcome, OomWinsThenCancelThenExitCode) {
  EXPECT_EQ(OutcomeOf({.exit_code = 0}), ExitOutcome::kSucceeded);
  EXPECT_EQ(OutcomeOf({.exit_code = 1}), ExitOutcome::kFailed);
  EXPECT_EQ(OutcomeOf({.term_signal = 11}), ExitOutcome::kFailed);
  EXPECT_EQ(OutcomeOf({.exit_code = 0, .cancelled = true}), ExitOutcome::kCancelled);
  EXPECT_EQ(OutcomeOf({.term_signal = 9, .cancelled = true, .oom_kills = 1}), ExitOutcome::kOomKilled);
  EXPECT_EQ(ExitOutcomeName(ExitOutcome::kOomKilled), "oom_killed");
}

// NVML (the fake libnvidia-ml): what the library does not report is absent; XIDs come once per event.
TEST_F(AgentMetricsTest, NvmlSeriesTheLibraryDoesNotReportAreAbsent) {
  hw::testing::ScriptFile script(
      "GPUGEEK_FAKE_NVML_SCRIPT",
      "driver version=550.54.15 cuda=12040\n"
      "gpu name=\"Tesla V100-SXM2-32GB\" uuid=GPU-v0 bus=00000000:06:00.0 mem_total=34359738368 mem_used=1073741824 "
      "util=87 temp=64 power_mw=251000 ecc_unc=2 retired_sbe=1 retired_dbe=3 pending=0 xid=79\n"
      "gpu name=\"NVIDIA A100-SXM4-80GB\" uuid=GPU-a0 bus=00000000:07:00.0 mem_total=85899345920 mem_used=0 "
      "retired_sbe=na retired_dbe=na pending=na util=na temp=na power_mw=na ecc_unc=na\n");
  hw::NvmlDiscoveryOptions options;
  options.library_path = GPUGEEK_FAKE_NVML_PATH;
  options.host_paths.sys_root = "/nonexistent-sys";
  hw::NvmlDiscovery nvml(options);
  auto agent = MakeAgent(&nvml, "gpu-7");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  const std::string text = registry_.Render();
  const auto lines = Lines(text);
  const std::string v100 = R"(node="gpu-7",gpu="0",uuid="GPU-v0",model="V100-SXM2-32GB",vendor="nvidia")";
  const std::string a100 = R"(node="gpu-7",gpu="1",uuid="GPU-a0",model="A100-SXM-80GB",vendor="nvidia")";
  EXPECT_THAT(
      lines, Contains(fmt::format(R"(gpugeek_gpu_info{{{},name="Tesla V100-SXM2-32GB",driver="550.54.15"}} 1)", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_utilization_ratio{{{}}} 0.87", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_memory_used_bytes{{{}}} 1073741824", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_temperature_celsius{{{}}} 64", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_power_watts{{{}}} 251", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_ecc_uncorrected_errors_total{{{}}} 2", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_retired_pages{{{}}} 4", v100)));
  // The XID arrived in the first sample only (NVML delivers each event once): counted once, and the
  // second sample is healthy again as far as XIDs go, but ECC errors keep it unhealthy.
  EXPECT_THAT(lines, Contains(fmt::format(R"(gpugeek_gpu_xid_errors_total{{{},xid="79"}} 1)", v100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_healthy{{{}}} 0", v100)));

  // The A100 answers NOT_SUPPORTED for these: no series at all rather than a misleading 0.
  for (const char* name :
       {"gpugeek_gpu_utilization_ratio", "gpugeek_gpu_temperature_celsius", "gpugeek_gpu_power_watts",
        "gpugeek_gpu_ecc_uncorrected_errors_total", "gpugeek_gpu_retired_pages"}) {
    EXPECT_THAT(Series(text, name), Not(Contains(HasSubstr(R"(uuid="GPU-a0")")))) << name;
    EXPECT_THAT(Series(text, name), Contains(HasSubstr(R"(uuid="GPU-v0")"))) << name;
  }
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_memory_total_bytes{{{}}} 85899345920", a100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_memory_used_bytes{{{}}} 0", a100)));
  EXPECT_THAT(lines, Contains(fmt::format("gpugeek_gpu_healthy{{{}}} 1", a100)));
}

// --- MetricsListener ---

// A plain HTTP/1.0 GET over a socket: the whole response, status line and headers included.
std::string RawGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = fmt::format("GET {} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

TEST_F(AgentMetricsTest, ListenerServesTheRegistryAndTheAgentAnnouncesIt) {
  auto discovery = Emulate("1xH100-SXM-80GB");
  auto agent = MakeAgent(discovery.get());
  ASSERT_NE(agent, nullptr);
  auto listener = MetricsListener::Start("0.0.0.0:0", &registry_, "10.0.0.7");
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*listener)->address(), fmt::format("10.0.0.7:{}", port));
  EXPECT_EQ((*listener)->url(), fmt::format("http://127.0.0.1:{}/metrics", port));
  agent->SetMetricsAddress((*listener)->address());
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(cp_.registrations().size(), 1u);
  EXPECT_EQ(cp_.registrations()[0].metrics_address, fmt::format("10.0.0.7:{}", port));

  const std::string response = RawGet(port, "/metrics");
  EXPECT_TRUE(response.starts_with("HTTP/1.1 200")) << response.substr(0, 200);
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  const size_t body = response.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_THAT(Lines(response.substr(body + 4)), Contains(R"(gpugeek_agent_heartbeats_total{node="n1",result="ok"} 1)"));
  EXPECT_THAT(response, HasSubstr("\ngpugeek_gpu_memory_total_bytes{node=\"n1\",gpu=\"0\""));
  EXPECT_TRUE(RawGet(port, "/nothing").starts_with("HTTP/1.1 404")) << RawGet(port, "/nothing");
  (*listener)->Stop();
}

TEST(MetricsListen, ParsesAndAnnounces) {
  EXPECT_TRUE(MetricsListenDisabled(""));
  EXPECT_TRUE(MetricsListenDisabled("off"));
  EXPECT_FALSE(MetricsListenDisabled("127.0.0.1:0"));
  auto a = ParseMetricsListen("127.0.0.1:9471");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9471);
  a = ParseMetricsListen(":9471");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0") << "an empty host is every interface, as exporters read it";
  a = ParseMetricsListen("[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  for (const char* bad : {"9471", "host:", "host:http", "host:65536", "host:-1"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseMetricsListen(bad).status())) << bad;
  }
  EXPECT_EQ(AnnouncedMetricsAddress("0.0.0.0", 9471, "10.0.0.7"), "10.0.0.7:9471");
  EXPECT_EQ(AnnouncedMetricsAddress("::", 9471, "10.0.0.7"), "10.0.0.7:9471");
  EXPECT_EQ(AnnouncedMetricsAddress("192.168.1.5", 9471, "10.0.0.7"), "192.168.1.5:9471");
  EXPECT_EQ(AnnouncedMetricsAddress("::1", 9471, "10.0.0.7"), "[::1]:9471");
  EXPECT_EQ(AnnouncedMetricsAddress("0.0.0.0", 9471, "fd00::7"), "[fd00::7]:9471");
  metrics::Registry registry;
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsListener::Start("127.0.0.1:0", nullptr, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsListener::Start("127.0.0.1", &registry, "").status()));
  // An address of no interface of this host (TEST-NET-3) cannot be bound.
  EXPECT_TRUE(absl::IsUnavailable(MetricsListener::Start("203.0.113.1:0", &registry, "").status()));
}

}  // namespace
}  // namespace gpugeek::agent
