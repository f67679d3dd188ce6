#include "hw/inventory_json.h"

#include <gtest/gtest.h>

#include "common/units.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::hw {
namespace {

NodeInventory Sampled(const std::string& spec) {
  EmulatedDiscoveryOptions options{spec, "jsonhost", HostInfo{"jsonhost", 32, 256 * kGiB, 2, "CPU \"quoted\""},
                                   nullptr};
  auto d = EmulatedDiscovery::Create(options);
  EXPECT_TRUE(d.ok());
  auto inv = (*d)->Discover();
  GpuSample odd;
  odd.telemetry.utilization_percent = 97;
  odd.telemetry.temperature_celsius = -5;  // negative values survive
  odd.health.lost = true;
  odd.health.ecc_uncorrected = 4;
  odd.health.retirement_pending = true;
  odd.health.xid_errors = {48, 79};
  odd.health.error = "utilization: GPU is lost (NVML error 15)";
  EXPECT_TRUE((*d)->SetSample(static_cast<int>(inv->gpus.size()) - 1, odd).ok());
  auto samples = (*d)->Sample();
  EXPECT_TRUE(ApplySamples(*samples, *inv).ok());
  inv->problems = {"nvml: cannot load libnvidia-ml.so.1: not found"};
  return *inv;
}

TEST(InventoryJson, RoundTripsEveryField) {
  for (const char* spec : {"8xH100-SXM-80GB", "8xMI300X,2xL4", "4xA100-PCIe-80GB", "1xT4"}) {
    NodeInventory inv = Sampled(spec);
    inv.gpus[0].model_id = "";  // an unknown model round-trips as such
    inv.gpus[0].numa_node = -1;
    nlohmann::json j = InventoryToJson(inv);
    EXPECT_EQ(j["schema"], kInventorySchema);
    auto back = ParseInventoryJson(j.dump());
    ASSERT_TRUE(back.ok()) << spec << ": " << back.status();
    EXPECT_EQ(*back, inv) << spec;
  }
}

TEST(InventoryJson, OmitsUnknownTelemetryAndKeepsLinksReadable) {
  NodeInventory inv = Sampled("2xH100-SXM-80GB");  // device 1 carries the scripted sample
  nlohmann::json j = InventoryToJson(inv);
  EXPECT_FALSE(j["gpus"][1]["telemetry"].contains("power_milliwatts"));
  EXPECT_EQ(j["gpus"][1]["health"]["xid_errors"], nlohmann::json({48, 79}));
  EXPECT_EQ(j["links"][0][1]["kind"], "NV");
  EXPECT_EQ(j["links"][0][1]["links"], 18);
  EXPECT_EQ(j["links"][0][0]["kind"], "X");
  EXPECT_EQ(j["gpus"][0]["vendor"], "nvidia");
}

TEST(InventoryJson, RejectsBadInput) {
  auto code = [](std::string_view text) { return ParseInventoryJson(text).status().code(); };
  EXPECT_EQ(code("{"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("[]"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("{\"schema\": \"other/v9\"}"), absl::StatusCode::kInvalidArgument);

  nlohmann::json good = InventoryToJson(Sampled("2xL4"));
  nlohmann::json j = good;
  j["gpus"][0].erase("uuid");
  EXPECT_NE(InventoryFromJson(j).status().message().find("uuid"), std::string::npos);
  j = good;
  j["gpus"][0]["vendor"] = "intel";
  EXPECT_NE(InventoryFromJson(j).status().message().find("unknown vendor"), std::string::npos);
  j = good;
  j["links"][0][1]["kind"] = "NVX";
  EXPECT_NE(InventoryFromJson(j).status().message().find("unknown link kind 'NVX'"), std::string::npos);
  j = good;
  j["links"][0][1]["kind"] = "PIX";  // now asymmetric
  EXPECT_FALSE(InventoryFromJson(j).ok());
  j = good;
  j["host"]["cpu_cores"] = "many";
  EXPECT_FALSE(InventoryFromJson(j).ok());
}

TEST(InventoryJson, SamplesRoundTrip) {
  GpuSample s;
  s.telemetry.power_milliwatts = 123456;
  s.health.retired_pages = 2;
  auto back = SampleFromJson(SampleToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(SampleFromJson(nlohmann::json::object()).ok());
}

}  // namespace
}  // namespace gpugeek::hw
