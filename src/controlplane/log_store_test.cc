#include "controlplane/log_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

std::string FileText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_log_store_test_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ReadAll(LogStore& store, const std::string& job, int rank, int64_t epoch) {
    auto r = store.Read(job, rank, epoch, 0, kMaxLogReadBytes);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->data : "";
  }

  fs::path dir_;
};

TEST_F(LogStoreTest, StoresEveryByteValueAndInvalidUtf8Exactly) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  bytes += "\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\n";  // invalid UTF-8 sequences
  LogStore store(dir_.string());
  ASSERT_EQ(store.Append("j-00000001", 0, 1, 0, std::string_view(bytes).substr(0, 100)).value(), 100u);
  ASSERT_EQ(store.Append("j-00000001", 0, 1, 100, std::string_view(bytes).substr(100)).value(), bytes.size());
  EXPECT_EQ(ReadAll(store, "j-00000001", 0, 1), bytes);
  EXPECT_EQ(FileText(dir_ / "j-00000001" / "rank-0.epoch-1.log"), bytes);
  EXPECT_EQ(store.JobBytes("j-00000001"), bytes.size());

  // A new store (a restarted server) indexes what is on disk.
  LogStore again(dir_.string());
  EXPECT_EQ(again.JobBytes("j-00000001"), bytes.size());
  ASSERT_EQ(again.Attempts("j-00000001", 0).size(), 1u);
  EXPECT_EQ(again.Attempts("j-00000001", 0)[0].epoch, 1);
  EXPECT_EQ(again.Attempts("j-00000001", 0)[0].size, bytes.size());
  EXPECT_EQ(again.Append("j-00000001", 0, 1, 0, bytes).value(), bytes.size());  // a resend after the restart
  EXPECT_EQ(again.Append("j-00000001", 0, 1, bytes.size(), "more").value(), bytes.size() + 4);
  EXPECT_EQ(ReadAll(again, "j-00000001", 0, 1), bytes + "more");
}

TEST_F(LogStoreTest, ResendsAreIdempotentAndOverlapsAppendOnlyTheNewBytes) {
  LogStore store(dir_.string());
  EXPECT_EQ(store.Append("j-1", 0, 0, 0, "hello ").value(), 6u);
  EXPECT_EQ(store.Append("j-1", 0, 0, 0, "hello ").value(), 6u);        // the same chunk again
  EXPECT_EQ(store.Append("j-1", 0, 0, 0, "hello world").value(), 11u);  // overlaps: only "world" is new
  EXPECT_EQ(store.Append("j-1", 0, 0, 6, "world").value(), 11u);        // all known
  EXPECT_EQ(store.Append("j-1", 0, 0, 11, "").value(), 11u);            // nothing
  EXPECT_EQ(ReadAll(store, "j-1", 0, 0), "hello world");
  EXPECT_EQ(store.JobBytes("j-1"), 11u);
}

TEST_F(LogStoreTest, GapIsRefusedAndWritesNothing) {
  LogStore store(dir_.string());
  auto r = store.Append("j-1", 0, 0, 5, "late");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(r.status().message(), "job j-1 rank 0 epoch 0: chunk at offset 5 leaves a gap: the log holds 0 bytes");
  EXPECT_FALSE(fs::exists(dir_ / "j-1" / "rank-0.epoch-0.log"));
  EXPECT_TRUE(store.Attempts("j-1", 0).empty());
  ASSERT_EQ(store.Append("j-1", 0, 0, 0, "abc").value(), 3u);
  EXPECT_EQ(store.Append("j-1", 0, 0, 4, "e").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadAll(store, "j-1", 0, 0), "abc");
  EXPECT_EQ(store.JobBytes("j-1"), 3u);
}

TEST_F(LogStoreTest, QuotaCutsOutputAndWritesTheMarkerOnce) {
  LogStore store(dir_.string(), {.max_bytes_per_job = 10});
  const std::string marker = LogStore::QuotaMarker(10);
  EXPECT_EQ(marker, "\n[gpugeek: log quota of 10 bytes reached; further output dropped]\n");
  EXPECT_EQ(store.Append("j-1", 0, 1, 0, "abcdefgh").value(), 8u);
  // Rank 1's chunk is cut at the quota (2 bytes fit), then the marker follows.
  EXPECT_EQ(store.Append("j-1", 1, 1, 0, "12345").value(), 2u + marker.size());
  EXPECT_EQ(ReadAll(store, "j-1", 1, 1), "12" + marker);
  EXPECT_EQ(store.Append("j-1", 0, 1, 8, "zz").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Append("j-1", 2, 1, 0, "new member").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(fs::exists(dir_ / "j-1" / "rank-2.epoch-1.log"));
  EXPECT_EQ(ReadAll(store, "j-1", 0, 1), "abcdefgh");
  EXPECT_EQ(store.JobBytes("j-1"), 10u + marker.size());
  // Other jobs have their own quota.
  EXPECT_EQ(store.Append("j-2", 0, 1, 0, "0123456789").value(), 10u);

  // The quota state survives a restart: no second marker.
  LogStore again(dir_.string(), {.max_bytes_per_job = 10});
  EXPECT_EQ(again.Append("j-1", 0, 1, 8, "zz").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadAll(again, "j-1", 0, 1), "abcdefgh");
  EXPECT_EQ(ReadAll(again, "j-1", 1, 1), "12" + marker);
  // j-2 filled its quota exactly: the next byte is dropped with the marker, once.
  EXPECT_EQ(again.Append("j-2", 0, 1, 10, "x").value(), 10u + marker.size());
  EXPECT_EQ(again.Append("j-2", 0, 1, 10 + marker.size(), "y").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadAll(again, "j-2", 0, 1), "0123456789" + marker);
}

TEST_F(LogStoreTest, ReadsRanges) {
  LogStore store(dir_.string());
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>('a' + i % 26));
  ASSERT_TRUE(store.Append("j-1", 3, 2, 0, text).ok());
  auto r = store.Read("j-1", 3, 2, 10, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, "klmno");
  EXPECT_EQ(r->offset, 10u);
  EXPECT_EQ(r->next_offset, 15u);
  EXPECT_EQ(r->size, 100u);
  r = store.Read("j-1", 3, 2, 95, 100);
  EXPECT_EQ(r->data, "rstuv");
  EXPECT_EQ(r->next_offset, 100u);
  r = store.Read("j-1", 3, 2, 100, 100);
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->next_offset, 100u);
  r = store.Read("j-1", 3, 2, 101, 100);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "offset 101 is past the end of the log (100 bytes)");
  // A member with nothing logged reads empty.
  r = store.Read("j-1", 0, 2, 0, 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->size, 0u);
  // Reads are capped at 1 MiB.
  const std::string big(kMaxLogReadBytes, 'x');
  ASSERT_TRUE(store.Append("j-1", 0, 0, 0, big).ok());
  ASSERT_TRUE(store.Append("j-1", 0, 0, big.size(), big).ok());
  r = store.Read("j-1", 0, 0, 7, 4 * kMaxLogReadBytes);
  EXPECT_EQ(r->data.size(), kMaxLogReadBytes);
  EXPECT_EQ(r->next_offset, 7 + kMaxLogReadBytes);
  EXPECT_EQ(r->size, 2 * kMaxLogReadBytes);
}

TEST_F(LogStoreTest, AttemptsAndRanksAreOrdered) {
  LogStore store(dir_.string());
  ASSERT_TRUE(store.Append("j-1", 0, 3, 0, "third").ok());
  ASSERT_TRUE(store.Append("j-1", 0, 1, 0, "first!").ok());
  ASSERT_TRUE(store.Append("j-1", 5, 2, 0, "r5").ok());
  ASSERT_TRUE(store.Append("j-1", 0, 2, 0, "2nd").ok());
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
  LogStore again(dir_.string());
  EXPECT_EQ(again.Ranks("j-1"), (std::vector<int>{0, 5}));
  EXPECT_EQ(again.JobBytes("j-1"), 16u);
}

TEST_F(LogStoreTest, RejectsIdsThatCouldLeaveTheDirectory) {
  LogStore store(dir_.string());
  for (const std::string& bad :
       std::vector<std::string>{"", "..", "../x", "a/b", "a..b", "/etc", "j 1", "j\n1", std::string(65, 'a')}) {
    EXPECT_FALSE(LogStore::ValidJobId(bad)) << bad;
    EXPECT_EQ(store.Append(bad, 0, 0, 0, "x").status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store.Read(bad, 0, 0, 0, 10).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store.RemoveJob(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (const std::string& good : std::vector<std::string>{"j-00000001", "a", "A.b_c-9", std::string(64, 'z')}) {
    EXPECT_TRUE(LogStore::ValidJobId(good)) << good;
  }
  EXPECT_EQ(store.Append("j-1", -1, 0, 0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Append("j-1", 0, -1, 0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(LogStoreTest, RemoveJobDeletesItsLogs) {
  LogStore store(dir_.string());
  ASSERT_TRUE(store.Append("j-1", 0, 1, 0, "bye").ok());
  ASSERT_TRUE(store.Append("j-2", 0, 1, 0, "stay").ok());
  ASSERT_TRUE(store.RemoveJob("j-1").ok());
  EXPECT_FALSE(fs::exists(dir_ / "j-1"));
  EXPECT_EQ(store.JobBytes("j-1"), 0u);
  EXPECT_TRUE(store.Ranks("j-1").empty());
  EXPECT_EQ(store.Read("j-1", 0, 1, 0, 10)->size, 0u);
  EXPECT_TRUE(store.RemoveJob("j-1").ok());  // again: nothing to do
  EXPECT_EQ(ReadAll(store, "j-2", 0, 1), "stay");
  EXPECT_EQ(store.JobBytes("j-2"), 4u);
}

TEST_F(LogStoreTest, WaitForBytesWakesOnAppendFromAnotherThread) {
  LogStore store(dir_.string());
  ASSERT_TRUE(store.Append("j-1", 0, 1, 0, "abc").ok());
  // Bytes beyond the offset are there already: no wait.
  auto start = Steady::now();
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 1, 2, milliseconds(5000)));
  EXPECT_LT(Steady::now() - start, milliseconds(1000));

  start = Steady::now();
  auto writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    return store.Append("j-1", 0, 1, 3, "d");
  });
  EXPECT_TRUE(store.WaitForBytes("j-1", 0, 1, 3, milliseconds(5000)));
  const auto waited = Steady::now() - start;
  EXPECT_GE(waited, milliseconds(90));
  EXPECT_LT(waited, milliseconds(4000));
  EXPECT_EQ(writer.get().value(), 4u);

  // Another member's bytes do not end the wait; nothing does: it times out.
  writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(50));
    return store.Append("j-1", 1, 1, 0, "other rank");
  });
  start = Steady::now();
  EXPECT_FALSE(store.WaitForBytes("j-1", 0, 1, 4, milliseconds(300)));
  EXPECT_GE(Steady::now() - start, milliseconds(300));
  EXPECT_TRUE(writer.get().ok());
}

TEST_F(LogStoreTest, WaitForBytesEndsOnWakeNewEpochAndShutdown) {
  LogStore store(dir_.string());
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
    return store.Append("j-1", 0, 2, 0, "again");
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

TEST_F(LogStoreTest, WaitersBeyondTheLimitReturnAtOnce) {
  LogStore store(dir_.string(), {.max_waiters = 1});
  auto first = std::async(std::launch::async, [&] { return store.WaitForBytes("j-1", 0, 0, 0, milliseconds(3000)); });
  std::this_thread::sleep_for(milliseconds(200));  // the first is waiting
  const auto start = Steady::now();
  EXPECT_FALSE(store.WaitForBytes("j-2", 0, 0, 0, milliseconds(3000)));
  EXPECT_LT(Steady::now() - start, milliseconds(1000));
  store.Wake("j-1");
  EXPECT_TRUE(first.get());
}

TEST_F(LogStoreTest, SixteenThreadsAppendToDifferentMembersConcurrently) {
  LogStore store(dir_.string());
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
        auto r = store.Append(job, t, 1, offset, data);
        ASSERT_TRUE(r.ok()) << r.status();
        if (i % 10 == 0) {
          ASSERT_TRUE(store.Append(job, t, 1, offset, data).ok());  // a resend
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

}  // namespace
}  // namespace gpugeek::controlplane
