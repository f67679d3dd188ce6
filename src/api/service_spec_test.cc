#include "api/service_spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace gpugeek::api {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr char kIssueExample[] = R"(
kind: service
name: gpt-small
port: 8000
readiness: {path: /healthz, initial_delay: 2s, period: 1s, timeout: 1s, failure_threshold: 3, success_threshold: 1}
startup_budget: 10m
replicas: {min: 0, max: 4, initial: 1}
autoscaling:
  target_concurrency: 70
  target_queue_depth: 0
  target_tokens_in_flight: 0
  target_kv_cache_use: 0
  stable_window: 60s
  panic_window_percentage: 10
  panic_threshold: 2.0
  max_scale_up_rate: 1000
  max_scale_down_rate: 2
  scale_to_zero_grace: 30s
traffic:
  sticky: {header: X-User}
  activator: {queue: 10000, timeout: 60s}
  retries: 2
versions:
  - name: v1
    weight: 90
    resources: {accelerators: A100-SXM-80GB:1}
    run: python3 serve.py --port $PORT
  - name: v2
    weight: 10
    resources: {accelerators: A100-SXM-80GB:1}
    run: python3 serve.py --port $PORT --checkpoint v2.pt
)";

// The smallest full-form spec, with a version spliced in by the error tests.
std::string WithVersions(const std::string& versions, const std::string& top = "") {
  return "kind: service\nname: svc\n" + top + "versions:\n" + versions;
}

constexpr char kOneVersion[] = "  - {name: v1, weight: 100, resources: {accelerators: T4:1}, run: serve}\n";

TEST(ServiceSpec, IssueExample) {
  auto spec = ParseServiceSpec(kIssueExample);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "gpt-small");
  EXPECT_EQ(spec->port, 8000);
  EXPECT_EQ(spec->readiness.path, "/healthz");
  EXPECT_EQ(spec->readiness.initial_delay, seconds(2));
  EXPECT_EQ(spec->readiness.period, seconds(1));
  EXPECT_EQ(spec->readiness.timeout, seconds(1));
  EXPECT_EQ(spec->readiness.failure_threshold, 3);
  EXPECT_EQ(spec->readiness.success_threshold, 1);
  ASSERT_TRUE(spec->startup_budget.has_value());
  EXPECT_EQ(*spec->startup_budget, minutes(10));
  EXPECT_EQ(spec->replicas, (ReplicaBounds{.min = 0, .max = 4, .initial = 1}));
  EXPECT_EQ(spec->autoscaling, ServiceAutoscaling{});  // the example spells out the defaults
  ASSERT_TRUE(spec->traffic.sticky.has_value());
  EXPECT_EQ(spec->traffic.sticky->key, StickyKey::kHeader);
  EXPECT_EQ(spec->traffic.sticky->name, "X-User");
  EXPECT_EQ(spec->traffic.activator.queue, 10000);
  EXPECT_EQ(spec->traffic.activator.timeout, seconds(60));
  EXPECT_EQ(spec->traffic.retries, 2);
  ASSERT_EQ(spec->versions.size(), 2u);
  EXPECT_EQ(spec->versions[0].name, "v1");
  EXPECT_EQ(spec->versions[0].weight_percent, 90);
  EXPECT_EQ(spec->versions[0].run.name, "gpt-small");
  EXPECT_EQ(spec->versions[0].run.run, "python3 serve.py --port $PORT");
  ASSERT_EQ(spec->versions[0].run.resources.any_of.size(), 1u);
  EXPECT_EQ(spec->versions[0].run.resources.any_of[0].model, "A100-SXM-80GB");
  EXPECT_EQ(spec->versions[0].run.resources.any_of[0].count, 1);
  EXPECT_EQ(spec->versions[0].run.num_nodes, 1);
  EXPECT_EQ(spec->versions[1].name, "v2");
  EXPECT_EQ(spec->versions[1].weight_percent, 10);
  EXPECT_EQ(spec->versions[1].run.run, "python3 serve.py --port $PORT --checkpoint v2.pt");
}

TEST(ServiceSpec, Defaults) {
  auto spec = ParseServiceSpec(WithVersions("  - {name: main, resources: {accelerators: T4:1}, run: serve}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->port, 8080);
  EXPECT_EQ(spec->readiness.path, "/health");
  EXPECT_EQ(spec->readiness.initial_delay, seconds(0));
  EXPECT_EQ(spec->readiness.period, seconds(1));
  EXPECT_EQ(spec->readiness.timeout, seconds(1));
  EXPECT_EQ(spec->readiness.failure_threshold, 3);
  EXPECT_EQ(spec->readiness.success_threshold, 1);
  EXPECT_FALSE(spec->startup_budget.has_value());
  EXPECT_EQ(spec->replicas.min, 0);
  EXPECT_EQ(spec->replicas.max, 1);
  EXPECT_EQ(spec->replicas.initial, 1);
  const ServiceAutoscaling& a = spec->autoscaling;
  EXPECT_EQ(a.target_concurrency, 70.0);
  EXPECT_EQ(a.target_queue_depth, 0.0);
  EXPECT_EQ(a.target_tokens_in_flight, 0.0);
  EXPECT_EQ(a.target_kv_cache_use, 0.0);
  EXPECT_EQ(a.stable_window, seconds(60));
  EXPECT_EQ(a.panic_window_percentage, 10.0);
  EXPECT_EQ(a.panic_threshold, 2.0);
  EXPECT_EQ(a.max_scale_up_rate, 1000.0);
  EXPECT_EQ(a.max_scale_down_rate, 2.0);
  EXPECT_EQ(a.scale_to_zero_grace, seconds(30));
  EXPECT_FALSE(spec->traffic.sticky.has_value());
  EXPECT_EQ(spec->traffic.activator.queue, 10000);
  EXPECT_EQ(spec->traffic.activator.timeout, seconds(60));
  EXPECT_EQ(spec->traffic.retries, 2);
  ASSERT_EQ(spec->versions.size(), 1u);
  EXPECT_EQ(spec->versions[0].name, "main");
  EXPECT_EQ(spec->versions[0].weight_percent, 100);  // the only version needs no weight
}

TEST(ServiceSpec, ReplicaDefaultsFollowMinAndInitial) {
  auto spec = ParseServiceSpec(WithVersions(kOneVersion, "replicas: {min: 2}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->replicas, (ReplicaBounds{.min = 2, .max = 2, .initial = 2}));
  spec = ParseServiceSpec(WithVersions(kOneVersion, "replicas: {initial: 3}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->replicas, (ReplicaBounds{.min = 0, .max = 3, .initial = 3}));
  spec = ParseServiceSpec(WithVersions(kOneVersion, "replicas: {max: 8}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->replicas, (ReplicaBounds{.min = 0, .max = 8, .initial = 1}));
}

TEST(ServiceSpec, ShorthandMakesOneVersion) {
  auto spec = ParseServiceSpec(R"(
kind: service
name: tiny
port: 9000
replicas: {min: 1, max: 2}
resources: {accelerators: L4:1}
image: vllm
env: {HF_HOME: /cache}
setup: pip install -r requirements.txt
run: vllm serve --port $PORT
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->port, 9000);
  EXPECT_EQ(spec->replicas, (ReplicaBounds{.min = 1, .max = 2, .initial = 1}));
  ASSERT_EQ(spec->versions.size(), 1u);
  const ServiceVersion& v = spec->versions[0];
  EXPECT_EQ(v.name, "v1");
  EXPECT_EQ(v.weight_percent, 100);
  EXPECT_EQ(v.run.name, "tiny");
  EXPECT_EQ(v.run.run, "vllm serve --port $PORT");
  EXPECT_EQ(v.run.setup, "pip install -r requirements.txt");
  EXPECT_EQ(v.run.image, "localhost/vllm:latest");  // canonical, as ParseJobSpec makes it
  EXPECT_EQ(v.run.env.at("HF_HOME"), "/cache");
  ASSERT_EQ(v.run.resources.any_of.size(), 1u);
  EXPECT_EQ(v.run.resources.any_of[0].count, 1);
}

TEST(ServiceSpec, VersionRunPartIsAJobsRunPart) {
  auto spec = ParseServiceSpec(WithVersions(R"(  - name: v1
    resources: {accelerators: [H100-SXM-80GB:2, T4:0.5], capacity: [spot, on-demand], cpus: 8, memory: 64Gi}
    model: models/tiny.json
    task: {kind: inference, seq_len: 4096}
    env: {HF_TOKEN: {secret: hf}}
    priority: 5
    run: serve
)"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const JobSpec& run = spec->versions[0].run;
  ASSERT_EQ(run.resources.any_of.size(), 2u);
  EXPECT_EQ(run.resources.any_of[1].milli_per_gpu, 500);
  EXPECT_EQ(run.resources.capacity, (std::vector<CapacityType>{CapacityType::kSpot, CapacityType::kOnDemand}));
  EXPECT_EQ(run.resources.cpu_milli, 8000);
  EXPECT_EQ(run.resources.memory_bytes, uint64_t{64} << 30);
  ASSERT_TRUE(run.task.has_value());
  EXPECT_EQ(run.task->seq_len, 4096);
  EXPECT_EQ(run.secret_env.at("HF_TOKEN"), "hf");
  EXPECT_EQ(run.priority, 5);
}

TEST(ServiceSpec, AuthTokenIsReadWrittenAndRefusedWhenUnknown) {
  auto spec = ParseServiceSpec(WithVersions(kOneVersion, "traffic: {auth: token}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->traffic.auth_token);
  auto again = ParseServiceSpec(ServiceSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->traffic, spec->traffic);
  auto none = ParseServiceSpec(WithVersions(kOneVersion, "traffic: {auth: none}\n"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->traffic.auth_token);
  auto bad = ParseServiceSpec(WithVersions(kOneVersion, "traffic: {auth: password}\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "traffic.auth: = 'password': give token (callers send a gpugeek API token) or none");
}

TEST(ServiceSpec, CookieStickinessAndNumbers) {
  auto spec = ParseServiceSpec(WithVersions(kOneVersion, R"(traffic: {sticky: {cookie: gpugeek-version}, retries: 0}
autoscaling: {target_concurrency: 0, target_kv_cache_use: 0.8, target_tokens_in_flight: 2e4, panic_threshold: 1.5}
)"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->traffic.sticky.has_value());
  EXPECT_EQ(spec->traffic.sticky->key, StickyKey::kCookie);
  EXPECT_EQ(spec->traffic.sticky->name, "gpugeek-version");
  EXPECT_EQ(spec->traffic.retries, 0);
  EXPECT_EQ(spec->autoscaling.target_concurrency, 0.0);
  EXPECT_EQ(spec->autoscaling.target_kv_cache_use, 0.8);
  EXPECT_EQ(spec->autoscaling.target_tokens_in_flight, 20000.0);
  EXPECT_EQ(spec->autoscaling.panic_threshold, 1.5);
}

struct BadCase {
  std::string name;
  std::string yaml;
  std::string message_prefix;  // the message starts with this: the field path and the problem
};

std::vector<BadCase> BadCases() {
  const std::string v1 = "  - {name: v1, weight: 100, resources: {accelerators: T4:1}, run: serve}\n";
  std::string nine;
  for (int i = 0; i < 9; ++i) nine += fmt::format("  - {{name: v{}, weight: 10, run: a}}\n", i);
  return {
      {"WeightsSumTo90",
       WithVersions("  - {name: v1, weight: 80, resources: {accelerators: T4:1}, run: a}\n"
                    "  - {name: v2, weight: 10, resources: {accelerators: T4:1}, run: b}\n"),
       "versions: weights sum to 90; they must sum to 100"},
      {"MaxBelowMin", WithVersions(v1, "replicas: {min: 1, max: 0}\n"), "replicas.max: 0 is below replicas.min 1"},
      {"MaxZero", WithVersions(v1, "replicas: {max: 0}\n"), "replicas.max: must be at least 1"},
      {"InitialAboveMax", WithVersions(v1, "replicas: {max: 2, initial: 3}\n"),
       "replicas.initial: 3 is above replicas.max 2"},
      {"StickyBoth", WithVersions(v1, "traffic: {sticky: {header: X-User, cookie: c}}\n"),
       "traffic.sticky: give exactly one of header or cookie"},
      {"StickyNeither", WithVersions(v1, "traffic: {sticky: {}}\n"),
       "traffic.sticky: give exactly one of header or cookie"},
      {"HeaderNotAToken", WithVersions(v1, "traffic: {sticky: {header: 'X User'}}\n"),
       "traffic.sticky.header: = 'X User' is not an HTTP header name"},
      {"CookieNotAToken", WithVersions(v1, "traffic: {sticky: {cookie: 'a;b'}}\n"),
       "traffic.sticky.cookie: = 'a;b' is not an HTTP cookie name"},
      {"DuplicateVersionNames",
       WithVersions("  - {name: v1, weight: 50, resources: {accelerators: T4:1}, run: a}\n"
                    "  - {name: v1, weight: 50, resources: {accelerators: T4:1}, run: b}\n"),
       "versions[1].name: = v1 is also the name of versions[0]"},
      {"VersionNameNotALabel", WithVersions("  - {name: V_1, resources: {accelerators: T4:1}, run: a}\n"),
       "versions[0].name: = 'V_1' must be 1-32 lower-case letters"},
      {"VersionNameTooLong",
       WithVersions("  - {name: " + std::string(33, 'a') + ", resources: {accelerators: T4:1}, run: a}\n"),
       "versions[0].name: = 'aaaa"},
      {"WeightMissingWithTwoVersions",
       WithVersions("  - {name: a, weight: 100, resources: {accelerators: T4:1}, run: a}\n"
                    "  - {name: b, resources: {accelerators: T4:1}, run: b}\n"),
       "versions[1].weight: is required with several versions"},
      {"WeightAbove100", WithVersions("  - {name: a, weight: 101, resources: {accelerators: T4:1}, run: a}\n"),
       "versions[0].weight: = 101 must be between 0 and 100"},
      {"NineVersions", WithVersions(nine), "versions: must be a list of 1 to 8 versions"},
      {"NoVersions", WithVersions("  []\n"), "versions: must be a list of 1 to 8 versions"},
      {"UnknownGpuInSecondVersion",
       WithVersions("  - {name: a, weight: 50, resources: {accelerators: T4:1}, run: a}\n"
                    "  - {name: b, weight: 50, resources: {accelerators: Z80:1}, run: b}\n"),
       "versions[1].resources.accelerators: unknown GPU model 'Z80'"},
      {"UnknownFieldInVersion", WithVersions("  - {name: a, resources: {accelerators: T4:1}, run: a, replicas: 2}\n"),
       "versions[0].replicas: unknown field; allowed here: name, weight, model, task, resources"},
      {"RunMissingInVersion", WithVersions("  - {name: a, resources: {accelerators: T4:1}}\n"),
       "versions[0].run: is required"},
      {"NumNodesTwo", WithVersions("  - {name: a, resources: {accelerators: T4:1}, num_nodes: 2, run: a}\n"),
       "versions[0].num_nodes: = 2: a replica runs on one node"},
      {"CheckpointInVersion",
       WithVersions("  - {name: a, resources: {accelerators: T4:1}, checkpoint: {dir: /c}, run: a}\n"),
       "versions[0].checkpoint: a replica keeps no training state"},
      {"RetryInVersion", WithVersions("  - {name: a, resources: {accelerators: T4:1}, retry: {on: [error]}, run: a}\n"),
       "versions[0].retry: the service restarts its replicas itself"},
      {"TokensBudget", WithVersions("  - {name: a, model: m.json, task: {kind: inference, tokens: 1000}, run: a}\n"),
       "versions[0].task.tokens: a service has no token budget"},
      {"TrainingTask", WithVersions("  - {name: a, model: m.json, task: {kind: lora}, run: a}\n"),
       "versions[0].task.kind: = lora: a service serves a model"},
      {"EnvInVersionRefused",
       WithVersions("  - {name: a, resources: {accelerators: T4:1}, env: {LD_PRELOAD: x.so}, run: a}\n"),
       "versions[0].env.LD_PRELOAD: LD_* variables"},
      {"RunFieldsBesideVersions", WithVersions(v1, "run: serve\n"),
       "run: unknown field; allowed here: kind, name, port"},
      {"UnknownTopLevelField", WithVersions(v1, "replica: {max: 2}\n"), "replica: unknown field"},
      {"UnknownReadinessField", WithVersions(v1, "readiness: {path: /h, interval: 1s}\n"),
       "readiness.interval: unknown field; allowed here: path, initial_delay"},
      {"ReadinessPathRelative", WithVersions(v1, "readiness: {path: healthz}\n"),
       "readiness.path: = 'healthz' must be a URL path starting with '/'"},
      {"ReadinessPeriodNotADuration", WithVersions(v1, "readiness: {period: often}\n"),
       "readiness.period: = 'often' is not a duration"},
      {"ReadinessPeriodTooShort", WithVersions(v1, "readiness: {period: 10ms}\n"),
       "readiness.period: = 10ms must be between 100ms and 1h"},
      {"ReadinessThresholdZero", WithVersions(v1, "readiness: {failure_threshold: 0}\n"),
       "readiness.failure_threshold: = 0 must be between 1 and 100"},
      {"PortOutOfRange", WithVersions(v1, "port: 70000\n"), "port: = 70000 must be between 1 and 65535"},
      {"PortWrongType", WithVersions(v1, "port: [8000]\n"), "port: must be a single value, not a list"},
      {"StartupBudgetSubMillisecond", WithVersions(v1, "startup_budget: 0.5ms\n"),
       "startup_budget: must be a whole number of milliseconds"},
      {"NoTargetAboveZero", WithVersions(v1, "autoscaling: {target_concurrency: 0}\n"),
       "autoscaling: give at least one target above 0"},
      {"NegativeTarget", WithVersions(v1, "autoscaling: {target_queue_depth: -1}\n"),
       "autoscaling.target_queue_depth: = -1 must be >= 0"},
      {"KvCacheAboveOne", WithVersions(v1, "autoscaling: {target_kv_cache_use: 80}\n"),
       "autoscaling.target_kv_cache_use: = 80 must be between 0 and 1"},
      {"TargetNotANumber", WithVersions(v1, "autoscaling: {target_concurrency: nan}\n"),
       "autoscaling.target_concurrency: = 'nan' must be a number"},
      {"StableWindowTooShort", WithVersions(v1, "autoscaling: {stable_window: 5s}\n"),
       "autoscaling.stable_window: = 5s must be between 6s and 1h"},
      {"StableWindowFractional", WithVersions(v1, "autoscaling: {stable_window: 6500ms}\n"),
       "autoscaling.stable_window: must be a whole number of seconds"},
      {"PanicThresholdTooLow", WithVersions(v1, "autoscaling: {panic_threshold: 1.0}\n"),
       "autoscaling.panic_threshold: = 1 must be between 1.1 and 10"},
      {"PanicWindowPercentage", WithVersions(v1, "autoscaling: {panic_window_percentage: 0.5}\n"),
       "autoscaling.panic_window_percentage: = 0.5 must be between 1 and 100"},
      {"ScaleDownRateOne", WithVersions(v1, "autoscaling: {max_scale_down_rate: 1}\n"),
       "autoscaling.max_scale_down_rate: = 1 must be above 1"},
      {"ScaleToZeroGraceTooLong", WithVersions(v1, "autoscaling: {scale_to_zero_grace: 2d}\n"),
       "autoscaling.scale_to_zero_grace: = 48h must be between 0ms and 24h"},
      {"ActivatorTimeout", WithVersions(v1, "traffic: {activator: {timeout: 0s}}\n"),
       "traffic.activator.timeout: = 0ms must be between 1s and 1h"},
      {"Retries", WithVersions(v1, "traffic: {retries: 11}\n"), "traffic.retries: = 11 must be between 0 and 10"},
      {"KindMissing", "name: svc\nversions:\n" + v1, "kind: is required"},
      {"KindJob", "kind: job\nname: svc\nversions:\n" + v1, "kind: = 'job' must be service"},
      {"ServiceNameNotALabel", "kind: service\nname: Svc_1\nversions:\n" + v1,
       "name: = 'Svc_1' must be 1-63 lower-case letters"},
      {"NotAMapping", "- kind: service\n", "(document): a service spec must be a YAML mapping"},
      {"ShorthandWithoutRun", "kind: service\nname: svc\n", "versions: is required"},
      {"ShorthandFieldPathsUnprefixed", "kind: service\nname: svc\nresources: {accelerators: Z80:1}\nrun: a\n",
       "resources.accelerators: unknown GPU model 'Z80'"},
      {"ShorthandUnknownField", "kind: service\nname: svc\nweight: 100\nresources: {accelerators: T4:1}\nrun: a\n",
       "weight: unknown field; allowed here: kind, name, port, readiness"},
      {"ShorthandCheckpoint",
       "kind: service\nname: svc\ncheckpoint: {dir: /c}\nresources: {accelerators: T4:1}\nrun: a\n",
       "checkpoint: a replica keeps no training state"},
      {"DuplicateKey", WithVersions(v1, "port: 1\nport: 2\n"), "port: the key appears twice in the service spec"},
      {"TwoDocuments", WithVersions(v1) + "---\nkind: service\n",
       "service spec holds more than one YAML document (separated by ---); submit one service per file"},
  };
}

class ServiceSpecBad : public testing::TestWithParam<BadCase> {};

TEST_P(ServiceSpecBad, NamesTheFieldFirst) {
  const BadCase& c = GetParam();
  auto spec = ParseServiceSpec(c.yaml);
  ASSERT_FALSE(spec.ok()) << c.yaml;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(spec.status().message(), c.message_prefix))
      << "got: " << spec.status().message() << "\nwant a message starting: " << c.message_prefix;
}

INSTANTIATE_TEST_SUITE_P(ServiceSpec, ServiceSpecBad, testing::ValuesIn(BadCases()),
                         [](const testing::TestParamInfo<BadCase>& p) { return p.param.name; });

TEST(ServiceSpec, UnknownVersionFieldListsAVersionsFields) {
  auto spec = ParseServiceSpec(WithVersions("  - {name: a, resources: {accelerators: T4:1}, run: a, replicas: 2}\n"));
  ASSERT_FALSE(spec.ok());
  const std::string message(spec.status().message());
  EXPECT_TRUE(absl::StrContains(message, "allowed here: name, weight, model,")) << message;
  EXPECT_FALSE(absl::StrContains(message, "checkpoint")) << message;
  EXPECT_FALSE(absl::StrContains(message, "max_duration")) << message;
}

void ExpectSameSpec(const ServiceSpec& a, const ServiceSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.port, b.port);
  EXPECT_EQ(a.readiness, b.readiness);
  EXPECT_EQ(a.startup_budget, b.startup_budget);
  EXPECT_EQ(a.replicas, b.replicas);
  EXPECT_EQ(a.autoscaling, b.autoscaling);
  EXPECT_EQ(a.traffic, b.traffic);
  ASSERT_EQ(a.versions.size(), b.versions.size());
  for (size_t i = 0; i < a.versions.size(); ++i) {
    EXPECT_EQ(a.versions[i].name, b.versions[i].name);
    EXPECT_EQ(a.versions[i].weight_percent, b.versions[i].weight_percent);
    EXPECT_EQ(JobSpecToYaml(a.versions[i].run), JobSpecToYaml(b.versions[i].run));
  }
}

TEST(ServiceSpec, RoundTrips) {
  for (const std::string& yaml : {
           std::string(kIssueExample),
           WithVersions(
               R"(  - name: canary
    weight: 25
    resources: {accelerators: [H100-SXM-80GB:2, T4:0.5], capacity: [spot, on-demand], regions: [eu-west-1]}
    env: {HF_HOME: /cache, QUOTED: "a: b # c", EMPTY: "", NULLISH: "~", HF_TOKEN: {secret: hf}}
    image: vllm:0.6
    max_price: 2.5
    run: "serve --port $PORT"
  - name: main
    weight: 75
    model: models/tiny.json
    task: {kind: inference, seq_len: 2048}
    run: serve
)",
               "port: 9000\nstartup_budget: 1h30m250ms\nreplicas: {min: 2, max: 7, initial: 3}\n"
               "readiness: {path: \"/v2/health/ready?x=1#y\", period: 250ms, timeout: 2s, failure_threshold: "
               "5, success_threshold: 2, initial_delay: 1m}\n"
               "autoscaling: {target_concurrency: 0, target_kv_cache_use: 0.85, target_queue_depth: 0.1, "
               "stable_window: 2m, panic_window_percentage: 12.5, panic_threshold: 3.25, "
               "max_scale_up_rate: 1.0001, max_scale_down_rate: 1e3, scale_to_zero_grace: 0s}\n"
               "traffic: {sticky: {header: \"X-User|id~'\"}, activator: {queue: 0, timeout: 1s}, retries: 0}\n"),
           std::string("kind: service\nname: tiny\ntraffic: {sticky: {cookie: gpugeek-version}}\n"
                       "resources: {accelerators: L4:1}\nrun: vllm serve\n"),
       }) {
    auto first = ParseServiceSpec(yaml);
    ASSERT_TRUE(first.ok()) << first.status() << "\n" << yaml;
    const std::string rendered = ServiceSpecToYaml(*first);
    auto second = ParseServiceSpec(rendered);
    ASSERT_TRUE(second.ok()) << second.status() << "\n" << rendered;
    ExpectSameSpec(*first, *second);
    EXPECT_EQ(ServiceSpecToYaml(*second), rendered);
  }
}

TEST(ServiceSpec, RoundTripKeepsExactValues) {
  auto spec = ParseServiceSpec(
      WithVersions(kOneVersion, "autoscaling: {target_kv_cache_use: 0.1, panic_threshold: 1.1}\nport: 1\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto again = ParseServiceSpec(ServiceSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->autoscaling.target_kv_cache_use, 0.1);
  EXPECT_EQ(again->autoscaling.panic_threshold, 1.1);
  EXPECT_EQ(again->port, 1);
}

TEST(ServiceSpec, QuotedStringsKeepTheirBytes) {
  // A version's run part is rendered again for ParseJobSpec, and ServiceSpecToYaml renders it once more:
  // neither may turn a quoted string into a plain one that reads back otherwise.
  auto spec = ParseServiceSpec(WithVersions(
      "  - {name: a, resources: {accelerators: T4:1}, env: {E: \"\", N: \"~\", T: \"true\"}, run: \"serve\\r\"}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->versions[0].run.run, "serve\r");
  EXPECT_EQ(spec->versions[0].run.env.at("E"), "");
  EXPECT_EQ(spec->versions[0].run.env.at("N"), "~");
  EXPECT_EQ(spec->versions[0].run.env.at("T"), "true");
  auto again = ParseServiceSpec(ServiceSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->versions[0].run.run, "serve\r");
  EXPECT_EQ(again->versions[0].run.env, spec->versions[0].run.env);
}

TEST(ServiceSpec, RefusesADocumentOverOneMebibyte) {
  std::string yaml = WithVersions(kOneVersion, "# " + std::string(2 << 20, 'x') + "\n");
  auto spec = ParseServiceSpec(yaml);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(spec.status().message(), "spec: "));
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "over the 1 MiB limit")) << spec.status();
}

TEST(ServiceSpec, RefusesDeepNesting) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  auto spec = ParseServiceSpec(WithVersions(kOneVersion, "x: " + deep + "\n"));
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "nests deeper than 64 levels")) << spec.status();
  // Inside a version too: the limits hold for the whole document, before any version is read.
  spec = ParseServiceSpec(
      WithVersions("  - {name: a, resources: {accelerators: T4:1}, run: a, env: {X: " + deep + "}}\n"));
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "nests deeper than 64 levels")) << spec.status();
}

TEST(ServiceSpec, RefusesAnAliasBomb) {
  std::string yaml = "kind: service\nname: svc\n";
  yaml += "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const char p = static_cast<char>(c - 1);
    yaml +=
        fmt::format("{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", c, c, p, p, p, p, p, p, p, p, p, p);
  }
  yaml += "versions:\n" + std::string(kOneVersion);
  auto spec = ParseServiceSpec(yaml);
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StrContains(spec.status().message(), "more than 100000 values")) << spec.status();
}

TEST(ServiceSpec, AnchorsAcrossVersions) {
  auto spec = ParseServiceSpec(WithVersions(R"(  - name: a
    weight: 50
    resources: &gpu {accelerators: T4:1}
    run: &cmd serve --port $PORT
  - name: b
    weight: 50
    resources: *gpu
    env: {CMD: *cmd}
    run: *cmd
)"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->versions[1].run.run, "serve --port $PORT");
  EXPECT_EQ(spec->versions[1].run.env.at("CMD"), "serve --port $PORT");
  EXPECT_EQ(spec->versions[1].run.resources.any_of[0].count, 1);
}

}  // namespace
}  // namespace gpugeek::api
