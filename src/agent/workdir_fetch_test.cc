#include "agent/workdir_fetch.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "archive/digest.h"
#include "archive/test_util.h"

namespace gpugeek::agent {
namespace {

TEST(WorkdirFetcherTest, ConcurrentMembersShareOneVerifiedDownload) {
  const std::string dir = archive::testing::TempDir("fetch");
  const std::string bytes(3 << 20, 'z');
  const std::string digest = archive::Sha256Hex(bytes);
  std::atomic<int> calls{0};
  auto fetcher = WorkdirFetcher::Create(dir + "/cache", [&](const std::string& d, const auto& sink) {
    ++calls;
    EXPECT_EQ(d, digest);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every member asks while this runs
    for (size_t at = 0; at < bytes.size(); at += 1 << 20) sink(bytes.substr(at, 1 << 20));
    return absl::OkStatus();
  });
  std::vector<std::shared_future<absl::StatusOr<std::string>>> futures;
  std::vector<std::thread> members;
  std::mutex mu;
  for (int i = 0; i < 8; ++i) {
    members.emplace_back([&] {
      auto f = fetcher->Fetch(digest);
      std::lock_guard<std::mutex> lock(mu);
      futures.push_back(f);
    });
  }
  for (auto& t : members) t.join();
  for (auto& f : futures) {
    ASSERT_TRUE(f.get().ok()) << f.get().status();
    EXPECT_EQ(*f.get(), dir + "/cache/" + digest);
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(fetcher->downloads(), 1);
  EXPECT_EQ(*archive::Sha256OfFile(dir + "/cache/" + digest), digest);
  // Cached: no second download, even from a new fetcher (an agent restart).
  auto again = WorkdirFetcher::Create(dir + "/cache", [&](const std::string&, const auto&) {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_TRUE(again->Fetch(digest).get().ok());
  EXPECT_EQ(calls.load(), 1);
}

TEST(WorkdirFetcherTest, BytesThatDoNotHashToTheDigestAreNotKept) {
  const std::string dir = archive::testing::TempDir("fetch-bad");
  const std::string digest = archive::Sha256Hex("the real archive");
  int calls = 0;
  auto fetcher = WorkdirFetcher::Create(dir, [&](const std::string&, const auto& sink) {
    ++calls;
    sink(std::string("something else"));
    return absl::OkStatus();
  });
  auto r = fetcher->Fetch(digest).get();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("hash to"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // A failure is forgotten: the next Fetch tries again.
  EXPECT_FALSE(fetcher->Fetch(digest).get().ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(fetcher->Fetch("../../etc").get().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpugeek::agent
