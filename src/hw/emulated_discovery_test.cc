#include "hw/emulated_discovery.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/units.h"
#include "hw/topology.h"

namespace gpugeek::hw {
namespace {

HostInfo TestHost() { return HostInfo{"testhost", 64, 512 * kGiB, 1, "Test CPU"}; }

NodeInventory Emulate(const std::string& spec, const std::string& host_name = "testhost") {
  EmulatedDiscoveryOptions options;
  options.spec = spec;
  options.host_name = host_name;
  options.host = TestHost();
  auto d = EmulatedDiscovery::Create(options);
  EXPECT_TRUE(d.ok()) << d.status();
  auto inv = (*d)->Discover();
  EXPECT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(ValidateInventory(*inv).ok()) << ValidateInventory(*inv);
  return *inv;
}

std::vector<std::vector<std::string>> Cells(const NodeInventory& inv) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : inv.links) {
    std::vector<std::string> r;
    for (const PeerLink& l : row) r.push_back(LinkCellLabel(l));
    cells.push_back(r);
  }
  return cells;
}

std::vector<int> Numa(const NodeInventory& inv) {
  std::vector<int> numa;
  for (const auto& g : inv.gpus) numa.push_back(g.numa_node);
  return numa;
}

TEST(EmulatedDiscovery, Hgx8H100IsNvSwitchAllToAllNv18) {
  NodeInventory inv = Emulate("8xH100-SXM-80GB");
  ASSERT_EQ(inv.gpus.size(), 8u);
  const std::vector<std::vector<std::string>> want = {
      {"X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18"},
      {"NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X"},
  };
  EXPECT_EQ(Cells(inv), want);
  EXPECT_EQ(Numa(inv), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  // 18 links x 50 GB/s = 900 GB/s, the H100 SXM datasheet's NVLink figure.
  EXPECT_EQ(inv.links[0][7].bytes_per_second, 900 * kGB);
  EXPECT_EQ(inv.links[0][1].pcie, LinkKind::kPix);
  EXPECT_EQ(inv.links[0][2].pcie, LinkKind::kNode);
  EXPECT_EQ(inv.links[0][4].pcie, LinkKind::kSys);
  for (const GpuDevice& g : inv.gpus) {
    EXPECT_EQ(g.model_id, "H100-SXM-80GB");
    EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");  // what NVML reports for this board
    EXPECT_EQ(g.vendor, Vendor::kNvidia);
    EXPECT_EQ(g.memory_total_bytes, 80 * kGiB);
    EXPECT_EQ(g.source, "emulated");
  }
  EXPECT_EQ(inv.host.numa_nodes, 2);  // raised from the test host's one node to cover both sockets
}

TEST(EmulatedDiscovery, A100PcieCardsAreNvLinkBridgedInPairs) {
  NodeInventory inv = Emulate("4xA100-PCIe-80GB");
  const std::vector<std::vector<std::string>> want = {
      {"X", "NV12", "SYS", "SYS"},
      {"NV12", "X", "SYS", "SYS"},
      {"SYS", "SYS", "X", "NV12"},
      {"SYS", "SYS", "NV12", "X"},
  };
  EXPECT_EQ(Cells(inv), want);
  EXPECT_EQ(Numa(inv), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(inv.links[0][1].bytes_per_second, 600 * kGB);  // three bridges, 12 links
  EXPECT_EQ(inv.links[0][1].pcie, LinkKind::kPix);
  EXPECT_EQ(inv.links[0][2].bytes_per_second, 64 * kGB);  // PCIe 4.0 x16, both directions
}

TEST(EmulatedDiscovery, Mi300xIsXgmiFullyConnected) {
  NodeInventory inv = Emulate("8xMI300X");
  ASSERT_EQ(inv.gpus.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      const PeerLink& l = inv.links[i][j];
      if (i == j) {
        EXPECT_EQ(l.kind, LinkKind::kSelf);
        continue;
      }
      EXPECT_EQ(l.kind, LinkKind::kXgmi) << i << "-" << j;
      EXPECT_EQ(l.links, 1);
      EXPECT_EQ(l.bytes_per_second, 128 * kGB);  // 896 GB/s over 7 links
      EXPECT_EQ(LinkCellLabel(l), "XGMI");
    }
  }
  EXPECT_EQ(inv.gpus[0].vendor, Vendor::kAmd);
  EXPECT_EQ(inv.gpus[0].memory_total_bytes, 192 * kGiB);
}

TEST(EmulatedDiscovery, V100SxmIsTheDgx1HybridCubeMesh) {
  NodeInventory inv = Emulate("8xV100-SXM2-32GB");
  const std::vector<std::vector<std::string>> want = {
      {"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"}, {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
      {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"}, {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
      {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"}, {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
      {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"}, {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"},
  };
  EXPECT_EQ(Cells(inv), want);
  for (const auto& row : inv.links) {
    int links = 0;
    for (const PeerLink& l : row) links += l.kind == LinkKind::kNvLink ? l.links : 0;
    EXPECT_EQ(links, 6);  // every V100 uses all six of its links
  }
}

TEST(EmulatedDiscovery, SmallSxmBoardsLinkDirectlyAndSplitLinks) {
  // HGX A100 4-GPU: each GPU's 12 links go four to each of its three peers.
  NodeInventory inv = Emulate("4xA100-SXM-80GB");
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      if (i != j) {
        EXPECT_EQ(LinkCellLabel(inv.links[i][j]), "NV4");
      }
    }
  }
}

TEST(EmulatedDiscovery, SixteenSxmGpusFormTwoBoards) {
  NodeInventory inv = Emulate("16xH100-SXM-80GB");
  EXPECT_EQ(LinkCellLabel(inv.links[0][7]), "NV18");
  EXPECT_EQ(LinkCellLabel(inv.links[8][15]), "NV18");
  EXPECT_TRUE(IsPciePath(inv.links[0][8].kind)) << LinkCellLabel(inv.links[0][8]);
}

TEST(EmulatedDiscovery, Mi250xGcdsPairInPackage) {
  NodeInventory inv = Emulate("4xMI250X");
  EXPECT_EQ(LinkCellLabel(inv.links[0][1]), "XGMI4");
  EXPECT_EQ(inv.links[0][1].bytes_per_second, 400 * kGB);  // 4 links x 100 GB/s
  EXPECT_EQ(LinkCellLabel(inv.links[2][3]), "XGMI4");
  EXPECT_TRUE(IsPciePath(inv.links[0][2].kind));
}

TEST(EmulatedDiscovery, PcieOnlyCardsUsePcieSwitchesAndSockets) {
  NodeInventory inv = Emulate("2xT4");
  EXPECT_EQ(Cells(inv), (std::vector<std::vector<std::string>>{{"X", "SYS"}, {"SYS", "X"}}));
  NodeInventory four = Emulate("4xL4");
  EXPECT_EQ(Cells(four), (std::vector<std::vector<std::string>>{
                             {"X", "PIX", "SYS", "SYS"},
                             {"PIX", "X", "SYS", "SYS"},
                             {"SYS", "SYS", "X", "PIX"},
                             {"SYS", "SYS", "PIX", "X"},
                         }));
  NodeInventory eight = Emulate("8xL40S");
  EXPECT_EQ(LinkCellLabel(eight.links[0][1]), "PIX");
  EXPECT_EQ(LinkCellLabel(eight.links[0][2]), "NODE");
  EXPECT_EQ(LinkCellLabel(eight.links[0][4]), "SYS");
}

TEST(EmulatedDiscovery, MixedSpecKeepsGroupsApart) {
  NodeInventory inv = Emulate("8xH100-SXM-80GB,2xL4");
  ASSERT_EQ(inv.gpus.size(), 10u);
  EXPECT_EQ(inv.gpus[8].model_id, "L4");
  EXPECT_EQ(inv.gpus[9].index, 9);
  EXPECT_EQ(LinkCellLabel(inv.links[0][7]), "NV18");
  EXPECT_EQ(LinkCellLabel(inv.links[0][8]), "NODE");  // H100 0 and L4 0 both on socket 0
  EXPECT_EQ(LinkCellLabel(inv.links[0][9]), "SYS");
  EXPECT_EQ(LinkCellLabel(inv.links[8][9]), "SYS");
}

TEST(EmulatedDiscovery, NamesResolveThroughTheCatalog) {
  NodeInventory a = Emulate("8xH100");
  NodeInventory b = Emulate("8xNVIDIA H100 80GB HBM3");
  NodeInventory c = Emulate("8xH100-SXM-80GB");
  EXPECT_EQ(a, c);  // same canonical spec, so the same UUIDs too
  EXPECT_EQ(b, c);
}

TEST(EmulatedDiscovery, UuidsAndBusIdsAreDeterministicAndUnique) {
  NodeInventory a = Emulate("8xH100-SXM-80GB,2xL4,4xMI300X");
  NodeInventory again = Emulate("8xH100-SXM-80GB,2xL4,4xMI300X");
  NodeInventory other_host = Emulate("8xH100-SXM-80GB,2xL4,4xMI300X", "otherhost");
  std::set<std::string> uuids, buses;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    EXPECT_EQ(a.gpus[i].uuid, again.gpus[i].uuid);
    EXPECT_NE(a.gpus[i].uuid, other_host.gpus[i].uuid);
    EXPECT_TRUE(a.gpus[i].uuid.starts_with("GPU-emu-")) << a.gpus[i].uuid;
    uuids.insert(a.gpus[i].uuid);
    buses.insert(a.gpus[i].pci_bus_id);
  }
  EXPECT_EQ(uuids.size(), a.gpus.size());
  EXPECT_EQ(buses.size(), a.gpus.size());
  EXPECT_EQ(a.gpus[0].pci_bus_id, "0000:10:00.0");
  NodeInventory big = Emulate("64xT4");
  EXPECT_EQ(big.gpus[63].pci_bus_id, "0003:e2:00.0");
}

TEST(EmulatedDiscovery, SamplesAreIdleAndHealthyUntilScripted) {
  EmulatedDiscoveryOptions options{"2xH100-SXM-80GB", "testhost", TestHost(), nullptr};
  auto d = EmulatedDiscovery::Create(options);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->Sample().status().code(), absl::StatusCode::kFailedPrecondition);
  auto inv = (*d)->Discover();
  ASSERT_TRUE(inv.ok());
  auto samples = (*d)->Sample();
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 2u);
  const GpuSample& s = (*samples)[0];
  EXPECT_EQ(s.telemetry.utilization_percent, 0u);
  EXPECT_EQ(s.telemetry.memory_used_bytes, 0u);
  EXPECT_EQ(s.telemetry.temperature_celsius, 30);
  EXPECT_EQ(s.telemetry.power_milliwatts, 70000u);  // a tenth of the 700 W TDP
  EXPECT_TRUE(s.health.Healthy());
  EXPECT_EQ(s.health.Summary(), "ok");

  GpuSample lost;
  lost.health.lost = true;
  ASSERT_TRUE((*d)->SetSample(1, lost).ok());
  EXPECT_EQ((*d)->SetSample(2, lost).code(), absl::StatusCode::kInvalidArgument);
  samples = (*d)->Sample();
  ASSERT_TRUE(samples.ok());
  EXPECT_FALSE((*samples)[1].health.Healthy());
  EXPECT_EQ((*samples)[1].health.Summary(), "lost");
  ASSERT_TRUE(ApplySamples(*samples, *inv).ok());
  EXPECT_TRUE(inv->gpus[1].health.lost);
  EXPECT_FALSE(ApplySamples({}, *inv).ok());
}

TEST(EmulatedDiscovery, BadSpecIsRejectedAtCreate) {
  auto d = EmulatedDiscovery::Create({"8xNoSuchGPU", "h", TestHost(), nullptr});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Topology, MatrixRendersLikeNvidiaSmiWithLegend) {
  NodeInventory inv = Emulate("4xA100-PCIe-80GB");
  std::string text = RenderTopologyMatrix(inv);
  EXPECT_NE(text.find("GPU0"), std::string::npos);
  EXPECT_NE(text.find("NV12"), std::string::npos);
  EXPECT_NE(text.find("NUMA"), std::string::npos);
  EXPECT_NE(text.find("NV#   = NVLink"), std::string::npos);
  EXPECT_NE(text.find("SYS   ="), std::string::npos);
  EXPECT_EQ(text.find("XGMI#"), std::string::npos);  // only labels that appear are explained
  EXPECT_EQ(RenderTopologyMatrix(NodeInventory{}), "");
}

TEST(Topology, LinkFiguresComeFromTheCatalog) {
  const GpuCatalog& c = GpuCatalog::Builtin();
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("A100-SXM-80GB")), 12);
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("H100-SXM-80GB")), 18);
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("H200-SXM-141GB")), 18);
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("B200-180GB")), 18);
  EXPECT_EQ(NvLinkBytesPerLink(*c.FindById("B200-180GB")), 100 * kGB);  // NVLink5
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("H100-PCIe-80GB")), 12);
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("RTX-3090")), 4);
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("V100-SXM2-32GB")), 6);
  EXPECT_EQ(NvLinkLinksPerGpu(*c.FindById("L4")), 0);
  EXPECT_EQ(XgmiBytesPerLink(*c.FindById("MI300X")), 128 * kGB);
  EXPECT_EQ(XgmiBytesPerLink(*c.FindById("MI250X")), 100 * kGB);
  EXPECT_EQ(PciePathFromNuma(0, 0), LinkKind::kNode);
  EXPECT_EQ(PciePathFromNuma(0, 1), LinkKind::kSys);
  EXPECT_EQ(PciePathFromNuma(-1, 1), LinkKind::kUnknown);
}

TEST(Device, LinkLabelsRoundTripAndValidationCatchesBrokenMatrices) {
  for (LinkKind k : {LinkKind::kSelf, LinkKind::kNvLink, LinkKind::kXgmi, LinkKind::kPix, LinkKind::kPxb,
                     LinkKind::kPhb, LinkKind::kNode, LinkKind::kSys, LinkKind::kUnknown}) {
    EXPECT_EQ(LinkKindFromLabel(LinkKindLabel(k)), k);
  }
  EXPECT_EQ(LinkKindFromLabel("nv"), LinkKind::kNvLink);
  EXPECT_FALSE(LinkKindFromLabel("NVX").has_value());

  NodeInventory inv = Emulate("2xL4");
  inv.links[0][1].kind = LinkKind::kNode;  // now differs from links[1][0]
  EXPECT_FALSE(ValidateInventory(inv).ok());
  inv = Emulate("2xL4");
  inv.gpus[1].uuid = inv.gpus[0].uuid;
  EXPECT_FALSE(ValidateInventory(inv).ok());
  inv = Emulate("2xL4");
  inv.links[1][1].kind = LinkKind::kSys;
  EXPECT_FALSE(ValidateInventory(inv).ok());
  inv = Emulate("2xL4");
  inv.links.pop_back();
  EXPECT_FALSE(ValidateInventory(inv).ok());
}

TEST(Device, HealthSummaryNamesTheWorstProblem) {
  GpuHealth h;
  EXPECT_TRUE(h.Healthy());  // missing counters are not a fault
  h.xid_errors = {79};
  EXPECT_EQ(h.Summary(), "xid:79");
  h.retirement_pending = true;
  EXPECT_EQ(h.Summary(), "pending-retire");
  h.ecc_uncorrected = 3;
  EXPECT_EQ(h.Summary(), "ecc:3");
  h.error = "power: Unknown Error";
  EXPECT_EQ(h.Summary(), "error");
  h.lost = true;
  EXPECT_EQ(h.Summary(), "lost");
  EXPECT_FALSE(h.Healthy());
}

}  // namespace
}  // namespace gpugeek::hw
