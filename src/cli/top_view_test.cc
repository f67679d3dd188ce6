// Unit tests of `gpugeek top`'s screen (top_view.h): hand-written API JSON in, exact lines out.
#include "cli/top_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr uint64_t kGiB = uint64_t{1} << 30;

TimePoint At(const std::string& rfc3339) {
  absl::Time t;
  std::string err;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) << err;
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(absl::ToUnixNanos(t))));
}

json Gpu(int index, const std::string& model, uint64_t memory) {
  return {{"index", index},
          {"model_id", model},
          {"name", "NVIDIA " + model},
          {"memory_total_bytes", memory},
          {"telemetry", json::object()},
          {"health", {{"lost", false}, {"xid_errors", json::array()}, {"error", ""}}}};
}

json Sample(int util, uint64_t used, int temp, int milliwatts, json health = nullptr) {
  if (health.is_null()) health = {{"lost", false}, {"xid_errors", json::array()}, {"error", ""}};
  return {{"telemetry",
           {{"utilization_percent", util},
            {"memory_used_bytes", used},
            {"temperature_celsius", temp},
            {"power_milliwatts", milliwatts}}},
          {"health", health}};
}

// Two nodes (one down, with no samples and a lost GPU), a pool, and five jobs in every kind of state: the
// GPUs' JOBS are the running ones (not the FAILED j-00000005's, nor the released allocation of j-00000001).
json PoolData() {
  json lost_l4 = Gpu(0, "L4", 24 * kGiB);
  lost_l4["health"]["lost"] = true;
  json nodes = json::array();
  nodes.push_back({{"name", "node-a"},
                   {"state", "ready"},
                   {"capacity_type", "on-demand"},
                   {"gpu_milli_allocated", 1500},
                   {"jobs", {"j-00000002", "j-00000004"}},
                   {"inventory", {{"gpus", {Gpu(0, "A100-SXM-80GB", 80 * kGiB), Gpu(1, "A100-SXM-80GB", 80 * kGiB)}}}},
                   {"samples",
                    {Sample(62, 20 * kGiB, 45, 301400),
                     Sample(100, 80 * kGiB, 71, 399600,
                            {{"lost", false}, {"xid_errors", {79}}, {"error", ""}, {"ecc_uncorrected", 2}})}}});
  nodes.push_back({{"name", "node-b"},
                   {"state", "down"},
                   {"capacity_type", "spot"},
                   {"gpu_milli_allocated", 0},
                   {"jobs", json::array()},
                   {"inventory", {{"gpus", {lost_l4}}}},
                   {"samples", json::array()}});
  json pool = {{"rows",
                {{{"gpu_model", "A100-SXM-80GB"}, {"gpus", 2}, {"gpus_fully_free", 0}},
                 {{"gpu_model", "L4"}, {"gpus", 1}, {"gpus_fully_free", 1}}}},
               {"gpu_milli_total", 3000},
               {"gpu_milli_allocated", 1500},
               {"frag_rate", 0.125},
               {"policy", "FGDFit"},
               {"pending_jobs", 1}};
  const auto member = [](const std::string& node, std::vector<int> gpus, int milli) {
    return json{{"rank", 0}, {"node", node}, {"gpus", gpus}, {"gpu_milli", milli}};
  };
  json jobs = json::array();
  jobs.push_back({{"id", "j-00000001"},
                  {"name", "done"},
                  {"tenant", "team-a"},
                  {"state", "SUCCEEDED"},
                  {"created_at", "2024-05-01T09:00:00.000Z"},
                  {"updated_at", "2024-05-01T10:00:00.000Z"},
                  {"allocation", {{"members", {member("node-a", {0}, 1000)}}, {"released", true}}}});
  jobs.push_back({{"id", "j-00000002"},
                  {"name", "train"},
                  {"tenant", "team-b"},
                  {"state", "RUNNING"},
                  {"created_at", "2024-05-01T11:00:00.000Z"},
                  {"updated_at", "2024-05-01T11:00:01.000Z"},
                  {"allocation", {{"members", {member("node-a", {1}, 1000)}}}}});
  jobs.push_back({{"id", "j-00000003"},
                  {"name", "waiting"},
                  {"tenant", ""},
                  {"state", "PENDING"},
                  {"created_at", "2024-05-01T11:59:30.000Z"},
                  {"updated_at", "2024-05-01T11:59:30.000Z"},
                  {"spec_yaml", "name: waiting\nresources: {accelerators: A100-SXM-80GB:4}\nrun: sleep 1\n"},
                  {"allocation", nullptr},
                  {"plan", nullptr}});
  jobs.push_back({{"id", "j-00000004"},
                  {"name", "infer"},
                  {"tenant", "team-a"},
                  {"state", "RUNNING"},
                  {"created_at", "2024-05-01T11:55:00.000Z"},
                  {"updated_at", "2024-05-01T11:55:01.000Z"},
                  {"allocation", {{"members", {member("node-a", {0}, 500)}}}}});
  jobs.push_back({{"id", "j-00000005"},
                  {"name", "broken"},
                  {"tenant", "team-b"},
                  {"state", "FAILED"},
                  {"created_at", "2024-04-29T12:00:00.000Z"},
                  {"updated_at", "2024-05-01T11:00:00.000Z"},
                  {"allocation", {{"members", {member("node-a", {0, 1}, 1000), member("node-b", {0}, 1000)}}}}});
  return {{"nodes", nodes}, {"pool", pool}, {"jobs", jobs}};
}

TopScreen Screen(json data = PoolData()) {
  return {.server = "http://10.0.0.1:8470",
          .clock = "2024-05-01 12:00:00",
          .now = At("2024-05-01T12:00:00Z"),
          .data = std::move(data),
          .hint = "q: quit"};
}

const std::vector<std::string> kFullScreen = {
    "gpugeek top  http://10.0.0.1:8470  2024-05-01 12:00:00  q: quit",
    "nodes 1/2 up  GPUs 2/3 allocated  milli-GPU 1500/3000  FGD frag 12.5% (policy FGDFit)  pending 1",
    "",
    "NODE    STATE  CAPACITY   GPUS               MILLI-GPU",
    "node-a  ready  on-demand  2 x A100-SXM-80GB  1500/2000",
    "node-b  down   spot       1 x L4                0/1000",
    "",
    "  GPU  UTIL               MEMORY                          TEMP  POWER  HEALTH         JOBS",
    "node-a  2 x A100-SXM-80GB",
    "    0  [||||||    ]  62%  [|||       ] 20.0 GiB/80.0 GiB   45C   301W  ok             j-00000004",
    "    1  [||||||||||] 100%  [||||||||||] 80.0 GiB/80.0 GiB   71C   400W  ecc 2, xid 79  j-00000002",
    "node-b  1 x L4 [down]",
    "    0  -                  -                                  -      -  lost",
    "",
    "ID          NAME     STATE      TENANT  GPUS  NODES          AGE",
    "j-00000002  train    RUNNING    team-b     1  node-a         60m",
    "j-00000004  infer    RUNNING    team-a   0.5  node-a          5m",
    "j-00000003  waiting  PENDING    -          4  -              30s",
    "j-00000005  broken   FAILED     team-b     3  node-a,node-b   2d",
    "j-00000001  done     SUCCEEDED  team-a     1  node-a          3h",
};

TEST(TopViewTest, WholeScreenWithoutLimits) { EXPECT_THAT(RenderTop(Screen(), 0, 0), ElementsAreArray(kFullScreen)); }

TEST(TopViewTest, ScreenThatFitsIsNotCut) { EXPECT_THAT(RenderTop(Screen(), 200, 20), ElementsAreArray(kFullScreen)); }

TEST(TopViewTest, RowsAreSharedOutAndCutRowsSayHowMany) {
  // 12 lines: 2 header lines, 3 x (blank + table header) fixed, 4 rows dealt one per table in turn:
  // nodes 2 of 2, GPUs 1 of 5 (a "+3 more GPUs" line), jobs 1 of 5 ("+5 more jobs").
  EXPECT_THAT(RenderTop(Screen(), 0, 12),
              ElementsAre(kFullScreen[0], kFullScreen[1], "", kFullScreen[3], kFullScreen[4], kFullScreen[5], "",
                          kFullScreen[7], "+3 more GPUs", "", kFullScreen[14], "+5 more jobs"));
  // 15 lines: 7 rows: nodes 2, GPUs 3 (title, GPU 0, "+2 more"), jobs 2 (one job, "+4 more").
  EXPECT_THAT(RenderTop(Screen(), 0, 15),
              ElementsAre(kFullScreen[0], kFullScreen[1], "", kFullScreen[3], kFullScreen[4], kFullScreen[5], "",
                          kFullScreen[7], kFullScreen[8], kFullScreen[9], "+2 more GPUs", "", kFullScreen[14],
                          kFullScreen[15], "+4 more jobs"));
}

TEST(TopViewTest, TablesThatDoNotFitAreLeftOutFromTheBottom) {
  // 7 lines: the nodes table (blank, header, 2 rows) and the GPUs' blank + header + one line do not all
  // fit: only the nodes table is shown, then the screen ends.
  EXPECT_THAT(RenderTop(Screen(), 0, 7),
              ElementsAre(kFullScreen[0], kFullScreen[1], "", kFullScreen[3], kFullScreen[4], kFullScreen[5]));
  // 5 lines: the nodes table with one line left for its rows.
  EXPECT_THAT(RenderTop(Screen(), 0, 5),
              ElementsAre(kFullScreen[0], kFullScreen[1], "", kFullScreen[3], "+2 more nodes"));
  EXPECT_THAT(RenderTop(Screen(), 0, 1), ElementsAre(kFullScreen[0]));
}

TEST(TopViewTest, LinesAreCutToTheWidth) {
  const std::vector<std::string> lines = RenderTop(Screen(), 24, 0);
  ASSERT_EQ(lines.size(), kFullScreen.size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], kFullScreen[i].substr(0, 24)) << i;
  EXPECT_EQ(lines[9], "    0  [||||||    ]  62%");
}

TEST(TopViewTest, FailedRefreshKeepsTheLastDataUnderAnErrorLine) {
  TopScreen screen = Screen();
  screen.error = "cannot reach http://10.0.0.1:8470: Connection refused (retrying every 1s)";
  const std::vector<std::string> lines = RenderTop(screen, 0, 0);
  ASSERT_EQ(lines.size(), kFullScreen.size() + 1);
  EXPECT_EQ(lines[1], kFullScreen[1]);
  EXPECT_EQ(lines[2], "! cannot reach http://10.0.0.1:8470: Connection refused (retrying every 1s)");
  EXPECT_EQ(lines[3], "");
  EXPECT_EQ(lines.back(), kFullScreen.back());
}

TEST(TopViewTest, ServicesShowTheConfiguredAndTheObservedSplit) {
  TopScreen screen = Screen();
  screen.data["services"] = json::array({{{"name", "gpt"},
                                          {"ready", 3},
                                          {"versions",
                                           {{{"name", "v1"}, {"weight", 90}, {"requests", 8990}, {"desired", 2}},
                                            {{"name", "v2"}, {"weight", 10}, {"requests", 1010}, {"desired", 1}}}}}});
  const std::vector<std::string> lines = RenderTop(screen, 0, 0);
  ASSERT_EQ(lines.size(), kFullScreen.size() + 4);
  EXPECT_THAT(std::vector<std::string>(lines.end() - 4, lines.end()),
              ElementsAre("", "SERVICE  VERSION  WEIGHT  REQUESTS  SHARE  REPLICAS  READY",
                          "gpt      v1          90%      8990  89.9%         2      3",
                          "         v2          10%      1010  10.1%         1"));
}

TEST(TopViewTest, NoDataYet) {
  TopScreen screen = Screen(nullptr);
  screen.hint = "";
  EXPECT_THAT(RenderTop(screen, 80, 24), ElementsAre("gpugeek top  http://10.0.0.1:8470  2024-05-01 12:00:00",
                                                     "waiting for the first refresh..."));
  screen.error = "Connection refused";
  EXPECT_THAT(RenderTop(screen, 80, 24),
              ElementsAre("gpugeek top  http://10.0.0.1:8470  2024-05-01 12:00:00", "! Connection refused"));
}

TEST(TopViewTest, EmptyPool) {
  json data = {{"nodes", json::array()},
               {"pool",
                {{"rows", json::array()},
                 {"gpu_milli_total", 0},
                 {"gpu_milli_allocated", 0},
                 {"frag_rate", 0.0},
                 {"policy", "FGDFit"},
                 {"pending_jobs", 0}}},
               {"jobs", json::array()}};
  EXPECT_THAT(RenderTop(Screen(data), 0, 0),
              ElementsAre(kFullScreen[0],
                          "nodes 0/0 up  GPUs 0/0 allocated  milli-GPU 0/0  FGD frag 0.0% (policy FGDFit)  pending 0",
                          "", "No nodes registered (start one with `gpugeek agent --server URL`).", "", "No jobs."));
}

TEST(TopViewTest, PendingJobShowsThePlannersGpuCount) {
  json data = PoolData();
  data["jobs"] =
      json::array({{{"id", "j-00000009"},
                    {"name", "llama"},
                    {"tenant", "ml"},
                    {"state", "PENDING"},
                    {"created_at", "2024-05-01T11:59:58.000Z"},
                    {"spec_yaml", "name: llama\nmodel: m.json\nrun: x\n"},
                    {"plan", {{"best", "8 x H100"}, {"alternatives", {{{"gpu_model", "H100"}, {"gpus", 8}}}}}},
                    {"allocation", nullptr}}});
  const std::vector<std::string> lines = RenderTop(Screen(data), 0, 0);
  EXPECT_EQ(lines[lines.size() - 2], "ID          NAME   STATE    TENANT  GPUS  NODES  AGE");
  EXPECT_EQ(lines.back(), "j-00000009  llama  PENDING  ml         8  -       2s");
}

TEST(TopViewTest, Bars) {
  EXPECT_EQ(Bar(0, 10), "[          ]");
  EXPECT_EQ(Bar(4.9, 10), "[          ]");
  EXPECT_EQ(Bar(5, 10), "[|         ]");
  EXPECT_EQ(Bar(62, 10), "[||||||    ]");
  EXPECT_EQ(Bar(65, 10), "[|||||||   ]");
  EXPECT_EQ(Bar(100, 10), "[||||||||||]");
  EXPECT_EQ(Bar(250, 10), "[||||||||||]");
  EXPECT_EQ(Bar(-3, 10), "[          ]");
  EXPECT_EQ(Bar(50, 4), "[||  ]");
}

TEST(TopViewTest, Ages) {
  const TimePoint now = At("2024-05-01T12:00:00Z");
  EXPECT_EQ(Age("2024-05-01T11:59:18.000Z", now), "42s");
  EXPECT_EQ(Age("2024-05-01T12:00:05.000Z", now), "0s");  // a server clock slightly ahead
  EXPECT_EQ(Age("2024-05-01T11:00:00.000Z", now), "60m");
  EXPECT_EQ(Age("2024-04-30T12:00:00.000Z", now), "24h");
  EXPECT_EQ(Age("2024-04-28T12:00:00.000Z", now), "3d");
  EXPECT_EQ(Age("yesterday", now), "-");
}

}  // namespace
}  // namespace gpugeek::cli
