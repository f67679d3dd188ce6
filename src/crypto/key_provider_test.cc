#include "crypto/key_provider.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "crypto/test_util.h"

namespace gpugeek::crypto {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ModeOf;
using ::testing::Not;
using testing::ReadRaw;
using testing::TempDir;
using testing::WriteRaw;

TEST(MasterKeyFile, CreateWritesOneKeyWithMode0600AndNeverOverwrites) {
  TempDir dir;
  const std::string path = dir.Path("master.key");
  auto id = CreateMasterKeyFile(path);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(*id, ::testing::MatchesRegex("mk-[0-9]{8}-[0-9a-f]{8}"));
  EXPECT_EQ(ModeOf(path), 0600u);
  const std::string before = ReadRaw(path);
  auto again = CreateMasterKeyFile(path);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr(path));
  EXPECT_EQ(ReadRaw(path), before);
  auto provider = FileKeyProvider::Open(path);
  ASSERT_TRUE(provider.ok()) << provider.status();
  EXPECT_EQ((*provider)->active_key_id(), *id);
  EXPECT_THAT((*provider)->key_ids(), ElementsAre(*id));
}

TEST(MasterKeyFile, MissingFileSaysHowToCreateOne) {
  TempDir dir;
  const std::string path = dir.Path("nope.key");
  auto provider = FileKeyProvider::Open(path);
  ASSERT_EQ(provider.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(provider.status().message(), HasSubstr(path));
  EXPECT_THAT(provider.status().message(), HasSubstr("gpugeek keys init"));
}

TEST(MasterKeyFile, ReadableByOthersIsRefusedWithTheFix) {
  TempDir dir;
  const std::string path = dir.Path("master.key");
  ASSERT_TRUE(CreateMasterKeyFile(path).ok());
  for (mode_t mode : {0644, 0640, 0604, 0660, 0602}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto provider = FileKeyProvider::Open(path);
    ASSERT_EQ(provider.status().code(), absl::StatusCode::kFailedPrecondition) << std::oct << mode;
    EXPECT_THAT(provider.status().message(), HasSubstr(path));
    EXPECT_THAT(provider.status().message(), HasSubstr("chmod 600 " + path));
  }
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);  // stricter is fine
  EXPECT_TRUE(FileKeyProvider::Open(path).ok());
  EXPECT_EQ(FileKeyProvider::Open(dir.path()).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MasterKeyFile, MalformedLinesNameTheLineButNotTheKey) {
  const std::string key = std::string(64, 'a');
  struct Case {
    std::string text;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {"# only a comment\n\n", "holds no key"},
           {"mk-1 " + key + "\nmk-2\n", "line 2: no key after the id"},
           {"mk-1 " + key.substr(0, 60) + "\n", "line 1: a key is written as 64 hex digits"},
           {"mk/1 " + key + "\n", "line 1: the key id"},
           {"mk-1 " + key + "\nmk-1 " + key + "\n", "line 2: key id mk-1 appears twice"},
           {"mk-1 " + key.substr(0, 63) + "g\n", "line 1: a key is written in hex digits only"},
       }) {
    auto keys = ParseMasterKeyFile(c.text, "/etc/gpugeek/master.key");
    ASSERT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(keys.status().message(), HasSubstr("/etc/gpugeek/master.key"));
    EXPECT_THAT(keys.status().message(), HasSubstr(c.want));
    EXPECT_THAT(keys.status().message(), Not(HasSubstr("aaaaaaaa")));
  }
  auto ok = ParseMasterKeyFile("# c\n  mk-1\t" + key + "  \r\nmk-2 " + std::string(64, 'B') + "\n", "f");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->keys.size(), 2u);
  EXPECT_EQ(ok->keys[1].first, "mk-2");
  auto round = ParseMasterKeyFile(FormatMasterKeyFile(*ok), "f");
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->keys[0].second, ok->keys[0].second);
}

TEST(MasterKeyFile, RotateAppendsAnActiveKeyAndRetireRemovesOnlyOldOnes) {
  TempDir dir;
  const std::string path = dir.Path("master.key");
  const std::string first = CreateMasterKeyFile(path).value();
  auto provider = FileKeyProvider::Open(path).value();
  const SecretKey data_key = SecretKey::Generate().value();
  const std::string wrapped = provider->Wrap(first, data_key, "aad").value();

  const std::string second = RotateMasterKey(path).value();
  EXPECT_NE(second, first);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(provider->active_key_id(), first);  // until it reloads
  ASSERT_TRUE(provider->Reload().ok());
  EXPECT_THAT(provider->key_ids(), ElementsAre(first, second));
  EXPECT_EQ(provider->active_key_id(), second);
  EXPECT_EQ(provider->Unwrap(first, wrapped, "aad").value(), data_key);  // old keys still unwrap

  auto active = RetireMasterKey(path, second);
  EXPECT_EQ(active.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(active.message(), HasSubstr("active"));
  EXPECT_EQ(RetireMasterKey(path, "mk-nope").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(RetireMasterKey(path, first).ok());
  ASSERT_TRUE(provider->Reload().ok());
  EXPECT_THAT(provider->key_ids(), ElementsAre(second));
  EXPECT_EQ(provider->Unwrap(first, wrapped, "aad").status().code(), absl::StatusCode::kNotFound);
}

TEST(FileKeyProvider, WrapBindsKeyAndAad) {
  TempDir dir;
  const std::string path = dir.Path("master.key");
  const std::string id = CreateMasterKeyFile(path).value();
  auto provider = FileKeyProvider::Open(path).value();
  const SecretKey data_key = SecretKey::Generate().value();
  const std::string wrapped = provider->Wrap(id, data_key, "tenant-a").value();
  EXPECT_EQ(wrapped.size(), kNonceBytes + kKeyBytes + kTagBytes);
  EXPECT_EQ(wrapped.find(data_key.view()), std::string::npos);
  EXPECT_EQ(provider->Unwrap(id, wrapped, "tenant-a").value(), data_key);
  EXPECT_EQ(provider->Unwrap(id, wrapped, "tenant-b").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(provider->Wrap("mk-other", data_key, "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(provider->Unwrap(id, wrapped.substr(1), "tenant-a").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(provider->Describe(), HasSubstr(path));
}

TEST(MasterKeyFile, ConcurrentRotationsKeepEveryKey) {
  TempDir dir;
  const std::string path = dir.Path("master.key");
  ASSERT_TRUE(CreateMasterKeyFile(path).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) EXPECT_TRUE(RotateMasterKey(path).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(FileKeyProvider::Open(path).value()->key_ids().size(), 21u);
}

}  // namespace
}  // namespace gpugeek::crypto
