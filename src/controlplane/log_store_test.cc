#include "controlplane/log_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "crypto/key_provider.h"
#include "crypto/keyring.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

constexpr char kTenant[] = "acme";

std::string FileText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every behaviour holds for both formats: raw files (no keyring) and sealed ones (the server's default).
class LogStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_log_store_test_{}_{}", ::getpid(), name);
    fs::remove_all(dir_);
    keys_ = dir_.string() + ".keys";
    fs::remove_all(keys_);
    fs::create_directories(keys_);
    ASSERT_TRUE(crypto::CreateMasterKeyFile(keys_ + "/master.key").ok());
    OpenKeyring();
  }
  void TearDown() override {
    keyring_.reset();
    fs::remove_all(dir_);
    fs::remove_all(keys_);
  }

  bool sealed() const { return GetParam(); }
  // (Re)opens the keyring from its files, as a restarted server does.
  void OpenKeyring() {
    keyring_.reset();
    provider_ = crypto::FileKeyProvider::Open(keys_ + "/master.key").value();
    keyring_ = crypto::Keyring::Open(keys_ + "/keyring.json", *provider_).value();
  }
  // The options of the format under test.
  LogStoreOptions Options(LogStoreOptions o = {}) {
    if (sealed()) o.keyring = keyring_.get();
    return o;
  }
  fs::path LogFile(const std::string& job, int rank, int64_t epoch) const {
    return dir_ / job / fmt::format("rank-{}.epoch-{}.{}", rank, epoch, sealed() ? "sealed" : "log");
  }

  std::string ReadAll(LogStore& store, const std::string& job, int rank, int64_t epoch) {
    auto r = store.Read(kTenant, job, rank, epoch, 0, kMaxLogReadBytes);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->data : "";
  }

  fs::path dir_;
  std::string keys_;
  std::unique_ptr<crypto::FileKeyProvider> provider_;
  std::unique_ptr<crypto::Keyring> keyring_;
};

INSTANTIATE_TEST_SUITE_P(Formats, LogStoreTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Sealed" : "Raw"; });

TEST_P(LogStoreTest, StoresEveryByteValueAndInvalidUtf8Exactly) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  bytes += "\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\n";  // invalid UTF-8 sequences
  LogStore store(dir_.string(), Options());
  ASSERT_EQ(store.Append(kTenant, "j-00000001", 0, 1, 0, std::string_view(bytes).substr(0, 100)).value(), 100u);
  ASSERT_EQ(store.Append(kTenant, "j-00000001", 0, 1, 100, std::string_view(bytes).substr(100)).value(), bytes.size());
  EXPECT_EQ(ReadAll(store, "j-00000001", 0, 1), bytes);
  if (sealed()) {
    EXPECT_EQ(FileText(LogFile("j-00000001", 0, 1)).find(bytes.substr(0, 100)), std::string::npos);
  } else {
    EXPECT_EQ(FileText(LogFile("j-00000001", 0, 1)), bytes);
  }
  EXPECT_EQ(store.JobBytes("j-00000001"), bytes.size());

  // A new store (a restarted server) indexes what is on disk.
  LogStore again(dir_.string(), Options());
  EXPECT_EQ(again.JobBytes("j-00000001"), bytes.size());
  ASSERT_EQ(again.Attempts("j-00000001", 0).size(), 1u);
  EXPECT_EQ(again.Attempts("j-00000001", 0)[0].epoch, 1);
  EXPECT_EQ(again.Attempts("j-00000001", 0)[0].size, bytes.size());
  EXPECT_EQ(again.Append(kTenant, "j-00000001", 0, 1, 0, bytes).value(), bytes.size());  // a resend after the restart
  EXPECT_EQ(again.Append(kTenant, "j-00000001", 0, 1, bytes.size(), "more").value(), bytes.size() + 4);
  EXPECT_EQ(ReadAll(again, "j-00000001", 0, 1), bytes + "more");
}

TEST_P(LogStoreTest, ResendsAreIdempotentAndOverlapsAppendOnlyTheNewBytes) {
  LogStore store(dir_.string(), Options());
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 0, 0, "hello ").value(), 6u);
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 0, 0, "hello ").value(), 6u);        // the same chunk again
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 0, 0, "hello world").value(), 11u);  // overlaps: only "world" is new
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 0, 6, "world").value(), 11u);        // all known
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 0, 11, "").value(), 11u);            // nothing
  EXPECT_EQ(ReadAll(store, "j-1", 0, 0), "hello world");
  EXPECT_EQ(store.JobBytes("j-1"), 11u);
}

TEST_P(LogStoreTest, GapIsRefusedAndWritesNothing) {
  LogStore store(dir_.string(), Options());
  auto r = store.Append(kTenant, "j-1", 0, 0, 5, "late");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(r.status().message(), "job j-1 rank 0 epoch 0: chunk at offset 5 leaves a gap: the log holds 0 bytes");
  EXPECT_FALSE(fs::exists(LogFile("j-1", 0, 0)));
  EXPECT_TRUE(store.Attempts("j-1", 0).empty());
  ASSERT_EQ(store.Append(kTenant, "j-1", 0, 0, 0, "abc").value(), 3u);
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 0, 4, "e").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadAll(store, "j-1", 0, 0), "abc");
  EXPECT_EQ(store.JobBytes("j-1"), 3u);
}

TEST_P(LogStoreTest, QuotaCutsOutputAndWritesTheMarkerOnce) {
  LogStore store(dir_.string(), Options({.max_bytes_per_job = 10}));
  const std::string marker = LogStore::QuotaMarker(10);
  EXPECT_EQ(marker, "\n[gpugeek: log quota of 10 bytes reached; further output dropped]\n");
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 1, 0, "abcdefgh").value(), 8u);
  // Rank 1's chunk is cut at the quota (2 bytes fit), then the marker follows.
  EXPECT_EQ(store.Append(kTenant, "j-1", 1, 1, 0, "12345").value(), 2u + marker.size());
  EXPECT_EQ(ReadAll(store, "j-1", 1, 1), "12" + marker);
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 1, 8, "zz").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Append(kTenant, "j-1", 2, 1, 0, "new member").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(fs::exists(LogFile("j-1", 2, 1)));
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), "abcdefgh");
  EXPECT_EQ(store.JobBytes("j-1"), 10u + marker.size());
  // Other jobs have their own quota.
  EXPECT_EQ(store.Append(kTenant, "j-2", 0, 1, 0, "0123456789").value(), 10u);

  // The quota state survives a restart: no second marker.
  LogStore again(dir_.string(), Options({.max_bytes_per_job = 10}));
  EXPECT_EQ(again.Append(kTenant, "j-1", 0, 1, 8, "zz").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadAll(again, "j-1", 0, 1), "abcdefgh");
  EXPECT_EQ(ReadAll(again, "j-1", 1, 1), "12" + marker);
  // j-2 filled its quota exactly: the next byte is dropped with the marker, once.
  EXPECT_EQ(again.Append(kTenant, "j-2", 0, 1, 10, "x").value(), 10u + marker.size());
  EXPECT_EQ(again.Append(kTenant, "j-2", 0, 1, 10 + marker.size(), "y").status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadAll(again, "j-2", 0, 1), "0123456789" + marker);
}

TEST_P(LogStoreTest, ReadsRanges) {
  LogStore store(dir_.string(), Options());
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>('a' + i % 26));
  ASSERT_TRUE(store.Append(kTenant, "j-1", 3, 2, 0, text).ok());
  auto r = store.Read(kTenant, "j-1", 3, 2, 10, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, "klmno");
  EXPECT_EQ(r->offset, 10u);
  EXPECT_EQ(r->next_offset, 15u);
  EXPECT_EQ(r->size, 100u);
  r = store.Read(kTenant, "j-1", 3, 2, 95, 100);
  EXPECT_EQ(r->data, "rstuv");
  EXPECT_EQ(r->next_offset, 100u);
  r = store.Read(kTenant, "j-1", 3, 2, 100, 100);
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->next_offset, 100u);
  r = store.Read(kTenant, "j-1", 3, 2, 101, 100);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "offset 101 is past the end of the log (100 bytes)");
  // A member with nothing logged reads empty.
  r = store.Read(kTenant, "j-1", 0, 2, 0, 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->size, 0u);
  // Reads are capped at 1 MiB.
  const std::string big(kMaxLogReadBytes, 'x');
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 0, 0, big).ok());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 0, big.size(), big).ok());
  r = store.Read(kTenant, "j-1", 0, 0, 7, 4 * kMaxLogReadBytes);
  EXPECT_EQ(r->data.size(), kMaxLogReadBytes);
  EXPECT_EQ(r->next_offset, 7 + kMaxLogReadBytes);
  EXPECT_EQ(r->size, 2 * kMaxLogReadBytes);
}

TEST_P(LogStoreTest, AttemptsAndRanksAreOrdered) {
  LogStore store(dir_.string(), Options());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 3, 0, "third").ok());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 0, "first!").ok());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 5, 2, 0, "r5").ok());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 2, 0, "2nd").ok());
  const std::vector<LogAttempt> attempts = store.Attempts("j-1", 0);
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].epoch, 1);
  EXPECT_EQ(attempts[0].size, 6u);
  EXPECT_EQ(attempts[1].epoch, 2);
  EXPECT_EQ(attempts[1].size, 3u);
  EXPECT_EQ(attempts[2].epoch, 3);
  EXPECT_EQ(attempts[2].size, 5u);
  EXPECT_EQ(store.Ranks("j-1"), (std::vector<int>{0, 5}));
  EXPECT_TRUE(store.Attempts("j-1", 1).empty());
  EXPECT_TRUE(store.Ranks("j-2").empty());
  // A file that is not a log, and a non-canonical name, are not indexed.
  std::ofstream(dir_ / "j-1" / "notes.txt") << "x";
  std::ofstream(dir_ / "j-1" / "rank-07.epoch-1.log") << "x";
  LogStore again(dir_.string(), Options());
  EXPECT_EQ(again.Ranks("j-1"), (std::vector<int>{0, 5}));
  EXPECT_EQ(again.JobBytes("j-1"), 16u);
}

TEST_P(LogStoreTest, RejectsIdsThatCouldLeaveTheDirectory) {
  LogStore store(dir_.string(), Options());
  for (const std::string& bad :
       std::vector<std::string>{"", "..", "../x", "a/b", "a..b", "/etc", "j 1", "j\n1", std::string(65, 'a')}) {
    EXPECT_FALSE(LogStore::ValidJobId(bad)) << bad;
    EXPECT_EQ(store.Append(kTenant, bad, 0, 0, 0, "x").status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store.Read(kTenant, bad, 0, 0, 0, 10).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store.RemoveJob(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (const std::string& good : std::vector<std::string>{"j-00000001", "a", "A.b_c-9", std::string(64, 'z')}) {
    EXPECT_TRUE(LogStore::ValidJobId(good)) << good;
  }
  EXPECT_EQ(store.Append(kTenant, "j-1", -1, 0, 0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, -1, 0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_P(LogStoreTest, RemoveJobDeletesItsLogs) {
  LogStore store(dir_.string(), Options());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 0, "bye").ok());
  ASSERT_TRUE(store.Append(kTenant, "j-2", 0, 1, 0, "stay").ok());
  ASSERT_TRUE(store.RemoveJob("j-1").ok());
  EXPECT_FALSE(fs::exists(dir_ / "j-1"));
  EXPECT_EQ(store.JobBytes("j-1"), 0u);
  EXPECT_TRUE(store.Ranks("j-1").empty());
  EXPECT_EQ(store.Read(kTenant, "j-1", 0, 1, 0, 10)->size, 0u);
  EXPECT_TRUE(store.RemoveJob("j-1").ok());  // again: nothing to do
  EXPECT_EQ(ReadAll(store, "j-2", 0, 1), "stay");
  EXPECT_EQ(store.JobBytes("j-2"), 4u);
}

TEST_P(LogStoreTest, WaitForBytesWakesOnAppendFromAnotherThread) {
  LogStore store(dir_.string(), Options());
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 0, "abc").ok());
  // Bytes beyond the offset are there already: no wait.
  auto start = Steady::now();
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 1, 2, milliseconds(5000)));
  EXPECT_LT(Steady::now() - start, milliseconds(1000));

  start = Steady::now();
  auto writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    return store.Append(kTenant, "j-1", 0, 1, 3, "d");
  });
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 1, 3, milliseconds(5000)));
  const auto waited = Steady::now() - start;
  EXPECT_GE(waited, milliseconds(90));
  EXPECT_LT(waited, milliseconds(4000));
  EXPECT_EQ(writer.get().value(), 4u);

  // Another member's bytes do not end the wait; nothing does: it times out.
  writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(50));
    return store.Append(kTenant, "j-1", 1, 1, 0, "other rank");
  });
  start = Steady::now();
  EXPECT_FALSE(store.WaitForBytes("j-1", 0, 1, 4, milliseconds(300)));
  EXPECT_GE(Steady::now() - start, milliseconds(300));
  EXPECT_TRUE(writer.get().ok());
}

TEST_P(LogStoreTest, WaitForBytesEndsOnWakeNewEpochAndShutdown) {
  LogStore store(dir_.string(), Options());
  auto start = Steady::now();
  auto waker = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    store.Wake("j-1");
  });
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 1, 0, milliseconds(5000)));
  EXPECT_LT(Steady::now() - start, milliseconds(4000));
  waker.get();

  // The rank was placed again: its new epoch's first bytes end a wait on the old epoch.
  auto writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    return store.Append(kTenant, "j-1", 0, 2, 0, "again");
  });
  start = Steady::now();
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 1, 0, milliseconds(5000)));
  EXPECT_LT(Steady::now() - start, milliseconds(4000));
  EXPECT_TRUE(writer.get().ok());

  waker = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    store.Shutdown();
  });
  start = Steady::now();
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 2, 5, milliseconds(5000)));
  EXPECT_LT(Steady::now() - start, milliseconds(4000));
  waker.get();
  start = Steady::now();
  EXPECT_TRUE(store.WaitForBytes("j-9", 0, 0, 0, milliseconds(5000)));  // after Shutdown: at once
  EXPECT_LT(Steady::now() - start, milliseconds(1000));
}

TEST_P(LogStoreTest, WaitersBeyondTheLimitReturnAtOnce) {
  LogStore store(dir_.string(), Options({.max_waiters = 1}));
  auto first = std::async(std::launch::async, [&] { return store.WaitForBytes("j-1", 0, 0, 0, milliseconds(3000)); });
  std::this_thread::sleep_for(milliseconds(200));  // the first is waiting
  const auto start = Steady::now();
  EXPECT_FALSE(store.WaitForBytes("j-2", 0, 0, 0, milliseconds(3000)));
  EXPECT_LT(Steady::now() - start, milliseconds(1000));
  store.Wake("j-1");
  EXPECT_TRUE(first.get());
}

TEST_P(LogStoreTest, SixteenThreadsAppendToDifferentMembersConcurrently) {
  LogStore store(dir_.string(), Options());
  constexpr int kThreads = 16;
  constexpr int kLines = 300;
  const auto line = [](int t, int i) { return fmt::format("thread {} line {}\n", t, i); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads write ranks of one job (sharing its quota counter), half their own jobs.
      const std::string job = t % 2 == 0 ? "j-shared" : fmt::format("j-{}", t);
      uint64_t offset = 0;
      for (int i = 0; i < kLines; ++i) {
        const std::string data = line(t, i);
        auto r = store.Append(kTenant, job, t, 1, offset, data);
        ASSERT_TRUE(r.ok()) << r.status();
        if (i % 10 == 0) {
          ASSERT_TRUE(store.Append(kTenant, job, t, 1, offset, data).ok());  // a resend
        }
        offset = *r;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  uint64_t shared = 0;
  for (int t = 0; t < kThreads; ++t) {
    std::string want;
    for (int i = 0; i < kLines; ++i) want += line(t, i);
    const std::string job = t % 2 == 0 ? "j-shared" : fmt::format("j-{}", t);
    EXPECT_EQ(ReadAll(store, job, t, 1), want) << t;
    if (t % 2 == 0) {
      shared += want.size();
    } else {
      EXPECT_EQ(store.JobBytes(job), want.size());
    }
  }
  EXPECT_EQ(store.JobBytes("j-shared"), shared);
  EXPECT_EQ(store.Ranks("j-shared"), (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}));
}

// Sealed logs only: what is on disk, keys, rotation and crashes.
class SealedLogStoreTest : public LogStoreTest {};
INSTANTIATE_TEST_SUITE_P(Sealed, SealedLogStoreTest, ::testing::Values(true));

TEST_P(SealedLogStoreTest, FilesHoldNoPlaintextAndOpenOnlyForTheJobsTenant) {
  LogStore store(dir_.string(), Options());
  const std::string line = "epoch 1 loss 2.3456 HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789\n";
  std::string text;
  for (int i = 0; i < 50; ++i) text += line;
  ASSERT_EQ(store.Append(kTenant, "j-1", 0, 1, 0, text).value(), text.size());
  const std::string raw = FileText(LogFile("j-1", 0, 1));
  // One record: 4-byte length + the sealed blob (crypto::kSealOverhead bytes of header, nonce and tag).
  EXPECT_EQ(raw.size(), 4 + crypto::kSealOverhead + text.size());
  EXPECT_EQ(raw.find("loss"), std::string::npos);
  EXPECT_EQ(raw.find("hf_abc"), std::string::npos);
  EXPECT_EQ(fs::status(LogFile("j-1", 0, 1)).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), text);
  // Another tenant's key does not open it (its first Seal made it a key of its own).
  ASSERT_TRUE(store.Append("globex", "j-2", 0, 1, 0, "theirs").ok());
  auto other = store.Read("globex", "j-1", 0, 1, 0, 100);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDataLoss) << other.status();
  // Nor does the record open in another member's log: records are bound to their log and offset.
  const fs::path moved = LogFile("j-1", 1, 1);
  fs::copy_file(LogFile("j-1", 0, 1), moved);
  LogStore again(dir_.string(), Options());
  EXPECT_EQ(again.Read(kTenant, "j-1", 1, 1, 0, 10).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadAll(again, "j-1", 0, 1), text);
}

TEST_P(SealedLogStoreTest, AnAlteredByteIsDataLossNotGarbage) {
  {
    LogStore store(dir_.string(), Options());
    ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 0, "first record\n").ok());
    ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 13, "second record\n").ok());
  }
  std::string raw = FileText(LogFile("j-1", 0, 1));
  raw[raw.size() - 3] ^= 0x01;  // in the second record's tag
  std::ofstream(LogFile("j-1", 0, 1), std::ios::binary | std::ios::trunc) << raw;
  LogStore store(dir_.string(), Options());
  auto r = store.Read(kTenant, "j-1", 0, 1, 0, 100);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  // The first record alone still reads.
  r = store.Read(kTenant, "j-1", 0, 1, 0, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, "first record\n");
}

TEST_P(SealedLogStoreTest, LargeAppendsSplitIntoRecordsAndEveryRangeReadsExactly) {
  LogStore store(dir_.string(), Options());
  std::string text;
  for (int i = 0; text.size() < 3 * kMaxLogRecordBytes + 1234; ++i) text += fmt::format("line {:06}\n", i);
  ASSERT_EQ(store.Append(kTenant, "j-1", 0, 0, 0, text).value(), text.size());
  // ceil(size / 64 KiB) records, each with its own length prefix and seal.
  const size_t records = (text.size() + kMaxLogRecordBytes - 1) / kMaxLogRecordBytes;
  EXPECT_EQ(records, 4u);
  EXPECT_EQ(fs::file_size(LogFile("j-1", 0, 0)), text.size() + records * (4 + crypto::kSealOverhead));
  // Ranges inside one record, across boundaries, at the ends.
  const uint64_t k = kMaxLogRecordBytes;
  for (const auto& [offset, limit] : std::vector<std::pair<uint64_t, size_t>>{
           {0, 1}, {k - 1, 2}, {k - 5, k + 10}, {2 * k, k}, {7, 3 * k}, {text.size() - 1, 10}, {100, 1 << 20}}) {
    auto r = store.Read(kTenant, "j-1", 0, 0, offset, limit);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->data, text.substr(offset, limit)) << offset << "+" << limit;
    EXPECT_EQ(r->next_offset, offset + r->data.size());
    EXPECT_EQ(r->size, text.size());
  }
  // After a restart, the index comes from the frame headers.
  LogStore again(dir_.string(), Options());
  auto r = again.Read(kTenant, "j-1", 0, 0, k - 5, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, text.substr(k - 5, 10));
}

TEST_P(SealedLogStoreTest, ATornLastRecordIsCutAtRestartAndTheResendContinues) {
  {
    LogStore store(dir_.string(), Options());
    ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 0, "kept\n").ok());
    ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, 5, "torn\n").ok());
  }
  const uint64_t whole = 4 + crypto::kSealOverhead + 5;  // the first record's frame
  fs::resize_file(LogFile("j-1", 0, 1), whole + 9);      // a crash in the middle of writing the second
  LogStore store(dir_.string(), Options());
  EXPECT_EQ(fs::file_size(LogFile("j-1", 0, 1)), whole);
  EXPECT_EQ(store.JobBytes("j-1"), 5u);
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), "kept\n");
  // The agent resends from the size the store acknowledged.
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 1, 5, "torn\nnext\n").value(), 15u);
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), "kept\ntorn\nnext\n");
  // A file that is not a sealed log at all is set aside, not served or overwritten.
  std::ofstream(dir_ / "j-1" / "rank-3.epoch-1.sealed") << "plain text, not frames";
  LogStore again(dir_.string(), Options());
  EXPECT_EQ(again.Ranks("j-1"), std::vector<int>{0});
  EXPECT_EQ(FileText(dir_ / "j-1" / "rank-3.epoch-1.sealed.corrupt"), "plain text, not frames");
}

TEST_P(SealedLogStoreTest, KeyRotationKeepsEveryLogReadableWithoutRewritingIt) {
  std::string text;
  {
    LogStore store(dir_.string(), Options());
    for (int i = 0; i < 100; ++i) {
      const std::string line = fmt::format("before rotation {}\n", i);
      ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, text.size(), line).ok());
      text += line;
    }
  }
  const std::string before = FileText(LogFile("j-1", 0, 1));
  // A new data key for the tenant, then a new master key that re-wraps every data key and retires the
  // old master key: what `gpugeek keys rotate` does.
  ASSERT_TRUE(keyring_->RotateDataKey(kTenant).ok());
  auto rotation = crypto::RotateMasterKeyAndRewrap(*provider_, *keyring_, /*retire_unused=*/true);
  ASSERT_TRUE(rotation.ok()) << rotation.status();
  EXPECT_EQ(rotation->retired.size(), 1u);
  OpenKeyring();  // a restart: only the new master key is in the key file
  LogStore store(dir_.string(), Options());
  EXPECT_EQ(FileText(LogFile("j-1", 0, 1)), before);  // no byte of the log was rewritten
  for (int i = 0; i < 10; ++i) {
    const std::string line = fmt::format("after rotation {}\n", i);
    ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 1, text.size(), line).ok());
    text += line;
  }
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), text);  // records under the old and the new data key
}

TEST_P(SealedLogStoreTest, ARawLogFromBeforeEncryptionStaysReadableAndNewLogsAreSealed) {
  {
    LogStore raw(dir_.string());  // no keyring: a server from before encryption
    ASSERT_TRUE(raw.Append(kTenant, "j-1", 0, 1, 0, "old ").ok());
  }
  LogStore store(dir_.string(), Options());
  EXPECT_EQ(store.Append(kTenant, "j-1", 0, 1, 4, "member").value(), 10u);  // keeps its format
  EXPECT_EQ(FileText(dir_ / "j-1" / "rank-0.epoch-1.log"), "old member");
  ASSERT_TRUE(store.Append(kTenant, "j-1", 0, 2, 0, "new epoch").ok());
  EXPECT_TRUE(fs::exists(dir_ / "j-1" / "rank-0.epoch-2.sealed"));
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), "old member");
  EXPECT_EQ(ReadAll(store, "j-1", 0, 2), "new epoch");
  EXPECT_EQ(store.JobBytes("j-1"), 19u);
  // Without the keyring, a sealed log is refused, by name, not served as bytes.
  LogStore keyless(dir_.string());
  auto r = keyless.Read(kTenant, "j-1", 0, 2, 0, 100);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(keyless.Append(kTenant, "j-1", 0, 2, 9, "x").status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpugeek::controlplane
