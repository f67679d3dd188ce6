// GPU GRES strings as real Slurm 22.05 prints them (slurm.conf Gres=, slurmrestd gres / gres_used).

#include "backends/slurm/gres.h"

#include <gtest/gtest.h>

namespace gpugeek::backends::slurm {
namespace {

std::vector<GpuGres> Parse(std::string_view s) {
  auto r = ParseGpuGres(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : std::vector<GpuGres>{};
}

TEST(GresTest, TypedUntypedWithDetailsAndOtherGres) {
  EXPECT_EQ(Parse("gpu:a100:4"), (std::vector<GpuGres>{{"a100", 4}}));
  EXPECT_EQ(Parse("gpu:a100:0(IDX:N/A)"), (std::vector<GpuGres>{{"a100", 0}}));
  EXPECT_EQ(Parse("gpu:a100:4(S:0-1)"), (std::vector<GpuGres>{{"a100", 4}}));
  EXPECT_EQ(Parse("gpu:h100:2(IDX:0,3),shard:8,gpu:l4:1"), (std::vector<GpuGres>{{"h100", 2}, {"l4", 1}}));
  EXPECT_EQ(Parse("gpu:4"), (std::vector<GpuGres>{{"", 4}}));
  EXPECT_EQ(Parse("gpu:a100"), (std::vector<GpuGres>{{"a100", 1}}));
  EXPECT_EQ(Parse("gpu:mi300x:1K"), (std::vector<GpuGres>{{"mi300x", 1024}}));
  EXPECT_TRUE(Parse("(null)").empty());
  EXPECT_TRUE(Parse("N/A").empty());
  EXPECT_TRUE(Parse("").empty());
  EXPECT_TRUE(Parse("mps:100").empty());
  EXPECT_EQ(TotalGpus(Parse("gpu:a100:4,gpu:v100:2")), 6);
}

TEST(GresTest, BadCountsNameTheEntry) {
  for (const char* bad : {"gpu:a100:-1", "gpu:a100:x", "gpu:a100:99999999999", "gpu:a:b:c", "gpu:a100:3G"}) {
    auto r = ParseGpuGres(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("gres entry"), std::string_view::npos) << r.status();
  }
}

}  // namespace
}  // namespace gpugeek::backends::slurm
