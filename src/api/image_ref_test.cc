#include "api/image_ref.h"

#include <gtest/gtest.h>

#include <string>

namespace gpugeek::api {
namespace {

std::string Canon(std::string_view ref) {
  auto c = CanonicalImageRef("image", ref);
  return c.ok() ? *c : "ERROR " + std::string(c.status().message());
}

TEST(CanonicalImageRef, AddsLocalhostAndLatest) {
  EXPECT_EQ(Canon("busybox"), "localhost/busybox:latest");
  EXPECT_EQ(Canon("pytorch:bookworm"), "localhost/pytorch:bookworm");
  EXPECT_EQ(Canon("localhost/busybox"), "localhost/busybox:latest");
  EXPECT_EQ(Canon("localhost/busybox:latest"), "localhost/busybox:latest");
  EXPECT_EQ(Canon("team/tools/py3:v1.2_rc-3"), "localhost/team/tools/py3:v1.2_rc-3");
  EXPECT_EQ(Canon("registry.example.com:5000/a/b__c-d.e"), "registry.example.com:5000/a/b__c-d.e:latest");
  EXPECT_EQ(Canon("localhost:5000/x:1"), "localhost:5000/x:1");
  EXPECT_EQ(Canon("docker.io/library/debian:12"), "docker.io/library/debian:12");
}

TEST(CanonicalImageRef, RefusesShellMetacharactersNamingTheField) {
  EXPECT_EQ(Canon("busybox;rm -rf /"),
            "ERROR image: 'busybox;rm -rf /' is not an image reference: only letters, digits, '.', '_', '-', '/' "
            "and ':' may appear; write NAME[:TAG] with lower-case path components, e.g. localhost/pytorch:bookworm "
            "or busybox (podman images lists a node's images)");
  for (const char* bad : {"a b", "$(id)", "a`b`", "a|b", "a&b", "a>b", "a\nb", "a'b", "a\"b", "a\\b", "a*", "-a"}) {
    EXPECT_TRUE(Canon(bad).starts_with("ERROR image: ")) << bad;
  }
}

TEST(CanonicalImageRef, RefusesMalformedReferences) {
  EXPECT_EQ(Canon(""),
            "ERROR image: '' is not an image reference: it is empty; write NAME[:TAG] with lower-case path "
            "components, e.g. localhost/pytorch:bookworm or busybox (podman images lists a node's images)");
  EXPECT_TRUE(Canon("Busybox").find("path component 'Busybox' must be lower-case") != std::string::npos);
  EXPECT_TRUE(Canon("busybox:").find("the tag must be") != std::string::npos);
  EXPECT_TRUE(Canon("busybox:-x").find("the tag must be") != std::string::npos);
  EXPECT_TRUE(Canon("a//b").find("path component '' must be") != std::string::npos);
  EXPECT_TRUE(Canon("a/").find("path component '' must be") != std::string::npos);
  EXPECT_TRUE(Canon("a..b").find("path component 'a..b'") != std::string::npos);
  EXPECT_TRUE(Canon("host.-bad/x").find("'host.-bad' is not a registry host") != std::string::npos);
  EXPECT_TRUE(Canon("host:99999x/x").find("is not a registry host") != std::string::npos);
  EXPECT_TRUE(Canon("a@sha256:00").find("only letters, digits") != std::string::npos);
}

TEST(CanonicalImageRef, CapsTheLength) {
  const std::string at_cap = std::string(kMaxImageRefBytes - 17, 'a');  // + "localhost/" + ":latest" = 255
  EXPECT_EQ(Canon(at_cap), "localhost/" + at_cap + ":latest");
  EXPECT_TRUE(Canon(at_cap + "a").find("is longer than 255 bytes") != std::string::npos);
  EXPECT_TRUE(Canon(std::string(300, 'a')).find("is longer than 255 bytes") != std::string::npos);
}

}  // namespace
}  // namespace gpugeek::api
