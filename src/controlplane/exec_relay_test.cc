#include "controlplane/exec_relay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "api/agent_protocol.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::controlplane {
namespace {

bool IsLowerHex(const std::string& s) { return s.find_first_not_of("0123456789abcdef") == std::string::npos; }

TEST(ExecTokens, EachRegistrationDrawsANewRandomTokenPerNode) {
  ExecTokens tokens;
  EXPECT_EQ(tokens.Get("n1"), std::nullopt);
  const std::string a = tokens.Issue("n1");
  const std::string b = tokens.Issue("n2");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_TRUE(IsLowerHex(a)) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(tokens.Get("n1"), a);
  const std::string again = tokens.Issue("n1");
  EXPECT_NE(again, a);
  EXPECT_EQ(tokens.Get("n1"), again);
}

TEST(ExecTokens, TheRegistrationReplyCarriesTheNodesToken) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("gpugeek_exec_relay_test_{}", ::getpid());
  std::filesystem::remove_all(dir);
  auto server = ControlPlaneServer::Start({.port = 0, .agent_port = 0, .data_dir = dir.string()});
  ASSERT_TRUE(server.ok()) << server.status();
  testing::AgentCaller agents(**server);
  api::Registration r;
  r.node = "node-x";
  r.address = "127.0.0.1";
  r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("1xH100-SXM-80GB"), r.node,
                                           {r.node, 8, uint64_t{64} << 30, 1, ""});
  auto first = agents.Post("/v1/agents/register", api::ToJson(r));
  ASSERT_TRUE(first.ok()) << first.status();
  auto reply = api::RegistrationReplyFromJson(*first);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->exec_token.size(), 64u);
  EXPECT_TRUE(IsLowerHex(reply->exec_token));
  auto second = agents.Post("/v1/agents/register", api::ToJson(r));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*second)["exec_token"], reply->exec_token);  // a new one at each registration
  server->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek::controlplane
