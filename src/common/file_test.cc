#include "common/file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpugeek {
namespace {

TEST(ReadFileBoundedTest, ReadsWholeFilesUpToTheBoundAndRefusesMore) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("file_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text(100000, 'x');
  std::ofstream(dir / "f") << text;
  auto read = ReadFileBounded(dir / "f", 100000, "spec");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, text);
  EXPECT_EQ(ReadFileBounded(dir / "f", 99999, "spec").status().message(),
            fmt::format("spec {} is larger than 99999 bytes: is it the right file?", (dir / "f").string()));
  // An endless device ends at the bound, not never.
  EXPECT_EQ(ReadFileBounded("/dev/zero", 1 << 20, "model config").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFileBounded(dir / "missing", 10, "spec").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ReadFileBounded(dir, 10, "spec").ok());  // a directory
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek

namespace gpugeek {
namespace {

// /proc files of a process that is gone cannot be read: nullopt, never an exception.
TEST(ReadProcFileTest, ReadsProcFilesAndSaysNulloptForAGoneProcess) {
  const std::optional<std::string> self = ReadProcFile("/proc/self/stat");
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->substr(0, self->find(' ')), std::to_string(::getpid()));
  const pid_t child = ::fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(ReadProcFile("/proc/" + std::to_string(child) + "/stat"), std::nullopt);
  EXPECT_EQ(ReadProcFile("/nonexistent/file"), std::nullopt);
  EXPECT_EQ(ReadProcFile("/proc/self/stat", 3)->size(), 3u);
}

}  // namespace
}  // namespace gpugeek
