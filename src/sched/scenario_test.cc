// Runs every scenario under testdata/sched/ (format: testdata/sched/README.md).

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "common/units.h"
#include "sched/framework.h"

namespace gpugeek::sched {
namespace {

std::vector<std::filesystem::path> Scenarios() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(GPUGEEK_SOURCE_DIR) + "/testdata/sched")) {
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

ResourceShape ShapeOf(const YAML::Node& r) {
  ResourceShape s;
  s.cpu_milli = r["cpu_milli"].as<int64_t>(0);
  s.memory_bytes = r["memory_gib"].as<uint64_t>(0) * kGiB;
  s.num_gpus = r["num_gpus"].as<int32_t>(0);
  s.gpu_milli = r["gpu_milli"].as<int32_t>(0);
  if (r["models"]) s.allowed_models = r["models"].as<std::vector<std::string>>();
  return s;
}

class SchedScenario : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(SchedScenario, PlacementsMatch) {
  const YAML::Node doc = YAML::LoadFile(GetParam().string());
  std::vector<NodeSpec> specs;
  for (const YAML::Node& n : doc["nodes"]) {
    NodeSpec s;
    s.name = n["name"].as<std::string>();
    s.cpu_milli = n["cpu_milli"].as<int64_t>();
    s.memory_bytes = n["memory_gib"].as<uint64_t>() * kGiB;
    s.gpu_count = n["gpus"].as<int32_t>(0);
    s.gpu_model = n["model"].as<std::string>("");
    specs.push_back(s);
  }
  auto cluster = Cluster::Create(specs);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (size_t i = 0; i < specs.size(); ++i) {
    const YAML::Node used = doc["nodes"][i]["gpu_used"];
    for (size_t g = 0; used && g < used.size(); ++g) {
      if (used[g].as<int32_t>() == 0) continue;
      Placement p;
      p.node = static_cast<NodeIndex>(i);
      p.num_gpus = 1;
      p.gpu_milli = used[g].as<int32_t>();
      p.gpus[0] = static_cast<uint8_t>(g);
      cluster->Bind(p);
    }
  }
  FrameworkOptions options;
  options.policy = doc["policy"].as<std::string>();
  options.seed = doc["seed"].as<uint64_t>(1);
  double weights = 0;
  for (const YAML::Node& t : doc["typical_pods"]) weights += t["weight"].as<double>(1);
  for (const YAML::Node& t : doc["typical_pods"]) {
    const ResourceShape s = ShapeOf(t);
    const PodShape ps = Compile(s, *cluster);
    options.context.typical_pods.push_back({s.cpu_milli, s.gpu_milli, s.num_gpus, "", ps.any_model, ps.model_mask,
                                            t["weight"].as<double>(1) / weights, 1});
  }
  auto fw = Framework::Create(options, &*cluster);
  ASSERT_TRUE(fw.ok()) << fw.status();
  AcceptAllBinder binder;
  for (const YAML::Node& step : doc["steps"]) {
    Request r;
    r.id = step["request"]["id"].as<std::string>();
    r.gang_size = step["request"]["gang"].as<int32_t>(1);
    r.alternatives.push_back(ShapeOf(step["request"]));
    auto d = (*fw)->Schedule(r, binder);
    ASSERT_TRUE(d.ok()) << r.id << ": " << d.status();
    const YAML::Node expect = step["expect"];
    if (expect.IsScalar()) {
      ASSERT_EQ(expect.as<std::string>(), "unschedulable");
      EXPECT_FALSE(d->scheduled) << r.id << " should be unschedulable";
      continue;
    }
    ASSERT_TRUE(d->scheduled) << r.id << " should be scheduled";
    std::vector<std::string> got, want = expect["nodes"].as<std::vector<std::string>>();
    for (const Placement& p : d->placements) got.push_back((*fw)->cluster().spec(p.node).name);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << r.id;
    if (expect["gpus"]) {
      const auto gpus = expect["gpus"].as<std::vector<int>>();
      const Placement& p = d->placements[0];
      EXPECT_EQ(std::vector<int>(p.gpus.begin(), p.gpus.begin() + p.num_gpus), gpus) << r.id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SchedScenario, ::testing::ValuesIn(Scenarios()),
                         [](const ::testing::TestParamInfo<std::filesystem::path>& param) {
                           std::string name = param.param.stem().string();
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace gpugeek::sched
