#include "auth/node_credential.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "auth/api_token.h"

namespace gpugeek::auth {
namespace {

TEST(NodeCredentialTest, SignedCredentialsVerifyOnlyUnderTheirKeyNodeAndGeneration) {
  const NodeKey key = GenerateNodeKey();
  const std::string text = SignNodeCredential(key, "gpu-node_07.a", 0x1234);
  EXPECT_TRUE(absl::StartsWith(text, "ggn_0000000000001234_")) << text;
  auto c = ParseNodeCredential(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node, "gpu-node_07.a");  // '_' in a node name is fine: the name is last
  EXPECT_EQ(c->generation, 0x1234u);
  EXPECT_TRUE(VerifyNodeCredential(key, *c));
  EXPECT_FALSE(VerifyNodeCredential(GenerateNodeKey(), *c));
  NodeCredential other_node = *c;
  other_node.node = "gpu-node_08.a";
  EXPECT_FALSE(VerifyNodeCredential(key, other_node));
  NodeCredential other_generation = *c;
  other_generation.generation = 0x1235;
  EXPECT_FALSE(VerifyNodeCredential(key, other_generation));
}

TEST(NodeCredentialTest, MalformedCredentialsAndKeysAreRefused) {
  const NodeKey key = GenerateNodeKey();
  const std::string good = SignNodeCredential(key, "n1", 7);
  for (const std::string& bad : {std::string("ggn_"), good.substr(0, good.size() - 2), "ggk_" + good.substr(4),
                                 good.substr(0, 10) + "X" + good.substr(11)}) {
    auto c = ParseNodeCredential(bad);
    EXPECT_FALSE(c.ok() && VerifyNodeCredential(key, *c)) << bad;
  }
  auto round = NodeKeyFromText(NodeKeyToText(key), "key file");
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(*round, key);
  EXPECT_EQ(NodeKeyFromText("abc", "node key /x").status().message(),
            "node key /x: must hold 64 hex digits (a 256-bit key); restore it from backup");
  EXPECT_NE(RandomGeneration(), 0u);
}

TEST(NodeCredentialTest, JoinTokensHaveTheirOwnPrefix) {
  ApiToken t = GenerateJoinToken();
  const std::string text = JoinTokenText(t);
  EXPECT_TRUE(absl::StartsWith(text, "ggj_"));
  auto parsed = ParseJoinToken(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->secret, t.secret);
  EXPECT_FALSE(ParseApiToken(text).ok());
  EXPECT_FALSE(ParseJoinToken(t.Text()).ok());
}

}  // namespace
}  // namespace gpugeek::auth
