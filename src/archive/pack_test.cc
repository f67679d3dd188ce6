#include "archive/pack.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/digest.h"
#include "archive/test_util.h"
#include "archive/unpack.h"

namespace gpugeek::archive {
namespace {

using testing::ListTar;
using testing::TempDir;
using testing::WriteFile;

// A small project: code, data, caches, a checkout, ignore files at two levels.
void MakeProject(const std::string& root) {
  WriteFile(root + "/train.py", "print('hi')\n");
  WriteFile(root + "/run.sh", "#!/bin/sh\n");
  ::chmod((root + "/run.sh").c_str(), 0700);
  WriteFile(root + "/.gitignore", "__pycache__/\n*.pyc\n/checkpoints\n");
  WriteFile(root + "/.gpugeekignore", "data/raw/\n!keep.pyc\n");
  WriteFile(root + "/keep.pyc", "k");
  WriteFile(root + "/x.pyc", "x");
  WriteFile(root + "/__pycache__/m.cpython.pyc", "c");
  WriteFile(root + "/checkpoints/step1.pt", "big");
  WriteFile(root + "/data/raw/huge.bin", "raw");
  WriteFile(root + "/data/small.csv", "a,b\n");
  WriteFile(root + "/src/.gitignore", "*.tmp\n");
  WriteFile(root + "/src/model.py", "class M: pass\n");
  WriteFile(root + "/src/scratch.tmp", "t");
  WriteFile(root + "/src/checkpoints/keep.txt", "anchored /checkpoints is the root's only\n");
  WriteFile(root + "/.git/HEAD", "ref: refs/heads/main\n");
  ::symlink("src/model.py", (root + "/model_link.py").c_str());
}

TEST(PackTest, HonoursIgnoreFilesWithExactEntries) {
  const std::string root = TempDir("pack");
  MakeProject(root);
  const std::string out = TempDir("out") + "/a.tar.zst";
  absl::StatusOr<PackResult> r = PackWorkdir(root, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ListTar(out),
            (std::vector<std::string>{".gitignore", ".gpugeekignore", "data/", "data/small.csv", "keep.pyc",
                                      "model_link.py -> src/model.py", "run.sh", "src/", "src/.gitignore",
                                      "src/checkpoints/", "src/checkpoints/keep.txt", "src/model.py", "train.py"}));
  EXPECT_EQ(r->files, 9u);
  EXPECT_EQ(r->dirs, 3u);
  EXPECT_EQ(r->symlinks, 1u);
  // x.pyc, __pycache__/, checkpoints/, data/raw/, src/scratch.tmp
  EXPECT_EQ(r->ignored, 5u);
  EXPECT_EQ(r->digest, *Sha256OfFile(out));
  EXPECT_EQ(r->archive_bytes, std::filesystem::file_size(out));
}

// One file as the entry a `files:` destination names, with its parent folders, unpacked where it belongs.
TEST(PackTest, PackFileHoldsOneEntryAtItsDestination) {
  const std::string src = TempDir("packfile");
  WriteFile(src + "/w.bin", "weights");
  ::chmod((src + "/w.bin").c_str(), 0700);
  const std::string out = TempDir("out") + "/f.tar.zst";
  absl::StatusOr<PackResult> r = PackFile(src + "/w.bin", "weights/init/w.bin", out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ListTar(out), (std::vector<std::string>{"weights/", "weights/init/", "weights/init/w.bin"}));
  EXPECT_EQ(r->files, 1u);
  EXPECT_EQ(r->dirs, 2u);
  EXPECT_EQ(r->content_bytes, 7u);
  // Deterministic: packed again elsewhere, the same digest.
  const std::string out2 = TempDir("out2") + "/f.tar.zst";
  EXPECT_EQ(PackFile(src + "/w.bin", "weights/init/w.bin", out2)->digest, r->digest);
  const std::string dest = TempDir("dest");
  ASSERT_TRUE(UnpackWorkdir(out, dest).ok());
  struct stat st;
  ASSERT_EQ(::stat((dest + "/weights/init/w.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(st.st_size, 7);

  EXPECT_EQ(PackFile(src + "/w.bin", "../w.bin", out).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackFile(src + "/w.bin", "/etc/w.bin", out).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackFile(src + "/none", "w.bin", out).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(PackFile(src, "w.bin", out).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PackTest, TheSameTreeGivesTheSameBytes) {
  const std::string a = TempDir("det-a"), b = TempDir("det-b");
  MakeProject(a);
  MakeProject(b);
  // Other times and another mode for the group bits: neither reaches the archive.
  ::sleep(1);
  WriteFile(b + "/train.py", "print('hi')\n");
  ::chmod((b + "/train.py").c_str(), 0600);
  const std::string out = TempDir("det-out");
  auto r1 = PackWorkdir(a, out + "/1");
  auto r2 = PackWorkdir(a, out + "/2");
  auto r3 = PackWorkdir(b, out + "/3");
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_EQ(r1->digest, r2->digest);
  EXPECT_EQ(r1->digest, r3->digest);
  WriteFile(b + "/train.py", "print('changed')\n");
  auto r4 = PackWorkdir(b, out + "/4");
  ASSERT_TRUE(r4.ok());
  EXPECT_NE(r1->digest, r4->digest);
}

TEST(PackTest, RefusesALinkPointingOutside) {
  const std::string root = TempDir("escape");
  WriteFile(root + "/a.py", "");
  ::symlink("../../etc/passwd", (root + "/p").c_str());
  const std::string out = TempDir("escape-out") + "/a";
  auto r = PackWorkdir(root, out);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("is a symlink to '../../etc/passwd', outside the workdir"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
  ::unlink((root + "/p").c_str());
  ::symlink("/etc/passwd", (root + "/p").c_str());
  EXPECT_EQ(PackWorkdir(root, out).status().code(), absl::StatusCode::kFailedPrecondition);
  // Ignored, it is not looked at.
  WriteFile(root + "/.gpugeekignore", "/p\n");
  EXPECT_TRUE(PackWorkdir(root, out).ok());
}

TEST(PackTest, LimitsNameThemselves) {
  const std::string root = TempDir("limits");
  for (int i = 0; i < 20; ++i) WriteFile(fmt::format("{}/f{}", root, i), std::string(1000, char('a' + i)));
  const std::string out = TempDir("limits-out") + "/a";
  auto r = PackWorkdir(root, out, {.max_entries = 10});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("more than 10 files and folders (the limit)"), std::string::npos);
  r = PackWorkdir(root, out, {.max_archive_bytes = 100});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("exceeds 100 bytes (the limit)"), std::string::npos);
}

TEST(PackTest, PacksAndUnpacksTenThousandFiles) {
  const std::string root = TempDir("10k");
  for (int d = 0; d < 100; ++d) {
    for (int f = 0; f < 100; ++f)
      WriteFile(fmt::format("{}/d{:03}/f{:03}.txt", root, d, f), fmt::format("{}:{}\n", d, f));
  }
  const std::string out = TempDir("10k-out") + "/a";
  const auto start = std::chrono::steady_clock::now();
  auto r = PackWorkdir(root, out);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->files, 10'000u);
  std::printf("[ measured ] packed 10,000 files (%llu bytes) into %llu bytes in %.1f ms\n",
              static_cast<unsigned long long>(r->content_bytes), static_cast<unsigned long long>(r->archive_bytes), ms);
  const std::string dest = TempDir("10k-dest");
  auto u = UnpackWorkdir(out, dest);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->files, 10'000u);
  EXPECT_EQ(u->entries, 10'100u);
  auto again = PackWorkdir(dest, out + ".2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->digest, r->digest);
}

}  // namespace
}  // namespace gpugeek::archive
