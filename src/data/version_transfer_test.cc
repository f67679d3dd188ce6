#include "data/version_transfer.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "archive/digest.h"
#include "common/fake_clock.h"
#include "crypto/test_util.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;
using crypto::testing::ReadRaw;
using crypto::testing::TempDir;

void WriteFile(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

const ChunkerOptions kSmallChunks{.min_bytes = 1024, .normal_bytes = 4096, .max_bytes = 16384};

// A client store pushes versions to a server store object by object, children first, as
// `gpugeek data push --remote` does over HTTP.
class VersionTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.Set(TimePoint(std::chrono::seconds(1'790'000'000)));
    client_ = VersionStore::Open(tmp_.Path("client"), clock_).value();
    server_ = VersionStore::Open(tmp_.Path("server"), clock_).value();
    src_ = tmp_.Path("src");
    std::string big;
    for (int i = 0; i < 6000; ++i) big += "line " + std::to_string(i * 7919 % 10007) + " of the corpus\n";
    WriteFile(src_ + "/big.txt", big);  // ~130 kB: many chunks
    WriteFile(src_ + "/a/b/c.txt", "deep\n");
    WriteFile(src_ + "/a/d.txt", "shallow\n");
    WriteFile(src_ + "/empty", "");
  }
  std::string Snapshot(const std::string& parent) {
    PushOptions o{.dataset = "corpus", .message = "m", .author = "ada"};
    o.chunking = kSmallChunks;
    absl::StatusOr<PushResult> r = client_->Snapshot(src_, o, parent);
    EXPECT_TRUE(r.ok()) << r.status();
    clock_.Advance(std::chrono::seconds(60));
    return r.ok() ? r->commit : "";
  }
  // Sends every object of `commit` the server lacks, in order; the number sent.
  int Send(const std::string& commit) {
    int sent = 0;
    absl::StatusOr<std::vector<VersionObject>> objects = ListVersionObjects(*client_, commit);
    EXPECT_TRUE(objects.ok()) << objects.status();
    if (!objects.ok()) return -1;
    for (const VersionObject& o : *objects) {
      if (server_->objects().Has(o.digest)) continue;
      absl::StatusOr<bool> r = AcceptObject(*server_, o.kind, o.digest, client_->objects().Get(o.digest).value());
      EXPECT_TRUE(r.ok()) << r.status();
      sent += r.value_or(false) ? 1 : 0;
    }
    return sent;
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<VersionStore> client_, server_;
  std::string src_;
};

TEST_F(VersionTransferTest, ObjectsChildrenFirstThenTheBranchMovesByCompareAndSwap) {
  const std::string first = Snapshot("");
  std::vector<VersionObject> objects = ListVersionObjects(*client_, first).value();
  // Trees: the top folder, a/ and a/b/ (the empty file has no chunks); the commit last.
  int chunks = 0, trees = 0;
  for (const VersionObject& o : objects)
    (o.kind == ObjectKind::kChunk ? chunks : trees) += o.kind != ObjectKind::kCommit;
  EXPECT_EQ(trees, 3);
  EXPECT_EQ(objects.back().kind, ObjectKind::kCommit);
  EXPECT_EQ(objects.back().digest, first);
  EXPECT_EQ(objects[objects.size() - 2].kind, ObjectKind::kTree);  // the top folder's tree, after a/'s
  EXPECT_EQ(objects[objects.size() - 2].digest, client_->ReadCommit(first)->tree);
  EXPECT_EQ(Send(first), chunks + trees + 1);
  ASSERT_TRUE(server_->SetBranch("corpus", "main", first, "").ok());
  // Another writer's view of the branch is stale: compare-and-swap refuses it.
  absl::Status stale = server_->SetBranch("corpus", "main", first, "");
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(stale.message()).find("branch 'main' of dataset 'corpus' is at " + first.substr(0, 12)),
            std::string::npos)
      << stale;

  // One small file changed: its chunk, the trees on its path (a/b, a, top) and the commit are new.
  WriteFile(src_ + "/a/b/c.txt", "deeper\n");
  const std::string second = Snapshot(first);
  EXPECT_EQ(Send(second), 1 + 3 + 1);
  ASSERT_TRUE(server_->SetBranch("corpus", "main", second, first).ok());
  EXPECT_EQ(server_->Resolve("corpus", "main").value(), second);
  EXPECT_EQ(server_->Resolve("corpus", "main~1").value(), first);
  ASSERT_TRUE(server_->Checkout("corpus", "main", tmp_.Path("out")).ok());
  EXPECT_EQ(ReadRaw(tmp_.Path("out/a/b/c.txt")), "deeper\n");
  EXPECT_EQ(ReadRaw(tmp_.Path("out/big.txt")), ReadRaw(src_ + "/big.txt"));

  // Unchanged folder: the snapshot is the parent itself.
  PushOptions o{.dataset = "corpus", .message = "m"};
  o.chunking = kSmallChunks;
  absl::StatusOr<PushResult> same = client_->Snapshot(src_, o, second);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->unchanged);
  EXPECT_EQ(same->commit, second);
}

TEST_F(VersionTransferTest, AnUntrustedSenderCannotStoreWhatDoesNotHashOrIsNotWhole) {
  const std::string commit = Snapshot("");
  std::vector<VersionObject> objects = ListVersionObjects(*client_, commit).value();
  const VersionObject& chunk = objects.front();
  const std::string bytes = client_->objects().Get(chunk.digest).value();
  // Bytes that are not the digest's.
  absl::StatusOr<bool> forged = AcceptObject(*server_, ObjectKind::kChunk, chunk.digest, bytes + "x");
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(server_->objects().Has(chunk.digest));
  EXPECT_EQ(AcceptObject(*server_, ObjectKind::kChunk, "../../etc/passwd", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  // The commit before its tree, a tree before its chunks: refused, naming what is missing.
  absl::StatusOr<bool> early =
      AcceptObject(*server_, ObjectKind::kCommit, commit, client_->objects().Get(commit).value());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(early.status().message()).find("the commit's tree"), std::string::npos) << early.status();
  const std::string top = client_->ReadCommit(commit)->tree;
  absl::StatusOr<bool> tree = AcceptObject(*server_, ObjectKind::kTree, top, client_->objects().Get(top).value());
  EXPECT_EQ(tree.status().code(), absl::StatusCode::kFailedPrecondition);
  // A chunk's bytes declared as a tree do not decode.
  EXPECT_EQ(AcceptObject(*server_, ObjectKind::kTree, chunk.digest, bytes).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseObjectKind("blob").status().message(), "object kind 'blob' is not one of chunk, tree, commit");
  // Nothing but what was accepted: the server has no object at all.
  int count = 0;
  ASSERT_TRUE(server_->objects().ForEach([&](const std::string&, uint64_t) { ++count; }).ok());
  EXPECT_EQ(count, 0);
  // A branch cannot point at a commit the store lacks.
  EXPECT_EQ(server_->SetBranch("corpus", "main", commit, "").code(), absl::StatusCode::kNotFound);
}

TEST_F(VersionTransferTest, AFolderOrCommitMustSayItsTreesTrueSize) {
  // One file, and a folder naming its tree twice: honest totals are 2 files of 2 x 5 bytes.
  auto put = [&](ObjectKind kind, const std::string& bytes) {
    const std::string digest = archive::Sha256Hex(bytes);
    absl::StatusOr<bool> r = AcceptObject(*server_, kind, digest, bytes);
    return r.ok() ? absl::StatusOr<std::string>(digest) : absl::StatusOr<std::string>(r.status());
  };
  const std::string chunk = put(ObjectKind::kChunk, "data\n").value();
  Tree leaf;
  leaf.entries.push_back({.name = "f", .bytes = 5, .chunks = {{chunk, 5}}});
  const std::string leaf_digest = put(ObjectKind::kTree, EncodeTree(leaf)).value();
  Tree twice;
  twice.entries.push_back({.name = "a", .is_dir = true, .bytes = 5, .tree = leaf_digest, .files = 1});
  twice.entries.push_back({.name = "b", .is_dir = true, .bytes = 5, .tree = leaf_digest, .files = 1});
  const std::string twice_digest = put(ObjectKind::kTree, EncodeTree(twice)).value();
  Tree liar;
  liar.entries.push_back({.name = "a", .is_dir = true, .bytes = 5, .tree = twice_digest, .files = 1});
  absl::StatusOr<std::string> refused = put(ObjectKind::kTree, EncodeTree(liar));
  EXPECT_EQ(refused.status().message(), "sub-folder 'a' says 1 files of 5 bytes; its tree " +
                                            twice_digest.substr(0, 12) + " holds 2 files of 10 bytes");
  Commit commit{.tree = twice_digest, .dataset = "corpus", .files = 2, .bytes = 10};
  EXPECT_TRUE(put(ObjectKind::kCommit, EncodeCommit(commit)).ok());
  commit.files = 1;
  EXPECT_EQ(put(ObjectKind::kCommit, EncodeCommit(commit)).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpugeek::data
