#include "auth/api_token.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/strings/match.h"

namespace gpugeek::auth {
namespace {

TEST(ApiTokenTest, GeneratedTokensHaveTheDocumentedShapeAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    ApiToken t = GenerateApiToken();
    ASSERT_EQ(t.id.size(), kApiTokenIdChars);
    ASSERT_EQ(t.secret.size(), kApiTokenSecretChars);  // ceil(32 * 4 / 3) = 43 unpadded base64 characters
    const std::string text = t.Text();
    EXPECT_EQ(text.size(), 4u + 16u + 1u + 43u);
    EXPECT_TRUE(absl::StartsWith(text, "ggk_"));
    auto parsed = ParseApiToken(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->id, t.id);
    EXPECT_EQ(parsed->secret, t.secret);
    EXPECT_TRUE(seen.insert(text).second);
  }
}

TEST(ApiTokenTest, MalformedTokensAreUnauthenticatedWithoutEchoingThem) {
  const std::string good = GenerateApiToken().Text();
  for (std::string bad : {std::string(), std::string("ggk_"), good.substr(0, good.size() - 1), good + "A",
                          "ggx_" + good.substr(4), good.substr(0, 4) + "ABCDEF0123456789" + good.substr(20),
                          good.substr(0, 20) + "-" + good.substr(21), good.substr(0, 30) + "*" + good.substr(31)}) {
    auto parsed = ParseApiToken(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kUnauthenticated);
    if (bad.size() > 8) {
      EXPECT_FALSE(absl::StrContains(parsed.status().message(), bad));
    }
  }
}

TEST(ApiTokenTest, Argon2idHashVerifiesOnlyItsSecret) {
  ApiToken t = GenerateApiToken();
  auto hash = HashSecret(t.secret);
  ASSERT_TRUE(hash.ok()) << hash.status();
  // The OWASP parameters, in the PHC string format of RFC 9106 implementations.
  EXPECT_TRUE(absl::StartsWith(*hash, "$argon2id$v=19$m=19456,t=2,p=1$")) << *hash;
  EXPECT_FALSE(absl::StrContains(*hash, t.secret));
  EXPECT_TRUE(VerifySecret(*hash, t.secret));
  EXPECT_FALSE(VerifySecret(*hash, GenerateApiToken().secret));
  EXPECT_FALSE(VerifySecret("not a hash", t.secret));
  // Salted: the same secret hashes differently each time.
  EXPECT_NE(*HashSecret(t.secret), *hash);
}

TEST(ApiTokenTest, Sha256DigestMatchesTheStandardVector) {
  // FIPS 180-2 appendix B.1: SHA-256("abc").
  const Digest d = SecretDigest("abc");
  const Digest want = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                       0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
  EXPECT_TRUE(DigestEquals(d, want));
  EXPECT_FALSE(DigestEquals(d, SecretDigest("abd")));
  EXPECT_EQ(RandomHex(8).size(), 16u);
}

}  // namespace
}  // namespace gpugeek::auth
