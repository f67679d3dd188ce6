// kill -9 during a push leaves the store consistent: a child process pushes new versions of a folder in
// a loop and is SIGKILLed at seeded random moments (while writing files, chunks, trees, the commit or
// the ref); after each kill the parent checks the store (every object whole, every ref's history
// present), checks out the branch head and compares it byte for byte with the folder as it was at that
// round, then lets a new child go on. At the end garbage collection removes exactly what killed pushes
// left behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/rng.h"
#include "crypto/test_util.h"
#include "data/version_gc.h"
#include "data/version_store.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;
using crypto::testing::ReadRaw;
using crypto::testing::TempDir;

constexpr int kFiles = 12;
const ChunkerOptions kChunks{.min_bytes = 1024, .normal_bytes = 8192, .max_bytes = 32768};

std::string Content(int file, int round) {
  Rng rng(static_cast<uint64_t>(round) * 1000 + static_cast<uint64_t>(file));
  std::string s(20'000 + rng.Uniform(60'000), '\0');
  for (char& c : s) c = static_cast<char>(rng.Uniform(256));
  return s;
}

// The round at which `file` was last written, as of round `round` (round 0 writes every file; round r
// rewrites files r % kFiles and 3r % kFiles).
int LastWrite(int file, int round) {
  for (int r = round; r > 0; --r) {
    if (r % kFiles == file || (3 * r) % kFiles == file) return r;
  }
  return 0;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The child: restores the folder as of round start - 1, then pushes rounds start, start+1, ... forever.
[[noreturn]] void PushForever(const std::string& store_dir, const std::string& src, int start) {
  auto store = VersionStore::Open(store_dir, RealClock());
  if (!store.ok()) _exit(1);
  for (int f = 0; f < kFiles; ++f) WriteFile(absl::StrCat(src, "/f", f), Content(f, LastWrite(f, start - 1)));
  for (int round = start;; ++round) {
    for (int f : {round % kFiles, (3 * round) % kFiles}) WriteFile(absl::StrCat(src, "/f", f), Content(f, round));
    PushOptions o{.dataset = "crash", .message = absl::StrCat(round), .author = "child"};
    o.chunking = kChunks;
    if (!(*store)->Push(src, o).ok()) _exit(1);
  }
}

TEST(PushCrash, KillDuringPushLeavesTheStoreConsistent) {
  TempDir tmp;
  const std::string store_dir = tmp.Path("store");
  const std::string src = tmp.Path("src");
  fs::create_directories(src);
  Rng rng(42);
  int next_round = 1;
  int kills = 0;
  // Kills land at random moments within a window that doubles (up to 4 s) after a kill that found no new
  // commit, so a slow machine (a sanitizer build, a loaded disk making syncfs slow) still sees pushes
  // complete between kills.
  int window_ms = 200;
  for (int attempt = 0; attempt < 60 && (kills < 12 || next_round <= 4); ++attempt) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) PushForever(store_dir, src, next_round);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng.Uniform(static_cast<uint64_t>(window_ms))));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself: a push failed (status " << status << ")";
    ++kills;

    auto store = VersionStore::Open(store_dir, RealClock()).value();
    const FsckReport fsck = Fsck(*store).value();
    ASSERT_TRUE(fsck.ok()) << "damaged " << fsck.damaged.size() << ", missing "
                           << (fsck.missing.empty() ? "" : fsck.missing.front());
    absl::StatusOr<std::vector<LogEntry>> log = store->Log("crash", "main", 1);
    int round = 0;
    if (log.ok()) {
      round = std::stoi(log->front().commit.message);
    } else {
      ASSERT_TRUE(absl::IsNotFound(log.status())) << log.status();  // killed before the first commit
    }
    window_ms = round >= next_round ? 200 : std::min(window_ms * 2, 4000);
    if (round == 0) continue;
    const std::string out = tmp.Path(absl::StrCat("out", attempt));
    ASSERT_TRUE(store->Checkout("crash", "main", out).ok());
    for (int f = 0; f < kFiles; ++f) {
      ASSERT_EQ(ReadRaw(absl::StrCat(out, "/f", f)), Content(f, LastWrite(f, round)))
          << "file " << f << " at round " << round;
    }
    fs::remove_all(out);
    next_round = round + 1;
  }
  EXPECT_GE(kills, 12);
  EXPECT_GT(next_round, 4) << "too few pushes completed to test anything";

  auto store = VersionStore::Open(store_dir, RealClock()).value();
  const GcResult gc = GarbageCollect(*store).value();
  const FsckReport after = Fsck(*store).value();
  EXPECT_TRUE(after.ok());
  EXPECT_EQ(after.unreferenced_objects, 0u);
  EXPECT_EQ(after.objects, gc.kept_objects);
  EXPECT_TRUE(fs::is_empty(store_dir + "/objects/tmp"));
}

}  // namespace
}  // namespace gpugeek::data
