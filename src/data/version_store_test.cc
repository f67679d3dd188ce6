#include "data/version_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "archive/digest.h"
#include "common/fake_clock.h"
#include "common/rng.h"
#include "crypto/test_util.h"
#include "data/version_gc.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;
using crypto::testing::ReadRaw;
using crypto::testing::TempDir;

void WriteFile(const std::string& path, const std::string& bytes, bool executable = false) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::chmod(path.c_str(), executable ? 0755 : 0644);
}

std::string RandomBytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t word = rng.engine()();
    std::memcpy(s.data() + i, &word, std::min<size_t>(8, n - i));
  }
  return s;
}

// Every regular file under `dir` (relative path -> bytes), every folder (path -> ""), and modes.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_directory()) {
      out["dir:" + rel] = "";
    } else {
      struct stat st {};
      ::stat(e.path().c_str(), &st);
      out[rel] = absl::StrCat((st.st_mode & 0777) == 0755 ? "x:" : "-:", ReadRaw(e.path().string()));
    }
  }
  return out;
}

const ChunkerOptions kSmallChunks{.min_bytes = 1024, .normal_bytes = 4096, .max_bytes = 16384};

class VersionStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.Set(TimePoint(std::chrono::seconds(1'790'000'000)));
    store_ = VersionStore::Open(tmp_.Path("store"), clock_).value();
    src_ = tmp_.Path("src");
  }
  PushResult Push(const std::string& message, const std::string& branch = "main") {
    PushOptions o{.dataset = "corpus", .branch = branch, .message = message, .author = "ada"};
    o.chunking = kSmallChunks;
    absl::StatusOr<PushResult> r = store_->Push(src_, o);
    EXPECT_TRUE(r.ok()) << r.status();
    clock_.Advance(std::chrono::seconds(60));
    return r.value_or(PushResult{});
  }
  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<VersionStore> store_;
  std::string src_;
};

TEST_F(VersionStoreTest, CheckoutReproducesEveryByteFolderAndMode) {
  WriteFile(src_ + "/a.txt", "alpha\n");
  WriteFile(src_ + "/empty", "");
  WriteFile(src_ + "/bin/run.sh", "#!/bin/sh\necho hi\n", /*executable=*/true);
  WriteFile(src_ + "/deep/er/big.bin", RandomBytes(100'000, 1));
  fs::create_directories(src_ + "/empty-folder");
  const PushResult r = Push("first");
  EXPECT_FALSE(r.unchanged);
  EXPECT_EQ(r.files, 4u);
  EXPECT_EQ(r.bytes, 6u + 0 + 18 + 100'000);
  // The 100 kB file in chunks of 1-16 KiB; each other file (the empty one too) in one chunk.
  EXPECT_GE(r.chunks, 3u + 100'000 / 16384 + 1);
  ASSERT_TRUE(store_->Checkout("corpus", "main", tmp_.Path("out")).ok());
  EXPECT_EQ(Snapshot(tmp_.Path("out")), Snapshot(src_));
  // By digest prefix and by the full digest, too.
  ASSERT_TRUE(store_->Checkout("corpus", r.commit.substr(0, 8), tmp_.Path("out2")).ok());
  EXPECT_EQ(Snapshot(tmp_.Path("out2")), Snapshot(src_));
}

TEST_F(VersionStoreTest, OnePercentOfFilesChangedStoresAboutOnePercentNewBytes) {
  // 200 files of 64 KiB in 4 folders (each file one chunk at the default chunk sizes); then 2 of them
  // (1%) rewritten.
  PushOptions o{.dataset = "corpus", .message = "v"};
  for (int i = 0; i < 200; ++i) WriteFile(absl::StrCat(src_, "/part", i % 4, "/f", i), RandomBytes(65536, i));
  const PushResult first = store_->Push(src_, o).value();
  EXPECT_EQ(first.bytes, 200u * 65536);
  EXPECT_EQ(first.chunks, 200u);
  EXPECT_EQ(first.new_objects, 200u + 5 + 1);  // chunks, 4 folders' trees and the top one, the commit
  WriteFile(src_ + "/part0/f0", RandomBytes(65536, 1000));
  WriteFile(src_ + "/part1/f1", RandomBytes(65536, 1001));
  const PushResult second = store_->Push(src_, o).value();
  // New: the two files' chunks, the trees of part0, part1 and the top folder, and the commit.
  EXPECT_EQ(second.new_objects, 2u + 3 + 1);
  const uint64_t trees_and_commit = second.new_bytes - 2 * 65536;
  EXPECT_LT(trees_and_commit, 2 * 50 * 150 + 1000u);  // ~50 entries of < 150 bytes per changed folder
  const double fraction = static_cast<double>(second.new_bytes) / static_cast<double>(second.bytes);
  EXPECT_GT(fraction, 0.01);
  EXPECT_LT(fraction, 0.0115) << second.new_bytes << " new bytes of " << second.bytes;
  // Pushing the same folder again makes no commit and stores nothing.
  const PushResult third = store_->Push(src_, o).value();
  EXPECT_TRUE(third.unchanged);
  EXPECT_EQ(third.commit, second.commit);
  EXPECT_EQ(third.new_objects, 0u);
}

TEST_F(VersionStoreTest, DiffLogAndRevisions) {
  WriteFile(src_ + "/keep", "same");
  WriteFile(src_ + "/edit", "before");
  WriteFile(src_ + "/gone/x", "x");
  const std::string v1 = Push("one").commit;
  WriteFile(src_ + "/edit", "after!!");
  fs::remove_all(src_ + "/gone");
  WriteFile(src_ + "/new/y", "yy");
  const std::string v2 = Push("two").commit;

  absl::StatusOr<std::vector<DiffEntry>> diff = store_->Diff("corpus", "main~1", "main");
  ASSERT_TRUE(diff.ok()) << diff.status();
  ASSERT_EQ(diff->size(), 3u);
  EXPECT_EQ((*diff)[0].path, "edit");
  EXPECT_EQ((*diff)[0].change, DiffEntry::Change::kModified);
  EXPECT_EQ((*diff)[0].bytes_before, 6u);
  EXPECT_EQ((*diff)[0].bytes_after, 7u);
  EXPECT_EQ((*diff)[1].path, "gone/x");
  EXPECT_EQ((*diff)[1].change, DiffEntry::Change::kRemoved);
  EXPECT_EQ((*diff)[2].path, "new/y");
  EXPECT_EQ((*diff)[2].change, DiffEntry::Change::kAdded);
  EXPECT_TRUE(store_->Diff("corpus", "main", v2)->empty());

  absl::StatusOr<std::vector<LogEntry>> log = store_->Log("corpus", "main", 10);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].digest, v2);
  EXPECT_EQ((*log)[0].commit.message, "two");
  EXPECT_EQ((*log)[0].commit.parents, std::vector<std::string>{v1});
  EXPECT_EQ((*log)[0].commit.time_unix_s, 1'790'000'060);
  EXPECT_EQ((*log)[0].commit.author, "ada");
  EXPECT_EQ((*log)[0].commit.files, 3u);
  EXPECT_EQ((*log)[0].commit.bytes, 4u + 7 + 2);
  EXPECT_EQ((*log)[1].digest, v1);
  EXPECT_EQ(store_->Log("corpus", "main", 1)->size(), 1u);

  EXPECT_EQ(store_->Resolve("corpus", "main~1").value(), v1);
  EXPECT_EQ(store_->Resolve("corpus", v1.substr(0, 10)).value(), v1);
  EXPECT_EQ(store_->Resolve("corpus", "main~2").status().message(),
            "revision \"main~2\" goes back past the dataset's first commit (1 back)");
  EXPECT_TRUE(absl::IsNotFound(store_->Resolve("corpus", "nosuch").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Resolve("other", "main").status()));
  EXPECT_EQ(store_->Resolve("corpus", "main~x").status().message(),
            "revision \"main~x\": after ~ comes a count of commits, as main~2");
}

TEST_F(VersionStoreTest, BranchesMoveTagsDoNot) {
  WriteFile(src_ + "/f", "1");
  const std::string v1 = Push("one").commit;
  ASSERT_TRUE(store_->CreateTag("corpus", "v1.0", "main").ok());
  ASSERT_TRUE(store_->CreateBranch("corpus", "clean", "main").ok());
  WriteFile(src_ + "/f", "2");
  const std::string on_clean = Push("cleaned", "clean").commit;
  EXPECT_EQ(store_->Resolve("corpus", "main").value(), v1);
  EXPECT_EQ(store_->Resolve("corpus", "clean").value(), on_clean);
  EXPECT_EQ(store_->Resolve("corpus", "v1.0").value(), v1);
  EXPECT_EQ(store_->CreateTag("corpus", "v1.0", "clean").message(),
            "dataset \"corpus\" already has a tag \"v1.0\"; tags never move (delete it first)");
  EXPECT_TRUE(absl::IsAlreadyExists(store_->CreateBranch("corpus", "clean", "main")));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->CreateBranch("corpus", "../x", "main")));
  // A revision means one thing: no branch named as a tag (or the reverse), no name that reads as a digest.
  EXPECT_EQ(store_->CreateBranch("corpus", "v1.0", "main").message(), "dataset \"corpus\" already has a tag \"v1.0\"");
  EXPECT_EQ(store_->CreateTag("corpus", "clean", "main").message(),
            "dataset \"corpus\" already has a branch \"clean\"");
  EXPECT_EQ(store_->CreateBranch("corpus", v1.substr(0, 8), "main").message(),
            "branch name \"" + v1.substr(0, 8) +
                "\" is all hex digits and would read as a commit digest; choose another name");
  PushOptions o{.dataset = "corpus", .branch = "v1.0"};
  EXPECT_TRUE(absl::IsAlreadyExists(store_->Push(src_, o).status()));
  const std::vector<Ref> refs = store_->ListRefs("corpus").value();
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0].name, "clean");
  EXPECT_EQ(refs[1].name, "main");
  EXPECT_EQ(refs[2].name, "v1.0");
  EXPECT_EQ(refs[2].kind, Ref::Kind::kTag);
  EXPECT_EQ(store_->ListDatasets(), std::vector<std::string>{"corpus"});
}

TEST_F(VersionStoreTest, GarbageCollectionRemovesOnlyUnreferencedObjects) {
  WriteFile(src_ + "/shared", RandomBytes(5000, 1));
  Push("base");
  ASSERT_TRUE(store_->CreateBranch("corpus", "scratch", "main").ok());
  WriteFile(src_ + "/only-on-scratch", RandomBytes(3000, 2));
  const PushResult scratch = Push("scratch work", "scratch");
  // A killed push leaves files in objects/tmp/.
  WriteFile(tmp_.Path("store/objects/tmp/123-0"), "partial");

  GcResult kept = GarbageCollect(*store_).value();
  EXPECT_EQ(kept.removed_objects, 0u);
  EXPECT_EQ(kept.temp_files_removed, 1u);

  ASSERT_TRUE(store_->DeleteRef("corpus", Ref::Kind::kBranch, "scratch").ok());
  const GcResult gc = GarbageCollect(*store_).value();
  // Exactly what only the scratch commit reached: its chunk, its tree and the commit itself.
  EXPECT_EQ(gc.removed_objects, scratch.new_objects);
  EXPECT_EQ(gc.removed_bytes, scratch.new_bytes);
  EXPECT_EQ(gc.kept_objects, kept.kept_objects - scratch.new_objects);
  const FsckReport fsck = Fsck(*store_).value();
  EXPECT_TRUE(fsck.ok());
  EXPECT_EQ(fsck.unreferenced_objects, 0u);
  EXPECT_EQ(fsck.objects, gc.kept_objects);
  ASSERT_TRUE(store_->Checkout("corpus", "main", tmp_.Path("out")).ok());
  EXPECT_EQ(ReadRaw(tmp_.Path("out/shared")), RandomBytes(5000, 1));
}

TEST_F(VersionStoreTest, ADamagedRefIsReportedAndStopsGarbageCollection) {
  WriteFile(src_ + "/f", "1");
  Push("one");
  ASSERT_TRUE(store_->CreateBranch("corpus", "exp", "main").ok());
  WriteFile(src_ + "/f", "2");
  const std::string exp = Push("two", "exp").commit;
  WriteFile(tmp_.Path("store/refs/corpus/branches/exp"), exp.substr(0, 63));  // truncated
  const std::vector<Ref> refs = store_->ListRefs("corpus").value();
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].name, "exp");
  EXPECT_FALSE(refs[0].error.empty());
  const FsckReport fsck = Fsck(*store_).value();
  ASSERT_EQ(fsck.missing.size(), 1u);
  EXPECT_TRUE(fsck.missing[0].starts_with("corpus exp: unreadable ref")) << fsck.missing[0];
  EXPECT_TRUE(absl::IsDataLoss(GarbageCollect(*store_).status()));
  WriteFile(tmp_.Path("store/refs/corpus/branches/exp"), exp + "\n");      // repaired: nothing was lost
  ASSERT_TRUE(store_->Checkout("corpus", "exp", tmp_.Path("out/")).ok());  // a trailing slash is fine
  EXPECT_EQ(ReadRaw(tmp_.Path("out/f")), "2");
}

// A ref update killed between writing its temporary file and renaming it (PushCrash found one) leaves
// "main.tmp.<16 hex>": not a ref, not damage, and never a name a branch may take.
TEST_F(VersionStoreTest, ARefWriteCutShortLeavesNoRef) {
  WriteFile(src_ + "/f", "1");
  const std::string one = Push("one").commit;
  WriteFile(tmp_.Path("store/refs/corpus/branches/main.tmp.54b690396fb5f3eb"), one.substr(0, 20));
  const std::vector<Ref> refs = store_->ListRefs("corpus").value();
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].name, "main");
  EXPECT_EQ(refs[0].commit, one);
  EXPECT_TRUE(Fsck(*store_).value().ok());
  EXPECT_EQ(store_->CreateBranch("corpus", "main.tmp.0123456789abcdef", "main").message(),
            "branch name \"main.tmp.0123456789abcdef\" is reserved: a name ending in .tmp. and 16 hex digits is an "
            "interrupted write's; choose another");
  EXPECT_TRUE(store_->CreateBranch("corpus", "main.tmp.v2", "main").ok());  // only the writer's own pattern
  EXPECT_FALSE(IsInterruptedWrite("main.tmp.0123456789ABCDEF"));
  EXPECT_FALSE(IsInterruptedWrite(".tmp.0123456789abcdef"));  // nothing before it
}

TEST_F(VersionStoreTest, PushingTheBytesAgainRepairsATruncatedObject) {
  WriteFile(src_ + "/f", "precious data");
  Push("one");
  const std::string path = store_->objects().PathOf(archive::Sha256Hex("precious data"));
  ::chmod(path.c_str(), 0644);
  WriteFile(path, "precious");
  EXPECT_FALSE(Fsck(*store_)->ok());
  WriteFile(src_ + "/g", "more");
  Push("two");
  EXPECT_TRUE(Fsck(*store_)->ok());
  ASSERT_TRUE(store_->Checkout("corpus", "main~1", tmp_.Path("out")).ok());
  EXPECT_EQ(ReadRaw(tmp_.Path("out/f")), "precious data");
}

TEST_F(VersionStoreTest, DamageIsFoundAndNeverCheckedOut) {
  WriteFile(src_ + "/f", RandomBytes(3000, 3));
  Push("one");
  const Tree tree = store_->ReadTree(store_->ReadCommit(store_->Resolve("corpus", "main").value())->tree).value();
  const std::string chunk = tree.entries.at(0).chunks.at(0).digest;
  const std::string path = store_->objects().PathOf(chunk);
  ::chmod(path.c_str(), 0644);
  std::string bytes = ReadRaw(path);
  bytes[10] ^= 1;
  WriteFile(path, bytes);

  const FsckReport fsck = Fsck(*store_).value();
  EXPECT_EQ(fsck.damaged, std::vector<std::string>{chunk});
  EXPECT_FALSE(fsck.ok());
  absl::StatusOr<CheckoutResult> out = store_->Checkout("corpus", "main", tmp_.Path("out"));
  EXPECT_TRUE(absl::IsDataLoss(out.status())) << out.status();
  EXPECT_FALSE(fs::exists(tmp_.Path("out")));  // nothing half-written is left
}

TEST_F(VersionStoreTest, BadInputIsRefusedNamingTheProblem) {
  WriteFile(src_ + "/f", "x");
  fs::create_symlink("/etc/passwd", src_ + "/link");
  PushOptions o{.dataset = "corpus"};
  EXPECT_EQ(store_->Push(src_, o).status().message(),
            src_ +
                "/link: datasets hold regular files and folders only, and this is a symbolic link; push with "
                "--follow-links to store the file a link leads to, or move it out of the folder");
  // With follow_links a link to a file is stored as that file's bytes; a link to a folder is still refused.
  fs::remove(src_ + "/link");
  fs::create_symlink("f", src_ + "/link");
  o.follow_links = true;
  ASSERT_TRUE(store_->Push(src_, o).ok());
  ASSERT_TRUE(store_->Checkout("corpus", "main", tmp_.Path("followed")).ok());
  EXPECT_EQ(ReadRaw(tmp_.Path("followed/link")), "x");
  EXPECT_FALSE(fs::is_symlink(tmp_.Path("followed/link")));
  fs::remove(src_ + "/link");
  fs::create_directory_symlink("/etc", src_ + "/etc-link");
  EXPECT_EQ(store_->Push(src_, o).status().message(),
            src_ +
                "/etc-link: datasets hold regular files and folders only, and this is a symbolic link; "
                "--follow-links follows links to regular files only (not to folders, dangling links or loops); "
                "replace it or move it out of the folder");
  fs::remove(src_ + "/etc-link");
  o.follow_links = false;
  WriteFile(src_ + "/\xc0\xaf", "overlong '/' in a name");
  EXPECT_EQ(store_->Push(src_, o).status().message(),
            src_ + "/\xc0\xaf: file names must be UTF-8 and at most 255 bytes; rename it");
  fs::remove(src_ + "/\xc0\xaf");
  o.message = "\xff";
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Push(src_, o).status()));
  o.message = "";
  o.dataset = "no/slash";
  EXPECT_EQ(store_->Push(src_, o).status().message(),
            "dataset name \"no/slash\" is not valid: use 1 to 64 of A-Z a-z 0-9 . _ -, not starting with . or -");
  o.dataset = "corpus";
  EXPECT_TRUE(absl::IsNotFound(store_->Push(tmp_.Path("missing"), o).status()));
  ASSERT_TRUE(store_->Push(src_, o).ok());
  WriteFile(tmp_.Path("busy/file"), "x");
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->Checkout("corpus", "main", tmp_.Path("busy")).status()));
  EXPECT_EQ(ReadRaw(tmp_.Path("busy/file")), "x");
  EXPECT_EQ(store_->ListDatasets(), std::vector<std::string>{"corpus"});
}

}  // namespace
}  // namespace gpugeek::data
