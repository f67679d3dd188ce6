// The agents' archive route over loopback: a node fetches the workdir archive of a job with a member
// assigned to it, byte for byte; another node, with its own valid credential, gets 404 for the same digest.
#include "controlplane/archive_routes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "archive/digest.h"
#include "archive/test_util.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "http/status_http.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::controlplane {
namespace {

TEST(ArchiveRoutesTest, ANodeFetchesOnlyTheArchivesOfItsOwnMembers) {
  const std::string dir = archive::testing::TempDir("archive-routes");
  auto s = ControlPlaneServer::Start({.port = 0, .agent_port = 0, .data_dir = dir, .lease = std::chrono::minutes(5)});
  ASSERT_TRUE(s.ok()) << s.status();
  ControlPlaneServer& server = **s;
  testing::AgentCaller agents(server);
  for (const std::string node : {"node-a", "node-b"}) {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("1xH100-SXM-80GB"), node,
                                             {node, 32, uint64_t{256} << 30, 1, ""});
    ASSERT_TRUE(agents.Post("/v1/agents/register", api::ToJson(r)).ok());
  }
  const std::string tar = archive::testing::RawTar({{"train.py", AE_IFREG, "print('hi')\n"}});
  const std::string digest = archive::Sha256Hex(tar);
  ASSERT_TRUE(server.archives().Put("", digest, 0, tar.size(), tar).ok());
  auto job = server.control_plane().Submit(
      {.spec_yaml =
           fmt::format("name: w\nresources: {{accelerators: H100-SXM-80GB:1}}\nworkdir_digest: {}\nrun: x\n", digest)});
  ASSERT_TRUE(job.ok()) << job.status();

  // Which node holds the member: the one whose heartbeat reply lists it.
  std::string holder, other;
  for (int i = 0; i < 100 && holder.empty(); ++i) {
    for (const std::string node : {"node-a", "node-b"}) {
      auto reply = agents.Post(fmt::format("/v1/agents/{}/heartbeat", node), {{"node", node}});
      ASSERT_TRUE(reply.ok()) << reply.status();
      for (const auto& a : (*reply)["assignments"]) {
        if (a["job_id"] == job->record.id) {
          EXPECT_EQ(a["workdir_digest"], digest);
          holder = node;
        }
      }
    }
    if (holder.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(holder.empty());
  other = holder == "node-a" ? "node-b" : "node-a";
  const auto client = [&](const std::string& node) {
    return *http::Client::Create({.base_url = server.agent_url(), .bearer_token = agents.credential(node)});
  };
  auto bytes = client(holder)->GetText(fmt::format("/v1/agents/{}/archives/{}", holder, digest));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, tar);
  // The other node, with its own valid credential: as absent.
  auto refused = client(other)->GetText(fmt::format("/v1/agents/{}/archives/{}", other, digest));
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 404) << refused.status();
  // Or naming the holder: not its credential.
  refused = client(other)->GetText(fmt::format("/v1/agents/{}/archives/{}", holder, digest));
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 403) << refused.status();
  // An archive of the tenant that no job of this node uses: as absent too.
  const std::string tar2 = archive::testing::RawTar({{"b.py", AE_IFREG, "2"}});
  ASSERT_TRUE(server.archives().Put("", archive::Sha256Hex(tar2), 0, tar2.size(), tar2).ok());
  refused = client(holder)->GetText(fmt::format("/v1/agents/{}/archives/{}", holder, archive::Sha256Hex(tar2)));
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 404) << refused.status();
  s->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek::controlplane
