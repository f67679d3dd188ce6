#include "sched/framework.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sched/registry.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

class RefusingBinder final : public Binder {
 public:
  absl::Status Bind(const Request&, std::span<const Placement>) override {
    return absl::UnavailableError("store down");
  }
};

std::unique_ptr<Framework> Make(Cluster* c, const std::string& policy = "BestFit", uint64_t seed = 1) {
  FrameworkOptions o;
  o.policy = policy;
  o.seed = seed;
  o.context.typical_pods = {TypicalPod{1000, 1000, 1, "", true, 0, 1.0, 1}};
  auto fw = Framework::Create(o, c);
  EXPECT_TRUE(fw.ok()) << fw.status();
  return *std::move(fw);
}

TEST(FrameworkTest, GangIsAllOrNothing) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4"), Node("b", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  // 5 members of 1 GPU on 4 GPUs: nothing may stay reserved.
  auto d = fw->Schedule(Req("g5", Shape(1000, 1, 1000), 5), binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  EXPECT_TRUE(d->placements.empty());
  EXPECT_EQ(c->allocated_gpu_milli(), 0);
  EXPECT_EQ(c->cpu_free(0) + c->cpu_free(1), 16000);
  ASSERT_EQ(d->reasons.size(), 2u);  // explained with the 4 fitting members in place
  EXPECT_EQ(d->reasons[0].plugin, "GpuShareFit");
  // 4 members fit exactly.
  d = fw->Schedule(Req("g4", Shape(1000, 1, 1000), 4), binder);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->scheduled);
  EXPECT_EQ(d->placements.size(), 4u);
  EXPECT_EQ(c->allocated_gpu_milli(), 4000);
  fw->Release(d->placements);
  EXPECT_EQ(c->allocated_gpu_milli(), 0);
}

TEST(FrameworkTest, DistinctNodesPutEachMemberOnItsOwnNode) {
  auto c = Cluster::Create({Node("a", 8000, 8, "H100"), Node("b", 8000, 8, "H100"), Node("c", 8000, 2, "H100")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  Request r = Req("ranks", Shape(1000, 4, 1000), 2);
  r.distinct_nodes = true;
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->scheduled);
  EXPECT_NE(d->placements[0].node, d->placements[1].node);  // BestFit alone would stack both on one node
  // Three such members need three nodes with 4 free GPUs; node c has 2: all or nothing.
  fw->Release(d->placements);
  r.gang_size = 3;
  d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  EXPECT_EQ(c->allocated_gpu_milli(), 0);
}

TEST(FrameworkTest, AlternativesInOrderAndModelConstraints) {
  auto c = Cluster::Create({Node("t4", 8000, 2, "T4"), Node("a100", 8000, 4, "A100")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  Request r;
  r.id = "alt";
  r.alternatives = {Shape(0, 4, 1000, {"H200"}), Shape(0, 4, 1000, {"A100"}), Shape(0, 2, 1000)};
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->scheduled);
  EXPECT_EQ(d->alternative, 1);
  EXPECT_EQ(d->placements[0].node, 1);
  // T4 only: the A100 node is rejected for its model.
  d = fw->Schedule(Req("t4only", Shape(0, 1, 1000, {"T4"})), binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 0);
}

TEST(FrameworkTest, UnschedulableSaysWhyPerNode) {
  auto c = Cluster::Create({Node("small", 1000, 1, "T4"), Node("cpu", 64000, 0, "")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  auto d = fw->Schedule(Req("big", Shape(2000, 1, 1000)), binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  ASSERT_EQ(d->reasons.size(), 2u);
  EXPECT_EQ(d->reasons[0].plugin, "NodeResourcesFit");
  EXPECT_NE(d->reasons[0].reason.find("insufficient cpu"), std::string::npos);
  EXPECT_EQ(d->reasons[1].reason, "node has no GPU");
}

TEST(FrameworkTest, BinderErrorUnreserves) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  RefusingBinder binder;
  auto d = fw->Schedule(Req("r", Shape(1000, 1, 500)), binder);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c->allocated_gpu_milli(), 0);
  EXPECT_EQ(c->cpu_free(0), 8000);
}

TEST(FrameworkTest, InvalidRequestsAndPoliciesAreErrors) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  EXPECT_EQ(fw->Schedule(Req("r", Shape(0, 2, 500)), binder).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fw->Schedule(Req("r", Shape(0, 1, 1001)), binder).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fw->Schedule(Req("r", Shape(0, 1, 500), 0), binder).status().code(), absl::StatusCode::kInvalidArgument);
  FrameworkOptions o;
  o.policy = "NoSuchPolicy";
  EXPECT_EQ(Framework::Create(o, &*c).status().code(), absl::StatusCode::kNotFound);
  o.policy = "FGD";  // needs typical pods
  EXPECT_EQ(Framework::Create(o, &*c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrameworkTest, CapacityTypeIsHonoured) {
  NodeSpec spot = Node("spot", 8000, 2, "T4");
  spot.capacity_type = CapacityType::kSpot;
  auto c = Cluster::Create({Node("od", 8000, 2, "T4"), spot});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  Request r = Req("r", Shape(0, 1, 1000));
  r.capacity_type = CapacityType::kSpot;
  for (int i = 0; i < 2; ++i) {
    auto d = fw->Schedule(r, binder);
    ASSERT_TRUE(d.ok() && d->scheduled);
    EXPECT_EQ(d->placements[0].node, 1);
  }
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
}

// A request's max_price keeps it off nodes priced above it; an unpriced node fits any cap, and the reason
// names both prices.
TEST(FrameworkTest, MaxPriceKeepsARequestOffDearerNodes) {
  NodeSpec dear = Node("dear", 8000, 1, "A100");
  dear.price_micros_per_gpu_hour = 4'100'000;
  NodeSpec cheap = Node("cheap", 8000, 1, "A100");
  cheap.price_micros_per_gpu_hour = 1'230'000;
  auto c = Cluster::Create({dear, cheap, Node("free", 8000, 1, "A100")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  Request r = Req("r", Shape(0, 1, 1000));
  r.max_price_micros = 2'000'000;
  std::set<NodeIndex> used;
  for (int i = 0; i < 2; ++i) {
    auto d = fw->Schedule(r, binder);
    ASSERT_TRUE(d.ok() && d->scheduled);
    used.insert(d->placements[0].node);
  }
  EXPECT_EQ(used, (std::set<NodeIndex>{1, 2}));
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  bool named = false;
  for (const NodeReason& reason : d->reasons) {
    named |= reason.node == 0 && reason.plugin == "PriceFit" &&
             reason.reason == "price 4.10 per GPU-hour is above the job's max_price 2.00";
  }
  EXPECT_TRUE(named);
  r.max_price_micros = 0;  // no cap: the dear node is fine
  d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 0);
}

TEST(FrameworkTest, ANodeReservedToTenantsTakesOnlyTheirPods) {
  NodeSpec reserved = Node("reserved", 8000, 4, "A100");
  reserved.labels = {{std::string(kReservedForLabel), "team-a, team-c"}};
  auto c = Cluster::Create({reserved, Node("shared", 8000, 1, "A100")});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  // team-b's 2-GPU job fits only the reserved node: unschedulable, and the reason names the reservation.
  Request b = Req("b", Shape(0, 2, 1000));
  b.tenant = "team-b";
  auto d = fw->Schedule(b, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  bool named = false;
  for (const NodeReason& r : d->reasons) {
    named |= r.node == 0 && r.plugin == "TenantReservationFit" && r.reason == "reserved for team-a, team-c";
  }
  EXPECT_TRUE(named);
  // A job without an owner is not a reserved node's either.
  d = fw->Schedule(Req("none", Shape(0, 2, 1000)), binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  // team-c (second in the list) gets it.
  Request cjob = Req("c", Shape(0, 2, 1000));
  cjob.tenant = "team-c";
  d = fw->Schedule(cjob, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 0);
  // Anyone's 1-GPU job may use the shared node.
  Request small = Req("s", Shape(0, 1, 1000));
  small.tenant = "team-b";
  d = fw->Schedule(small, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 1);
}

TEST(FrameworkTest, NodeSelectorKeepsMembersInTheAllowedRegions) {
  NodeSpec eu = Node("eu", 8000, 2, "T4");
  eu.labels = {{"region", "eu-west"}};
  NodeSpec us = Node("us", 8000, 4, "T4");
  us.labels = {{"region", "us-east"}};
  // "bare" has no region label: a selector on region never matches it.
  auto c = Cluster::Create({us, Node("bare", 8000, 8, "T4"), eu});
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  Request r = Req("r", Shape(0, 1, 1000), 2);
  r.node_selector = {{"region", {"eu-west", "eu-north"}}};
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 2);
  EXPECT_EQ(d->placements[1].node, 2);
  // eu is full now: nothing else qualifies, and the reasons say why per node.
  d = fw->Schedule(Req("r2", Shape(0, 1, 1000)), binder);
  ASSERT_TRUE(d.ok() && d->scheduled);  // no selector: anywhere
  Request again = r;
  again.id = "r3";
  again.gang_size = 1;
  d = fw->Schedule(again, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  std::map<NodeIndex, std::string> why;
  for (const auto& reason : d->reasons) why[reason.node] = reason.plugin + ": " + reason.reason;
  EXPECT_EQ(why[0], "NodeSelectorFit: region=us-east is not one of [eu-west, eu-north]");
  EXPECT_EQ(why[1], "NodeSelectorFit: no label region (wanted one of [eu-west, eu-north])");
  EXPECT_EQ(why[2].rfind("GpuShareFit: ", 0), 0u) << why[2];
}

// gang_label: a gang of two 8-GPU members on distinct nodes. us-east has one 8-GPU node and one of 4;
// eu-west two of 8; an unlabelled node (value "") one of 8. Whatever node the first member takes, the gang
// lands wholly in eu-west.
TEST(FrameworkTest, AGangWithAGangLabelNeverSpansItsValues) {
  std::vector<NodeSpec> nodes;
  for (const auto& [name, gpus, region] : std::vector<std::tuple<std::string, int, std::string>>{
           {"us-1", 8, "us-east"}, {"us-2", 4, "us-east"}, {"eu-1", 8, "eu-west"}, {"eu-2", 8, "eu-west"}}) {
    NodeSpec n = Node(name, 64000, gpus, "H100");
    n.labels = {{"region", region}};
    nodes.push_back(n);
  }
  nodes.push_back(Node("bare", 64000, 8, "H100"));
  for (uint64_t seed = 1; seed <= 8; ++seed) {  // the first member's node varies with the tie order
    auto c = Cluster::Create(nodes);
    ASSERT_TRUE(c.ok());
    auto fw = Make(&*c, "BestFit", seed);
    AcceptAllBinder binder;
    Request r = Req("ranks", Shape(1000, 8, 1000), 2);
    r.distinct_nodes = true;
    r.gang_label = "region";
    auto d = fw->Schedule(r, binder);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(d->scheduled) << "seed " << seed;
    std::set<NodeIndex> used = {d->placements[0].node, d->placements[1].node};
    EXPECT_EQ(used, (std::set<NodeIndex>{2, 3})) << "seed " << seed;
    EXPECT_EQ(c->allocated_gpu_milli(), 16000);
  }
  // One 8-GPU node per region (and the unlabelled one): no region holds the gang, though two nodes would.
  nodes.erase(nodes.begin() + 3);
  auto c = Cluster::Create(nodes);
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c);
  AcceptAllBinder binder;
  Request r = Req("ranks", Shape(1000, 8, 1000), 2);
  r.distinct_nodes = true;
  r.gang_label = "region";
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  EXPECT_EQ(c->allocated_gpu_milli(), 0);
  r.gang_label.clear();
  d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->scheduled);  // spanning is allowed without it
  // With the request's own selector naming one region, only that one is tried.
  fw->Release(d->placements);
  r.gang_label = "region";
  r.gang_size = 1;
  r.node_selector = {{"region", {"eu-west"}}};
  d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(c->spec(d->placements[0].node).labels.at("region"), "eu-west");
  // Unlabelled nodes share one value: two of them hold the gang.
  NodeSpec us = Node("us", 64000, 8, "H100");
  us.labels = {{"region", "us-east"}};
  auto c2 = Cluster::Create({us, Node("bare-1", 64000, 8, "H100"), Node("bare-2", 64000, 8, "H100")});
  ASSERT_TRUE(c2.ok());
  auto fw2 = Make(&*c2);
  Request g = Req("g", Shape(1000, 8, 1000), 2);
  g.distinct_nodes = true;
  g.gang_label = "region";
  d = fw2->Schedule(g, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ((std::set<NodeIndex>{d->placements[0].node, d->placements[1].node}), (std::set<NodeIndex>{1, 2}));
}

TEST(FrameworkTest, TiesFollowTheSeededNodeOrder) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 16; ++i) nodes.push_back(Node("n" + std::to_string(i), 8000, 2, "T4"));
  std::set<NodeIndex> first;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto c = Cluster::Create(nodes);
    ASSERT_TRUE(c.ok());
    auto fw = Make(&*c, "GpuPacking", seed);  // all idle nodes score the same
    AcceptAllBinder binder;
    auto d1 = fw->Schedule(Req("r", Shape(0, 1, 1000)), binder);
    ASSERT_TRUE(d1.ok() && d1->scheduled);
    first.insert(d1->placements[0].node);
    auto c2 = Cluster::Create(nodes);
    auto fw2 = Make(&*c2, "GpuPacking", seed);
    auto d2 = fw2->Schedule(Req("r", Shape(0, 1, 1000)), binder);
    EXPECT_EQ(d2->placements[0].node, d1->placements[0].node) << "same seed, same choice";
  }
  EXPECT_GT(first.size(), 5u);
}

// Random requests against every policy: the snapshot never over-commits CPU, memory or a GPU,
// model constraints hold, gangs are whole or absent, and releases restore capacity exactly.
TEST(FrameworkTest, InvariantsHoldUnderRandomLoad) {
  const std::vector<std::string> models = {"T4", "A100", "G2"};
  for (const PolicySpec& policy : Registry::Builtin().policies()) {
    Rng rng(99);
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < 12; ++i) {
      const int gpus = static_cast<int>(rng.Uniform(3)) * 4;
      nodes.push_back(Node("n" + std::to_string(i), 4000 + 4000 * static_cast<int64_t>(rng.Uniform(8)), gpus,
                           models[rng.Uniform(models.size())], kGiB * (16 + rng.Uniform(64))));
    }
    auto c = Cluster::Create(nodes);
    ASSERT_TRUE(c.ok());
    auto fw = Make(&*c, policy.name, 5);
    AcceptAllBinder binder;
    std::vector<std::vector<Placement>> live;
    std::vector<int64_t> cpu_used(nodes.size()), gpu_used(nodes.size() * kMaxGpusPerNode);
    std::vector<uint64_t> mem_used(nodes.size());
    for (int step = 0; step < 400; ++step) {
      if (!live.empty() && rng.Uniform(3) == 0) {
        const size_t k = rng.Uniform(live.size());
        for (const Placement& p : live[k]) {
          cpu_used[p.node] -= p.cpu_milli;
          mem_used[p.node] -= p.memory_bytes;
          for (int g = 0; g < p.num_gpus; ++g) gpu_used[p.node * kMaxGpusPerNode + p.gpus[g]] -= p.gpu_milli;
        }
        fw->Release(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      const int kind = static_cast<int>(rng.Uniform(4));
      const int32_t num = kind == 0 ? 0 : kind == 1 ? 1 : static_cast<int32_t>(1 + rng.Uniform(4));
      const int32_t milli = num == 0 ? 0 : kind == 1 ? static_cast<int32_t>(50 + rng.Uniform(950)) : 1000;
      std::vector<std::string> allowed;
      if (rng.Uniform(3) == 0) allowed = {models[rng.Uniform(models.size())]};
      const int32_t gang = static_cast<int32_t>(1 + rng.Uniform(3));
      const Request r =
          Req("r" + std::to_string(step),
              Shape(static_cast<int64_t>(rng.Uniform(6000)), num, milli, allowed, kGiB * rng.Uniform(16)), gang);
      const uint64_t allocated_before = static_cast<uint64_t>(c->allocated_gpu_milli());
      auto d = fw->Schedule(r, binder);
      ASSERT_TRUE(d.ok()) << d.status();
      if (!d->scheduled) {
        ASSERT_TRUE(d->placements.empty());
        ASSERT_EQ(static_cast<uint64_t>(c->allocated_gpu_milli()), allocated_before) << "a failed gang left residue";
        continue;
      }
      ASSERT_EQ(d->placements.size(), static_cast<size_t>(gang)) << policy.name;
      for (const Placement& p : d->placements) {
        ASSERT_EQ(p.num_gpus, num);
        if (!allowed.empty() && num > 0) {  // a model constraint binds GPU shapes only
          ASSERT_EQ(c->spec(p.node).gpu_model, allowed[0]) << policy.name;
        }
        cpu_used[p.node] += p.cpu_milli;
        mem_used[p.node] += p.memory_bytes;
        for (int g = 0; g < p.num_gpus; ++g) gpu_used[p.node * kMaxGpusPerNode + p.gpus[g]] += p.gpu_milli;
      }
      live.push_back(d->placements);
      for (size_t n = 0; n < nodes.size(); ++n) {
        ASSERT_LE(cpu_used[n], nodes[n].cpu_milli) << policy.name;
        ASSERT_LE(mem_used[n], nodes[n].memory_bytes) << policy.name;
        ASSERT_EQ(c->cpu_free(static_cast<NodeIndex>(n)), nodes[n].cpu_milli - cpu_used[n]);
        for (int g = 0; g < nodes[n].gpu_count; ++g) {
          ASSERT_LE(gpu_used[n * kMaxGpusPerNode + g], kMilliPerGpu) << policy.name;
          ASSERT_EQ(c->gpu_free(static_cast<NodeIndex>(n))[g], kMilliPerGpu - gpu_used[n * kMaxGpusPerNode + g]);
        }
      }
    }
    for (const auto& placements : live) fw->Release(placements);
    EXPECT_EQ(c->allocated_gpu_milli(), 0) << policy.name;
    EXPECT_EQ(c->allocated_cpu_milli(), 0) << policy.name;
  }
}

// Request::placed (an elastic gang's survivors): the replacement lands off the survivors' nodes and in
// their region. The survivor holds 4 of us-2's 8 GPUs; us-3 is the only other node in us-east; eu-1, in
// another region, would fit as well.
TEST(FrameworkTest, AReplacementLandsBesideThePlacedMembersOffTheirNodesInTheirRegion) {
  std::vector<NodeSpec> nodes;
  for (const auto& [name, gpus, region] : std::vector<std::tuple<std::string, int, std::string>>{
           {"us-2", 8, "us-east"}, {"us-3", 4, "us-east"}, {"eu-1", 8, "eu-west"}}) {
    NodeSpec n = Node(name, 64000, gpus, "H100");
    n.labels = {{"region", region}};
    nodes.push_back(n);
  }
  auto c = Cluster::Create(nodes);
  ASSERT_TRUE(c.ok());
  auto fw = Make(&*c, "BestFit");
  AcceptAllBinder binder;
  Placement survivor;
  survivor.node = 0;
  survivor.num_gpus = 4;
  survivor.gpu_milli = 1000;
  survivor.cpu_milli = 1000;
  for (int i = 0; i < 4; ++i) survivor.gpus[i] = static_cast<uint8_t>(i);
  c->Bind(survivor);

  Request r = Req("ranks", Shape(1000, 4, 1000), 1);
  r.distinct_nodes = true;
  r.gang_label = "region";
  r.placed = {survivor};
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->scheduled);
  EXPECT_EQ(d->placements[0].node, 1);  // us-3: not us-2 (the survivor's node), not eu-1 (another region)
  // With us-3 full, nothing fits: eu-1 is in another region, us-2 holds the survivor.
  Request again = r;
  again.id = "again";
  d = fw->Schedule(again, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  // Without distinct_nodes the survivor's node takes it.
  again.distinct_nodes = false;
  d = fw->Schedule(again, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 0);
}

}  // namespace
}  // namespace gpugeek::sched
