#include "archive/unpack.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "archive/test_util.h"

namespace gpugeek::archive {
namespace {

using testing::RawEntry;
using testing::RawTar;
using testing::TempDir;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(UnpackTest, UnpacksFilesFoldersAndInnerLinks) {
  const std::string dest = TempDir("unpack");
  const std::string tar = RawTar({{"./src/", AE_IFDIR},
                                  {"src/a.py", AE_IFREG, "print(1)\n"},
                                  {"src/b", AE_IFLNK, "a.py"},
                                  {"up", AE_IFLNK, "src/../src"}});
  auto r = UnpackWorkdirBytes(tar, dest);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->entries, 4u);
  EXPECT_EQ(r->files, 1u);
  EXPECT_EQ(Read(dest + "/src/a.py"), "print(1)\n");
  EXPECT_EQ(Read(dest + "/src/b"), "print(1)\n");
  EXPECT_EQ(std::filesystem::read_symlink(dest + "/up").string(), "src/../src");
}

struct Refused {
  std::vector<RawEntry> entries;
  std::string why;
};

TEST(UnpackTest, RefusesEntriesThatWouldLandOutside) {
  const std::vector<Refused> cases = {
      {{{"/etc/evil", AE_IFREG, "x"}}, "has an absolute path"},
      {{{"../evil", AE_IFREG, "x"}}, "has a '..' component"},
      {{{"a/../../evil", AE_IFREG, "x"}}, "has a '..' component"},
      {{{"l", AE_IFLNK, "/etc"}}, "is a symlink to '/etc', outside the working folder"},
      {{{"a/l", AE_IFLNK, "../.."}}, "is a symlink to '../..', outside the working folder"},
      {{{"l", AE_IFLNK, "."}, {"l/../x", AE_IFREG, "x"}}, "has a '..' component"},
      {{{"d/", AE_IFDIR}, {"d/l", AE_IFLNK, ".."}, {"d/l/x", AE_IFREG, "x"}}, "would be written through a symlink"},
      {{{"h", AE_IFREG, "/etc/passwd", true}}, "is a hard link"},
      {{{"fifo", AE_IFIFO}}, "is not a file, folder or symlink"},
  };
  for (const Refused& c : cases) {
    const std::string parent = TempDir("evil");
    const std::string dest = parent + "/work";
    std::filesystem::create_directory(dest);
    auto r = UnpackWorkdirBytes(RawTar(c.entries), dest);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.entries[0].path << ": " << r.status();
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status();
    EXPECT_FALSE(std::filesystem::exists(parent + "/evil"));
    EXPECT_FALSE(std::filesystem::exists(parent + "/x"));
    // The check-only pass (the server's) refuses it the same way.
    EXPECT_EQ(UnpackWorkdirBytes(RawTar(c.entries), "").status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(UnpackTest, DoesNotWriteThroughALinkLeftByAnEarlierRun) {
  const std::string parent = TempDir("left");
  const std::string dest = parent + "/work";
  std::filesystem::create_directories(dest);
  std::filesystem::create_directories(parent + "/outside");
  ::symlink("../outside", (dest + "/data").c_str());
  auto r = UnpackWorkdirBytes(RawTar({{"data/x", AE_IFREG, "x"}}), dest);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_FALSE(std::filesystem::exists(parent + "/outside/x"));
  // A file standing where a link was is replaced, not followed.
  ::symlink("../outside/f", (dest + "/f").c_str());
  ASSERT_TRUE(UnpackWorkdirBytes(RawTar({{"f", AE_IFREG, "new"}}), dest).ok());
  EXPECT_FALSE(std::filesystem::exists(parent + "/outside/f"));
  EXPECT_EQ(Read(dest + "/f"), "new");
}

TEST(UnpackTest, LimitsAndGarbage) {
  const std::string tar = RawTar({{"a", AE_IFREG, std::string(5000, 'a')}, {"b", AE_IFREG, "b"}});
  auto r = UnpackWorkdirBytes(tar, "", {.max_entries = 1});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("more than 1 entries (the limit)"), std::string::npos);
  r = UnpackWorkdirBytes(tar, "", {.max_content_bytes = 4096});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(UnpackWorkdirBytes("not an archive at all", "").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gpugeek::archive
