#include "api/exec_stream.h"

#include <gtest/gtest.h>

namespace gpugeek::api {
namespace {

TEST(ExecStream, FramesRoundTripWhateverTheChunking) {
  const std::string body = EncodeExecFrame(ExecStream::kStdout, "out\n") + EncodeExecFrame(ExecStream::kStderr, "") +
                           EncodeExecFrame(ExecStream::kStderr, "err\n") + EncodeExecExit({.exit_code = 7});
  EXPECT_EQ(body, "stdout 4\nout\nstderr 0\nstderr 4\nerr\nexit 15\n{\"exit_code\":7}");
  for (size_t step : {size_t{1}, size_t{3}, body.size()}) {
    ExecFrameDecoder d;
    std::vector<ExecFrame> all;
    for (size_t i = 0; i < body.size(); i += step) {
      auto frames = d.Feed(body.substr(i, step));
      ASSERT_TRUE(frames.ok()) << frames.status();
      all.insert(all.end(), frames->begin(), frames->end());
    }
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all[0].payload, "out\n");
    EXPECT_EQ(all[1].stream, ExecStream::kStderr);
    EXPECT_EQ(all[2].payload, "err\n");
    EXPECT_EQ(all[3].stream, ExecStream::kExit);
    EXPECT_TRUE(d.done());
    auto exit = DecodeExecExit(all[3].payload);
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(exit->ShellStatus(), 7);
  }
}

TEST(ExecStream, ExitStatusOfASignalIs128PlusIt) {
  auto exit = DecodeExecExit(R"({"signal":9,"message":"timed out"})");
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->ShellStatus(), 137);
  EXPECT_EQ(exit->message, "timed out");
  EXPECT_EQ(DecodeExecExit("{}")->ShellStatus(), 1);
  EXPECT_FALSE(DecodeExecExit(R"({"exit_code":256})").ok());
}

TEST(ExecStream, HostileFramesAreRefused) {
  EXPECT_EQ(ExecFrameDecoder().Feed("stdin 1\nx").status().message(), "exec stream: unknown frame tag 'stdin'");
  EXPECT_EQ(ExecFrameDecoder().Feed("stdout 2000000\n").status().message(),
            "exec stream: frame of 2000000 bytes is over the 1 MiB limit");
  EXPECT_EQ(ExecFrameDecoder().Feed("stdout -1\n").status().message(), "exec stream: malformed frame length '-1'");
  EXPECT_EQ(ExecFrameDecoder().Feed(std::string(40, 'a')).status().message(),
            "exec stream: frame header over 32 bytes");
  EXPECT_EQ(ExecFrameDecoder().Feed("exit 2\n{}stdout 0\n").status().message(),
            "exec stream: bytes after the exit frame");
}

}  // namespace
}  // namespace gpugeek::api
