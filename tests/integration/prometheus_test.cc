// A real Prometheus (Debian's `prometheus` package, started by ../shared/infra/prometheus-up.sh) with
// the configuration of deploy/prometheus/ scrapes a live `gpugeek server` and two `gpugeek agent`s
// (found through the server's HTTP service discovery), all over TLS 1.3: the server's local CA signs
// the agents' metrics certificates, and Prometheus trusts that CA (tls_config ca_file). The pool has
// running jobs, a pending one, a cordoned node and a job recovered after a drain. Checks:
//   - `promtool check metrics` passes on the live /metrics of the server and of an agent;
//   - every metric docs/metrics.md lists is exported;
//   - Prometheus loads deploy/prometheus/alerts.yml and evaluates every rule without error, and every
//     series a rule reads has data;
//   - every PromQL expression of deploy/grafana/dashboards/*.json (and each template variable's query)
//     evaluates without error and returns data.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "common/testing/process.h"
#include "http/client.h"
#include "pki/pki.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using http::UrlEncode;
using std::chrono::milliseconds;
using std::chrono::seconds;
using subprocess::Process;
using subprocess::ReadFile;
using subprocess::RunCli;

const fs::path kSource = GPUGEEK_SOURCE_DIR;
const fs::path kShared = GPUGEEK_SHARED_DIR;

// Series the pool of this test cannot have, with the reason.
const std::map<std::string, std::string> kNoDataExpected = {
    {"gpugeek_gpu_xid_errors_total", "emulated GPUs raise no XID events"},
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The gpugeek_* metric names an expression reads.
std::set<std::string> MetricNames(const std::string& expr) {
  std::set<std::string> names;
  static const std::regex name("gpugeek_[a-z0-9_]+");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name); it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return names;
}

// A client as the admin ($GPUGEEK_TOKEN, subprocess::UseAdminToken): the server's routes need it, and
// Prometheus and the agents' metrics listeners ignore it. https:// trusts $GPUGEEK_CA_FILE
// (subprocess::UseServerCa).
std::unique_ptr<http::Client> Connect(const std::string& url) {
  const char* token = std::getenv("GPUGEEK_TOKEN");
  const char* ca = std::getenv("GPUGEEK_CA_FILE");
  auto c = http::Client::Create({.base_url = url,
                                 .read_timeout = seconds(10),
                                 .ca_file = ca == nullptr ? "" : ca,
                                 .bearer_token = token == nullptr ? "" : token});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

class PrometheusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("gpugeek_prom_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    StartPool();
    if (::testing::Test::HasFatalFailure()) return;
    StartGateway();
    if (::testing::Test::HasFatalFailure()) return;
    StartPrometheus();
  }
  static void TearDownTestSuite() {
    if (prom_state_ != nullptr)
      subprocess::Run({(kShared / "infra/prometheus-down.sh").string(), *prom_state_}, *dir_ / "down.log");
    agents_->clear();
    gateway_.reset();
    server_.reset();
    fs::remove_all(*dir_);
  }

  // A `gpugeek gateway` with one service whose replica is not there (every request fails over to a 502), and
  // its metrics listener: the gateway's documented metrics (docs/metrics.md "Gateway") come from it.
  static void StartGateway() {
    const fs::path routes = *dir_ / "routes.yaml";
    std::ofstream(routes) << "routes:\n  - service: gpt\n    retries: 1\n    versions:\n      - name: v1\n"
                             "        weight: 100\n        replicas: [{id: r1, address: 127.0.0.1:9}]\n";
    gateway_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "gateway", "--routes", routes.string(), "--listen", "127.0.0.1:0",
                                 "--metrics-listen", "127.0.0.1:0"},
        *dir_ / "gateway.log");
    const std::regex metrics("metrics on (http://127\\.0\\.0\\.1:[0-9]+)/metrics");
    const std::regex listening("gateway listening on (http://127\\.0\\.0\\.1:[0-9]+)");
    std::string proxy_url;
    for (int i = 0; i < 200 && proxy_url.empty(); ++i) {
      std::smatch m, l;
      const std::string out = gateway_->output();
      if (std::regex_search(out, m, metrics) && std::regex_search(out, l, listening)) {
        *gateway_metrics_ = m[1];
        proxy_url = l[1];
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_FALSE(proxy_url.empty()) << "gateway did not start: " << gateway_->output();
    auto client = http::Client::Create({.base_url = proxy_url});
    ASSERT_TRUE(client.ok()) << client.status();
    auto reply = (*client)->Send("GET", "/predict");
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->status, 502);
  }

  static void StartPool() {
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
                                 "--data-dir", (*dir_ / "server").string()},
        *dir_ / "server.log");
    // Prometheus scrapes the server and its service discovery on the API; the agents talk to their own
    // listener.
    const std::regex listening(
        "listening on (https://(127\\.0\\.0\\.1:[0-9]+)), agents on (https://127\\.0\\.0\\.1:[0-9]+)");
    std::string agent_url;
    for (int i = 0; i < 200 && url_->empty(); ++i) {
      std::smatch m;
      const std::string out = server_->output();
      if (std::regex_search(out, m, listening)) {
        *url_ = m[1];
        *host_port_ = m[2];
        agent_url = m[3];
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_FALSE(url_->empty()) << "server did not start: " << server_->output();
    subprocess::UseAdminToken(*dir_ / "server");
    const std::string ca = subprocess::UseServerCa(*dir_ / "server");
    // The agents' metrics certificate, from the server's CA, naming the loopback address they listen on.
    auto authority = pki::CertificateAuthority::Load(ca, (*dir_ / "server" / "tls" / "ca.key").string());
    ASSERT_TRUE(authority.ok()) << authority.status();
    auto metrics_cert =
        pki::IssueCertificate(*authority, {.common_name = "gpugeek agent metrics", .ip_addresses = {"127.0.0.1"}});
    ASSERT_TRUE(metrics_cert.ok()) << metrics_cert.status();
    const std::string metrics_crt = (*dir_ / "metrics.crt").string();
    const std::string metrics_key = (*dir_ / "metrics.key").string();
    ASSERT_TRUE(pki::WriteFileAtomically(metrics_crt, metrics_cert->cert_pem, 0644).ok());
    ASSERT_TRUE(pki::WriteFileAtomically(metrics_key, metrics_cert->key_pem, 0600).ok());
    {
      auto join = Connect(*url_)->Post("/v1/join-tokens", {{"uses", 10}});
      ASSERT_TRUE(join.ok()) << join.status();
      subprocess::UseJoinToken((*join)["token"]);
      // A monthly budget, so the budget alerts' series has data.
      auto budget = Connect(*url_)->Put("/v1/tenants/default/budget", {{"monthly_limit", "100.00"}});
      ASSERT_TRUE(budget.ok()) << budget.status();
    }
    // Node names carry the pid: test processes running side by side share this host's cgroups.
    const std::string suffix = "-" + std::to_string(::getpid());
    *node_a_ = "prom-a" + suffix;
    *node_b_ = "prom-b" + suffix;
    for (const auto& [name, capacity] : {std::pair{*node_a_, "on-demand"}, std::pair{*node_b_, "spot"}}) {
      std::vector<std::string> args{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", ca, "--name", name};
      args.insert(args.end(), {"--emulate", "8xA100-SXM-80GB", "--capacity", capacity, "--region", "eu-west"});
      args.insert(args.end(), {"--data-dir", (*dir_ / name).string(), "--metrics-listen", "127.0.0.1:0"});
      args.insert(args.end(), {"--metrics-tls-cert", metrics_crt, "--metrics-tls-key", metrics_key});
      agents_->push_back(std::make_unique<Process>(args, *dir_ / (name + ".log")));
    }
    auto server = Connect(*url_);
    for (int i = 0; i < 200; ++i) {
      auto targets = server->Get("/v1/prometheus/targets");
      if (targets.ok() && targets->size() == 2) {
        *agent_metrics_ = (*targets)[0]["targets"][0];
        break;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_FALSE(agent_metrics_->empty()) << "agents did not register with a metrics address";

    // Two running jobs; drain the node of the smaller one so it recovers on the other node (a recovery
    // to measure); the drained node stays cordoned, so an 8-GPU job cannot fit and stays PENDING.
    const std::string run = "run: sleep 600\n";
    const std::string big = Submit("name: big\nresources: {accelerators: A100-SXM-80GB:4}\n" + run);
    const std::string small = Submit("name: small\npriority: 5\nresources: {accelerators: A100-SXM-80GB:2}\n" + run);
    const nlohmann::json placed = WaitFor(small, "RUNNING");
    WaitFor(big, "RUNNING");
    ASSERT_TRUE(placed["allocation"].is_object()) << placed.dump();
    const std::string drained = placed["allocation"]["members"][0]["node"];
    auto [code, out] = RunCli({"drain", drained, "--server", *url_}, *dir_ / "cli.log");
    ASSERT_EQ(code, 0) << out;
    const nlohmann::json recovered = WaitFor(small, "RUNNING", /*min_restarts=*/1);
    ASSERT_NE(recovered["allocation"]["members"][0]["node"], drained) << recovered.dump();
    WaitFor(big, "RUNNING");
    pending_ = new std::string(Submit("name: waits\npriority: 10\nresources: {accelerators: A100-SXM-80GB:8}\n" + run));
  }

  static std::string Submit(const std::string& spec) {
    const fs::path p = *dir_ / fmt::format("spec-{}.yaml", ++specs_);
    std::ofstream(p) << spec;
    auto [code, out] = RunCli({"submit", p.string(), "--json", "--server", *url_}, *dir_ / "cli.log");
    EXPECT_EQ(code, 0) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    return j.is_object() && j.contains("id") ? j["id"].get<std::string>() : "";
  }

  static nlohmann::json WaitFor(const std::string& id, const std::string& state, int min_restarts = 0) {
    auto server = Connect(*url_);
    nlohmann::json last;
    for (auto end = std::chrono::steady_clock::now() + seconds(60); std::chrono::steady_clock::now() < end;) {
      auto job = server->Get("/v1/jobs/" + id);
      if (job.ok()) {
        last = *job;
        if (last["state"] == state && last.value("restarts", 0) >= min_restarts) return last;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << id << " did not reach " << state << ": " << last.dump();
    return last;
  }

  // Prometheus from the shared start-up script, then deploy/prometheus/prometheus.yml (addresses of
  // this pool, 1 s intervals) and alerts.yml loaded by a reload.
  static void StartPrometheus() {
    prom_state_ = new std::string((*dir_ / "prometheus").string());
    ::setenv("PROM_INSTALL", "0", 1);  // scripts/install-deps.sh installs it
    // A port of its own per test process, below the kernel's ephemeral range (32768-60999) so that no
    // client socket of a test running beside it holds it (the script moves on to the next free one if a
    // listener does). The state folder with a trailing '/': the script's liveness check looks for "STATE/"
    // in the command line of the pid it started, which until the exec is the script's own. Prometheus was
    // still seen to exit during start-up with an empty log on a loaded machine (2 of about 40 runs): up to
    // three tries, each on a new port and a clean state.
    int code = 1;
    std::string out;
    for (int attempt = 0; attempt < 3 && code != 0; ++attempt) {
      if (attempt > 0) {
        subprocess::Run({(kShared / "infra/prometheus-down.sh").string(), *prom_state_}, *dir_ / "down.log");
        fs::remove_all(*prom_state_);
        std::this_thread::sleep_for(milliseconds(500));
      }
      ::setenv("PROM_PORT", std::to_string(20000 + (::getpid() % 4000) * 3 + attempt).c_str(), 1);
      std::tie(code, out) = subprocess::Run(
          {(kShared / "infra/prometheus-up.sh").string(), *host_port_, *prom_state_ + "/"}, *dir_ / "up.log");
    }
    ASSERT_EQ(code, 0) << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("PROMETHEUS_URL=(http://[0-9.:]+)"))) << out;
    *prom_url_ = m[1];

    std::string config = ReadFile(kSource / "deploy/prometheus/prometheus.yml");
    config = Replace(config, "127.0.0.1:8470", *host_port_);
    config = Replace(config, "credentials_file: gpugeek.token",
                     "credentials_file: " + (*dir_ / "server" / "admin.token").string());
    config = Replace(config, "ca_file: ca.crt", "ca_file: " + (*dir_ / "server" / "tls" / "ca.crt").string());
    config = Replace(config, "15s", "1s");
    config = Replace(config, "refresh_interval: 30s", "refresh_interval: 1s");
    config = Replace(config, "- alerts.yml", "- " + (kSource / "deploy/prometheus/alerts.yml").string());
    std::ofstream(fs::path(*prom_state_) / "prometheus.yml") << config;
    auto prom = Connect(*prom_url_);
    auto reload = prom->Post("/-/reload", nlohmann::json::object());
    ASSERT_TRUE(reload.ok()) << reload.status() << "\n" << ReadFile(fs::path(*prom_state_) / "log/prometheus.log");

    // Both jobs of deploy/prometheus.yml up: the server and the two agents found by HTTP SD.
    std::string last;
    for (int i = 0; i < 300; ++i) {
      auto r = prom->Get("/api/v1/query?query=" + UrlEncode("count(up{job=~\"gpugeek-.*\"} == 1)"));
      if (r.ok()) {
        last = r->dump();
        const auto& result = (*r)["data"]["result"];
        if (!result.empty() && result[0]["value"][1] == "3") break;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    if (last.find("\"3\"") == std::string::npos) {
      auto targets = prom->Get("/api/v1/targets");
      FAIL() << "Prometheus did not scrape the server and both agents: " << last
             << "\ntargets: " << (targets.ok() ? targets->dump() : std::string(targets.status().message()))
             << "\nprometheus log:\n"
             << ReadFile(fs::path(*prom_state_) / "log/prometheus.log");
    }
    // The start-up script's own job ("target", the server again) is gone from the configuration, but
    // its samples would still answer queries for the 5-minute lookback and count the server twice:
    // delete them (the script enables the admin API).
    for (int i = 0; i < 300; ++i) {
      (void)prom->Post("/api/v1/admin/tsdb/delete_series?match[]=" + UrlEncode("{job=\"target\"}"),
                       nlohmann::json::object());
      auto r = prom->Get("/api/v1/query?query=" + UrlEncode("up{job=\"target\"}"));
      if (r.ok() && (*r)["data"]["result"].empty()) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
    FAIL() << "the start-up script's scrape job did not go away after the reload";
  }

  // Runs an instant query; the result vector, or a failure naming the expression.
  static absl::StatusOr<nlohmann::json> Query(const std::string& expr) {
    auto prom = Connect(*prom_url_);
    auto r = prom->Get("/api/v1/query?query=" + UrlEncode(expr));
    if (!r.ok()) return r.status();
    if ((*r)["status"] != "success") return absl::InternalError(r->dump());
    return (*r)["data"]["result"];
  }

  // Polls until `expr` returns data (at most `timeout`: rate() needs two scrapes in its window).
  static nlohmann::json QueryUntilData(const std::string& expr, seconds timeout = seconds(20)) {
    nlohmann::json result = nlohmann::json::array();
    for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
      auto r = Query(expr);
      if (!r.ok()) {
        ADD_FAILURE() << expr << ": " << r.status();
        return result;
      }
      result = *r;
      if (!result.empty()) return result;
      std::this_thread::sleep_for(milliseconds(250));
    }
    return result;
  }

  static bool NoDataExpected(const std::string& expr) {
    for (const std::string& name : MetricNames(expr)) {
      if (kNoDataExpected.contains(name)) return true;
    }
    return false;
  }

  static inline fs::path* dir_ = nullptr;
  static inline std::string* url_ = new std::string();
  static inline std::string* host_port_ = new std::string();
  static inline std::string* node_a_ = new std::string();
  static inline std::string* node_b_ = new std::string();
  static inline std::string* agent_metrics_ = new std::string();
  static inline std::string* prom_url_ = new std::string();
  static inline std::string* prom_state_ = nullptr;
  static inline std::string* pending_ = nullptr;
  static inline int specs_ = 0;
  static inline std::unique_ptr<Process> server_;
  static inline std::unique_ptr<Process> gateway_;
  static inline std::string* gateway_metrics_ = new std::string();
  static inline std::vector<std::unique_ptr<Process>>* agents_ = new std::vector<std::unique_ptr<Process>>();
};

TEST_F(PrometheusTest, PromtoolAcceptsTheLiveMetricsOfServerAndAgent) {
  for (const std::string& url : {*url_, "https://" + *agent_metrics_, *gateway_metrics_}) {
    auto text = Connect(url)->GetText("/metrics");
    ASSERT_TRUE(text.ok()) << url << ": " << text.status();
    const fs::path file = *dir_ / "metrics.txt";
    std::ofstream(file) << *text;
    // promtool reads the exposition on stdin; it prints lint problems and exits non-zero on any.
    auto [code, out] = subprocess::Run({"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + file.string()},
                                       *dir_ / "promtool.log");
    EXPECT_EQ(code, 0) << url << "/metrics:\n" << out;
    EXPECT_EQ(out, "") << url;
  }
}

TEST_F(PrometheusTest, EveryDocumentedMetricIsExported) {
  const std::string text = *Connect(*url_)->GetText("/metrics") +
                           *Connect("https://" + *agent_metrics_)->GetText("/metrics") +
                           *Connect(*gateway_metrics_)->GetText("/metrics");
  const std::string doc = ReadFile(kSource / "docs/metrics.md");
  static const std::regex row("\\| `(gpugeek_[a-z0-9_]+)` \\|");
  int documented = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator(); ++it) {
    ++documented;
    EXPECT_NE(text.find("# TYPE " + (*it)[1].str() + " "), std::string::npos) << (*it)[1] << " is not exported";
  }
  EXPECT_GE(documented, 35);
}

TEST_F(PrometheusTest, AlertRulesLoadEvaluateAndReadSeriesThatHaveData) {
  const YAML::Node rules = YAML::LoadFile((kSource / "deploy/prometheus/alerts.yml").string());
  std::set<std::string> names;
  int count = 0;
  for (const auto& group : rules["groups"]) {
    for (const auto& rule : group["rules"]) {
      ++count;
      const std::string expr = rule["expr"].as<std::string>();
      auto r = Query(expr);
      EXPECT_TRUE(r.ok()) << rule["alert"] << ": " << r.status();
      for (const std::string& name : MetricNames(expr)) names.insert(name);
    }
  }
  EXPECT_EQ(count, 9);
  for (const std::string& name : names) {
    if (kNoDataExpected.contains(name)) continue;
    EXPECT_FALSE(QueryUntilData(name).empty()) << name << " has no data";
  }
  // Prometheus itself loaded the file and evaluated every rule without error.
  nlohmann::json loaded;
  for (int i = 0; i < 100; ++i) {
    auto r = Connect(*prom_url_)->Get("/api/v1/rules");
    ASSERT_TRUE(r.ok()) << r.status();
    loaded = (*r)["data"]["groups"];
    bool evaluated = !loaded.empty();
    for (const auto& g : loaded) {
      for (const auto& rule : g["rules"]) evaluated &= rule.value("health", "") != "unknown";
    }
    if (evaluated) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  int healthy = 0;
  for (const auto& g : loaded) {
    for (const auto& rule : g["rules"]) {
      EXPECT_EQ(rule["health"], "ok") << rule.dump();
      healthy += rule["health"] == "ok";
    }
  }
  EXPECT_EQ(healthy, 9);
}

TEST_F(PrometheusTest, EveryDashboardExpressionEvaluatesAndReturnsData) {
  int expressions = 0;
  for (const auto& entry : fs::directory_iterator(kSource / "deploy/grafana/dashboards")) {
    const nlohmann::json board = nlohmann::json::parse(ReadFile(entry.path()));
    const std::string file = entry.path().filename();
    for (const auto& var : board["templating"]["list"]) {
      if (var["type"] != "query") continue;
      // label_values(METRIC, LABEL): the label's values over the series of METRIC.
      std::smatch m;
      const std::string q = var["definition"];
      ASSERT_TRUE(std::regex_match(q, m, std::regex("label_values\\((\\w+), *(\\w+)\\)"))) << file << ": " << q;
      auto values = Connect(*prom_url_)->Get(fmt::format("/api/v1/label/{}/values?match[]={}", m[2].str(), m[1].str()));
      ASSERT_TRUE(values.ok()) << values.status();
      EXPECT_EQ((*values)["data"], (nlohmann::json{*node_a_, *node_b_})) << file << ": " << q;
    }
    std::vector<nlohmann::json> panels = board["panels"];
    for (const auto& panel : panels) {
      for (const auto& target : panel["targets"]) {
        ++expressions;
        std::string expr = target["expr"];
        expr = Replace(expr, "$__rate_interval", "1m");
        expr = Replace(expr, "$node", ".*");
        if (NoDataExpected(expr)) {
          EXPECT_TRUE(Query(expr).ok()) << file << " / " << panel["title"] << ": " << expr;
          continue;
        }
        EXPECT_FALSE(QueryUntilData(expr).empty()) << file << " / " << panel["title"] << ": " << expr << " has no data";
      }
    }
  }
  EXPECT_GE(expressions, 40);
}

// The values behind the pool panels are this pool's: 16 A100s on two nodes, one cordoned; 6 GPUs
// allocated (4 + 2 on the node that is not cordoned); the 8-GPU job pending.
TEST_F(PrometheusTest, SeriesCarryThePoolsValues) {
  auto value = [](const std::string& expr) -> std::string {
    const nlohmann::json r = QueryUntilData(expr);
    return r.empty() ? "none" : r[0]["value"][1].get<std::string>();
  };
  EXPECT_EQ(value("count(gpugeek_gpu_info)"), "16");
  EXPECT_EQ(value("sum(gpugeek_gpu_memory_total_bytes)"), std::to_string(16 * (80ull << 30)));
  EXPECT_EQ(value("sum(gpugeek_node_up)"), "2");
  EXPECT_EQ(value("sum(gpugeek_node_cordoned)"), "1");
  EXPECT_EQ(value("sum(gpugeek_pool_gpus_allocated)"), "6");
  EXPECT_EQ(value("sum(gpugeek_pool_allocated_milligpus)"), "6000");
  EXPECT_EQ(value("sum(gpugeek_jobs{state=\"RUNNING\"})"), "2");
  EXPECT_EQ(value("sum(gpugeek_jobs{state=\"PENDING\",priority=\"10\"})"), "1");
  EXPECT_EQ(value("sum(gpugeek_job_recovery_duration_seconds_count)"), "1");
  EXPECT_EQ(value("sum(gpugeek_agent_workloads)"), "2");
}

}  // namespace
}  // namespace gpugeek
