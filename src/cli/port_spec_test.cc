#include "cli/port_spec.h"

#include <gtest/gtest.h>

namespace gpugeek::cli {
namespace {

TEST(ParsePortSpec, TheThreeFormsAndWhatIsRefused) {
  auto same = ParsePortSpec("8000");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->local, 8000);
  EXPECT_EQ(same->remote, 8000);
  auto mapped = ParsePortSpec("9000:8000");
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(mapped->local, 9000);
  EXPECT_EQ(mapped->remote, 8000);
  auto any = ParsePortSpec(":6006");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->local, 0);
  EXPECT_EQ(any->remote, 6006);
  for (const char* bad : {"", "0", "65536", "80a", "a:80", "1:2:3", "9000:", ":", "-1", "+80"}) {
    auto r = ParsePortSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              "port '" + std::string(bad) +
                  "': write REMOTE, LOCAL:REMOTE or :REMOTE with ports 1..65535 (e.g. 8000, 9000:8000, :8000)");
  }
}

}  // namespace
}  // namespace gpugeek::cli
