#include "agent/dataset_fetch.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "common/rng.h"
#include "crypto/test_util.h"
#include "data/version_store.h"

namespace gpugeek::agent {
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

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// Every file under `dir` ("x:" or "-:" then its bytes, by mode 0755 / 0644) and every folder ("dir").
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_directory()) {
      out[rel] = "dir";
    } else {
      const mode_t mode = ModeOf(e.path().string());
      out[rel] = (mode == 0755 ? "x:" : mode == 0644 ? "-:" : fmt::format("{:o}:", mode)) + ReadRaw(e.path().string());
    }
  }
  return out;
}

// Chunks of 16-256 KiB: the 3 MiB file is cut into a few dozen.
const data::ChunkerOptions kChunks{.min_bytes = 16 << 10, .normal_bytes = 64 << 10, .max_bytes = 256 << 10};

class DatasetFetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.Set(TimePoint(std::chrono::seconds(1'790'000'000)));
    server_ = data::VersionStore::Open(tmp_.Path("server"), clock_).value();
    src_ = tmp_.Path("src");
    // 5 folders (the top, bin, big, deep, deep/er), 5 files, one of them empty, one executable, one of
    // 3 MiB in many chunks.
    WriteFile(src_ + "/a.txt", "alpha\n");
    WriteFile(src_ + "/empty", "");
    WriteFile(src_ + "/bin/run.sh", "#!/bin/sh\necho hi\n", /*executable=*/true);
    WriteFile(src_ + "/big/part.bin", RandomBytes(3 << 20, 7));
    WriteFile(src_ + "/deep/er/c.txt", "gamma\n");
  }

  std::string Push(const std::string& dataset = "corpus") {
    data::PushOptions o{.dataset = dataset, .message = "v", .author = "ada"};
    o.chunking = kChunks;
    absl::StatusOr<data::PushResult> r = server_->Push(src_, o);
    EXPECT_TRUE(r.ok()) << r.status();
    clock_.Advance(std::chrono::seconds(60));
    return r.ok() ? r->commit : "";
  }

  // The server side of GET .../datasets/{commit}/objects/{digest}: the object's bytes from the server's
  // store, counted; `corrupt` (when set) names a digest whose bytes come back altered.
  DatasetFetcher::GetObjectFn Server() {
    return [this](const std::string& commit, const std::string& digest) -> absl::StatusOr<std::string> {
      EXPECT_EQ(commit.size(), 64u);
      ++gets_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        asked_.insert(digest);
      }
      if (delay_ > std::chrono::milliseconds(0)) std::this_thread::sleep_for(delay_);
      absl::StatusOr<std::string> bytes = server_->objects().Get(digest);
      std::lock_guard<std::mutex> lock(mu_);
      if (bytes.ok() && digest == corrupt_) bytes->append("!");
      return bytes;
    };
  }

  std::shared_ptr<DatasetFetcher> NewFetcher() {
    absl::StatusOr<std::shared_ptr<DatasetFetcher>> f = DatasetFetcher::Create(tmp_.Path("cache"), Server(), clock_);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : nullptr;
  }

  // Every object version `commit` is made of on the server (the commit, its trees, its distinct chunks)
  // and their bytes in all.
  std::pair<std::set<std::string>, uint64_t> ObjectsOf(const std::string& commit) {
    std::set<std::string> objects{commit};
    std::vector<std::string> trees{server_->ReadCommit(commit).value().tree};
    while (!trees.empty()) {
      const std::string t = trees.back();
      trees.pop_back();
      objects.insert(t);
      const data::Tree tree = server_->ReadTree(t).value();
      for (const data::TreeEntry& e : tree.entries) {
        if (e.is_dir) trees.push_back(e.tree);
        for (const data::ChunkRef& c : e.chunks) objects.insert(c.digest);
      }
    }
    uint64_t bytes = 0;
    for (const std::string& o : objects) bytes += server_->objects().Size(o).value();
    return {objects, bytes};
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<data::VersionStore> server_;
  std::string src_;
  std::atomic<int> gets_{0};
  std::chrono::milliseconds delay_{0};
  std::mutex mu_;
  std::set<std::string> asked_;  // guarded by mu_
  std::string corrupt_;          // guarded by mu_
};

TEST_F(DatasetFetcherTest, ChecksOutEveryByteAndDownloadsEachObjectOnce) {
  const std::string v1 = Push();
  const auto [objects, bytes] = ObjectsOf(v1);
  // The commit, 5 trees, and the chunks: one per small file (the empty one too) and dozens for 3 MiB.
  const std::vector<std::pair<std::string, data::TreeEntry>> files = server_->ListFiles(v1).value();
  ASSERT_EQ(files.size(), 5u);
  std::set<std::string> chunks;
  for (const auto& [path, e] : files) {
    for (const data::ChunkRef& c : e.chunks) chunks.insert(c.digest);
  }
  EXPECT_GT(chunks.size(), 4u + 12);
  ASSERT_EQ(objects.size(), 1 + 5 + chunks.size());

  // A restrictive umask: folders are still opened to members running as other users.
  const mode_t old_umask = ::umask(077);
  auto fetcher = NewFetcher();
  ASSERT_NE(fetcher, nullptr);
  absl::StatusOr<std::string> dir = fetcher->Fetch("corpus", v1).get();
  ::umask(old_umask);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, tmp_.Path("cache/versions/") + v1);
  EXPECT_EQ(*dir, fetcher->PathOf(v1));
  EXPECT_EQ(Snapshot(*dir), Snapshot(src_));
  EXPECT_EQ(fetcher->objects_downloaded(), objects.size());
  EXPECT_EQ(fetcher->bytes_downloaded(), bytes);
  EXPECT_EQ(gets_.load(), static_cast<int>(objects.size())) << "no object is asked for twice";
  for (const std::string& d :
       {tmp_.Path("cache"), *dir, *dir + "/deep", *dir + "/deep/er", *dir + "/big", *dir + "/bin"}) {
    EXPECT_EQ(ModeOf(d), 0755u) << d;
  }
  EXPECT_EQ(ModeOf(tmp_.Path("cache/versions")), 0711u);  // passable, not listable
  EXPECT_EQ(ModeOf(tmp_.Path("cache/store")), 0700u);
  EXPECT_EQ(ModeOf(tmp_.Path("cache/staging")), 0700u);
  EXPECT_EQ(ModeOf(*dir + "/a.txt"), 0644u);
  EXPECT_EQ(ModeOf(*dir + "/empty"), 0644u);
  EXPECT_EQ(ModeOf(*dir + "/bin/run.sh"), 0755u);
  EXPECT_TRUE(fs::is_empty(tmp_.Path("cache/staging")));

  // Again: no download at all, from this fetcher and from a new one on the same folder (an agent restart).
  EXPECT_EQ(fetcher->Fetch("corpus", v1).get().value_or(""), *dir);
  EXPECT_EQ(fetcher->objects_downloaded(), objects.size());
  auto restarted = NewFetcher();
  EXPECT_EQ(restarted->Fetch("corpus", v1).get().value_or(""), *dir);
  EXPECT_EQ(restarted->objects_downloaded(), 0u);
  EXPECT_EQ(gets_.load(), static_cast<int>(objects.size()));

  // A second version with one small file changed in deep/er: only its new chunk, the three trees on its
  // path (deep/er, deep, the top) and the new commit come over.
  WriteFile(src_ + "/deep/er/c.txt", "gamma, revised\n");
  const std::string v2 = Push();
  ASSERT_NE(v2, v1);
  const auto [objects2, bytes2] = ObjectsOf(v2);
  std::set<std::string> fresh;
  uint64_t fresh_bytes = 0;
  for (const std::string& o : objects2) {
    if (!objects.contains(o)) {
      fresh.insert(o);
      fresh_bytes += server_->objects().Size(o).value();
    }
  }
  ASSERT_EQ(fresh.size(), 1u + 3 + 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    asked_.clear();
  }
  absl::StatusOr<std::string> dir2 = restarted->Fetch("corpus", v2).get();
  ASSERT_TRUE(dir2.ok()) << dir2.status();
  EXPECT_EQ(Snapshot(*dir2), Snapshot(src_));
  EXPECT_EQ(restarted->objects_downloaded(), 5u);
  EXPECT_EQ(restarted->bytes_downloaded(), fresh_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(asked_, fresh);
  EXPECT_EQ(ReadRaw(*dir + "/deep/er/c.txt"), "gamma\n") << "the first version's checkout is untouched";
}

TEST_F(DatasetFetcherTest, ConcurrentFetchesOfOneCommitShareOneDownload) {
  const std::string v1 = Push();
  const auto [objects, bytes] = ObjectsOf(v1);
  delay_ = std::chrono::milliseconds(5);  // every member asks while the fetch runs
  auto fetcher = NewFetcher();
  ASSERT_NE(fetcher, nullptr);
  std::vector<std::shared_future<absl::StatusOr<std::string>>> futures;
  std::vector<std::thread> members;
  std::mutex futures_mu;
  for (int i = 0; i < 8; ++i) {
    members.emplace_back([&] {
      auto f = fetcher->Fetch("corpus", v1);
      std::lock_guard<std::mutex> lock(futures_mu);
      futures.push_back(f);
    });
  }
  for (auto& t : members) t.join();
  ASSERT_EQ(futures.size(), 8u);
  for (auto& f : futures) {
    ASSERT_TRUE(f.get().ok()) << f.get().status();
    EXPECT_EQ(*f.get(), fetcher->PathOf(v1));
  }
  EXPECT_EQ(fetcher->objects_downloaded(), objects.size());
  EXPECT_EQ(fetcher->bytes_downloaded(), bytes);
  EXPECT_EQ(gets_.load(), static_cast<int>(objects.size()));
  EXPECT_EQ(Snapshot(fetcher->PathOf(v1)), Snapshot(src_));
}

TEST_F(DatasetFetcherTest, WrongBytesFromTheServerAreDataLossAndNotKept) {
  const std::string v1 = Push();
  const auto [objects, bytes] = ObjectsOf(v1);
  const data::TreeEntry big = server_->ListFiles(v1).value().at(1).second;  // big/part.bin
  ASSERT_GT(big.chunks.size(), 1u);
  const std::string bad = big.chunks[1].digest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    corrupt_ = bad;
  }
  auto fetcher = NewFetcher();
  ASSERT_NE(fetcher, nullptr);
  absl::StatusOr<std::string> dir = fetcher->Fetch("corpus", v1).get();
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kDataLoss) << dir.status();
  EXPECT_NE(dir.status().message().find("object " + bad + ": the "), std::string::npos) << dir.status();
  EXPECT_NE(dir.status().message().find("; not stored"), std::string::npos) << dir.status();
  EXPECT_FALSE(fs::exists(fetcher->PathOf(v1)));
  EXPECT_FALSE(fs::exists(tmp_.Path("cache/store/objects/") + bad.substr(0, 2) + "/" + bad.substr(2)));
  EXPECT_TRUE(fs::is_empty(tmp_.Path("cache/staging")));
  EXPECT_LT(fetcher->objects_downloaded(), objects.size());

  // The failure is forgotten: with a good server the next Fetch completes, downloading only what the
  // failed one had not stored (each object once in all).
  {
    std::lock_guard<std::mutex> lock(mu_);
    corrupt_.clear();
  }
  dir = fetcher->Fetch("corpus", v1).get();
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(Snapshot(*dir), Snapshot(src_));
  EXPECT_EQ(fetcher->objects_downloaded(), objects.size());
  EXPECT_EQ(fetcher->bytes_downloaded(), bytes);
}

TEST_F(DatasetFetcherTest, ACommitOfAnotherDatasetOrABadDigestIsRefused) {
  const std::string other = Push("other");
  auto fetcher = NewFetcher();
  ASSERT_NE(fetcher, nullptr);
  absl::StatusOr<std::string> dir = fetcher->Fetch("corpus", other).get();
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument) << dir.status();
  EXPECT_EQ(dir.status().message(),
            fmt::format("commit {} is a version of dataset 'other', not of 'corpus'", other.substr(0, 12)));
  EXPECT_EQ(fetcher->objects_downloaded(), 1u) << "only the commit, which says whose it is";
  EXPECT_FALSE(fs::exists(fetcher->PathOf(other)));

  // Checked out under its own name, it is then refused under another without a request.
  ASSERT_TRUE(fetcher->Fetch("other", other).get().ok());
  const int gets = gets_.load();
  dir = fetcher->Fetch("corpus", other).get();
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument) << dir.status();
  EXPECT_EQ(gets_.load(), gets);

  for (const std::string& commit : {std::string("../../etc"), other.substr(0, 12), std::string(64, 'A')}) {
    dir = fetcher->Fetch("corpus", commit).get();
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument) << commit;
    EXPECT_NE(dir.status().message().find("is not a SHA-256"), std::string::npos) << dir.status();
  }
  EXPECT_EQ(fetcher->Fetch("../corpus", other).get().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gets_.load(), gets);
}

TEST_F(DatasetFetcherTest, AnObjectTheServerRefusesFailsTheFetchNamingIt) {
  Push();
  auto fetcher = NewFetcher();
  ASSERT_NE(fetcher, nullptr);
  const std::string unknown(64, 'e');
  absl::StatusOr<std::string> dir = fetcher->Fetch("corpus", unknown).get();
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kNotFound) << dir.status();
  EXPECT_TRUE(std::string(dir.status().message()).starts_with("downloading object " + unknown + ": ")) << dir.status();
  EXPECT_EQ(fetcher->objects_downloaded(), 0u);
}

TEST_F(DatasetFetcherTest, AVersionLargerThanTheFreeDiskIsRefusedBeforeAnyChunk) {
  const std::string v1 = Push();
  data::Commit huge = server_->ReadCommit(v1).value();
  huge.parents = {v1};
  huge.bytes = uint64_t{1} << 62;  // 4 EiB: no disk has that free
  const std::string digest = server_->objects().Put(data::EncodeCommit(huge)).value().digest;
  auto fetcher = NewFetcher();
  absl::StatusOr<std::string> refused = fetcher->Fetch("corpus", digest).get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("holds 4611686018427387904 bytes"), std::string::npos)
      << refused.status();
  EXPECT_EQ(fetcher->objects_downloaded(), 1u);  // the commit, and nothing after it
}

}  // namespace
}  // namespace gpugeek::agent
