// RunChild: stdin, stdout and stderr apart, only the given environment, a deadline, and a child that never
// reads its stdin.

#include "backends/slurm/subprocess.h"

#include <gtest/gtest.h>

namespace gpugeek::backends::slurm {
namespace {

const std::vector<std::string> kEnv = {"PATH=/usr/bin:/bin", "ONLY=this"};

TEST(SubprocessTest, StdinInStdoutAndStderrApartOnlyTheGivenEnvironment) {
  setenv("GPUGEEK_TEST_SECRET", "s3cret", 1);
  auto r =
      RunChild({"sh", "-c", "cat; echo warn >&2; env | grep -c . ; echo \"$ONLY${GPUGEEK_TEST_SECRET:-}\"; exit 3"},
               "script\n", kEnv, std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  // sh adds PWD (and may add SHLVL, _) to what it was given; the caller's variables never reach it.
  EXPECT_EQ(r->out.substr(0, 7), "script\n");
  EXPECT_NE(r->out.find("this\n"), std::string::npos);
  EXPECT_EQ(r->out.find("s3cret"), std::string::npos);
  EXPECT_EQ(r->err, "warn\n");
}

TEST(SubprocessTest, ADeadlineKillsAndAChildThatIgnoresStdinIsHarmless) {
  auto slow = RunChild({"sleep", "30"}, "", kEnv, std::chrono::milliseconds(300));
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded) << slow.status();
  // 1 MiB for a child that exits at once: the write gets EPIPE (SIGPIPE blocked), not a dead test process.
  auto deaf = RunChild({"true"}, std::string(1 << 20, 'x'), kEnv, std::chrono::seconds(10));
  ASSERT_TRUE(deaf.ok()) << deaf.status();
  EXPECT_EQ(deaf->exit_code, 0);
  EXPECT_EQ(RunChild({"no-such-program-gpugeek"}, "", kEnv, std::chrono::seconds(1)).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpugeek::backends::slurm
