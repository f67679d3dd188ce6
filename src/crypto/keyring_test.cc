#include "crypto/keyring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "crypto/test_util.h"

namespace gpugeek::crypto {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ModeOf;
using testing::ReadRaw;
using testing::TempDir;
using testing::WriteRaw;

class KeyringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CreateMasterKeyFile(key_path_).ok());
    provider_ = FileKeyProvider::Open(key_path_).value();
    auto keyring = Keyring::Open(keyring_path_, *provider_);
    ASSERT_TRUE(keyring.ok()) << keyring.status();
    keyring_ = *std::move(keyring);
  }

  TempDir dir_;
  const std::string key_path_ = dir_.Path("master.key");
  const std::string keyring_path_ = dir_.Path("keyring.json");
  std::unique_ptr<FileKeyProvider> provider_;
  std::unique_ptr<Keyring> keyring_;
};

TEST_F(KeyringTest, SealOpenRoundTripsAndTheBlobHidesThePlaintext) {
  EXPECT_EQ(ModeOf(keyring_path_), 0600u);  // written at open, empty
  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) {
    std::string plaintext = "MARKER-hf_token-" + std::string(size, 's');
    auto blob = keyring_->Seal("acme", plaintext, "secret:acme/hf-token");
    ASSERT_TRUE(blob.ok()) << blob.status();
    EXPECT_EQ(blob->size(), plaintext.size() + kSealOverhead);
    EXPECT_EQ(blob->find("MARKER"), std::string::npos);
    EXPECT_EQ(blob->substr(0, 3), "ggk");
    auto opened = keyring_->Open("acme", *blob, "secret:acme/hf-token");
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(*opened, plaintext);
  }
  // Two seals of one plaintext differ (fresh nonce each time).
  EXPECT_NE(keyring_->Seal("acme", "x", "a").value(), keyring_->Seal("acme", "x", "a").value());
  EXPECT_THAT(keyring_->tenants(), ElementsAre("acme"));
  EXPECT_THAT(keyring_->master_key_ids(), ElementsAre(provider_->active_key_id()));
}

TEST_F(KeyringTest, EveryAlteredByteOtherTenantOrAadIsAnError) {
  const std::string blob = keyring_->Seal("acme", "db-password=hunter2", "secret:acme/db").value();
  ASSERT_TRUE(keyring_->Seal("globex", "other", "secret:globex/db").ok());
  for (size_t i = 0; i < blob.size(); ++i) {
    for (int bit : {0x01, 0x80}) {
      std::string altered = blob;
      altered[i] = static_cast<char>(altered[i] ^ bit);
      auto opened = keyring_->Open("acme", altered, "secret:acme/db");
      ASSERT_FALSE(opened.ok()) << "byte " << i;
      EXPECT_THAT(opened.status().code(),
                  ::testing::AnyOf(absl::StatusCode::kDataLoss, absl::StatusCode::kInvalidArgument));
    }
  }
  EXPECT_EQ(keyring_->Open("acme", blob.substr(0, blob.size() - 1), "secret:acme/db").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(keyring_->Open("acme", blob + "x", "secret:acme/db").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(keyring_->Open("acme", blob.substr(0, 10), "secret:acme/db").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto other_tenant = keyring_->Open("globex", blob, "secret:acme/db");
  EXPECT_EQ(other_tenant.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(other_tenant.status().message(), HasSubstr("no data key"));
  EXPECT_EQ(keyring_->Open("acme", blob, "secret:acme/other").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(keyring_->Open("nobody", blob, "secret:acme/db").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(keyring_->Seal("bad/tenant", "x", "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KeyringTest, OneKeyringPerFile) {
  auto second = Keyring::Open(keyring_path_, *provider_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(keyring_path_ + ".lock is held by another process"));
  keyring_.reset();
  EXPECT_TRUE(Keyring::Open(keyring_path_, *provider_).ok());
}

// Active/standby servers on one data directory: a new leader opens the keyring while a deposed one (not
// yet exited) still has it open; each write reads the file again under its lock, so no key is lost or made
// twice.
TEST_F(KeyringTest, SharedKeyringsKeepEveryProcesssKeys) {
  keyring_.reset();
  auto a = Keyring::Open(keyring_path_, *provider_, KeyringSharing::kShared);
  auto b = Keyring::Open(keyring_path_, *provider_, KeyringSharing::kShared);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  auto acme = (*a)->Seal("acme", "from a", "aad");
  auto initech = (*b)->Seal("initech", "from b", "aad");  // b had not seen a's key: it reads it first
  auto acme_b = (*b)->Seal("acme", "from b", "aad");      // a's key for acme, not a second one
  ASSERT_TRUE(acme.ok() && initech.ok() && acme_b.ok());
  EXPECT_EQ((*b)->tenants(), (std::vector<std::string>{"acme", "initech"}));
  auto c = Keyring::Open(keyring_path_, *provider_, KeyringSharing::kShared);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->Open("acme", *acme, "aad").value(), "from a");
  EXPECT_EQ((*c)->Open("acme", *acme_b, "aad").value(), "from b");
  EXPECT_EQ((*c)->Open("initech", *initech, "aad").value(), "from b");
  // An exclusive keyring still refuses a second one (an offline tool while a server runs) ...
  auto exclusive = Keyring::Open(keyring_path_, *provider_);
  ASSERT_TRUE(exclusive.ok()) << exclusive.status();  // shared ones hold no lock between writes
  EXPECT_EQ(Keyring::Open(keyring_path_, *provider_).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(KeyringTest, ReopenedWithTheKeyFileEverythingOpens) {
  const std::string a = keyring_->Seal("acme", "alpha", "k").value();
  const std::string b = keyring_->Seal("globex", "beta", "k").value();
  keyring_.reset();
  auto reopened = Keyring::Open(keyring_path_, *provider_);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->Open("acme", a, "k").value(), "alpha");
  EXPECT_EQ((*reopened)->Open("globex", b, "k").value(), "beta");
  // The keyring file holds wrapped keys only: no plaintext and no master key.
  const std::string file = ReadRaw(keyring_path_);
  EXPECT_EQ(file.find("alpha"), std::string::npos);
  const std::string master_hex = ReadRaw(key_path_).substr(ReadRaw(key_path_).rfind(' ') + 1, 64);
  EXPECT_EQ(file.find(master_hex), std::string::npos);
}

TEST_F(KeyringTest, AnotherKeyFileIsAClearErrorAtOpen) {
  ASSERT_TRUE(keyring_->Seal("acme", "alpha", "k").ok());
  keyring_.reset();
  // Another key file with other ids: the master key is missing.
  const std::string other_path = dir_.Path("other.key");
  ASSERT_TRUE(CreateMasterKeyFile(other_path).ok());
  auto other = FileKeyProvider::Open(other_path).value();
  auto missing = Keyring::Open(keyring_path_, *other);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr(provider_->active_key_id()));
  EXPECT_THAT(missing.status().message(), HasSubstr(other_path));
  EXPECT_THAT(missing.status().message(), HasSubstr("acme"));
  // A key file holding a different key under the same id: the wrap does not authenticate.
  const std::string same_id_path = dir_.Path("same-id.key");
  WriteRaw(same_id_path, provider_->active_key_id() + " " + SecretKey::Generate().value().ToHex() + "\n");
  ASSERT_EQ(::chmod(same_id_path.c_str(), 0600), 0);
  auto wrong = FileKeyProvider::Open(same_id_path).value();
  auto status = Keyring::Open(keyring_path_, *wrong).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("master key " + provider_->active_key_id()));
  EXPECT_THAT(status.message(), HasSubstr("cannot unwrap tenant acme's data key"));
  EXPECT_THAT(status.message(), HasSubstr("wrong key file?"));
}

TEST_F(KeyringTest, AlteredKeyringFileIsAnErrorAtOpen) {
  ASSERT_TRUE(keyring_->Seal("acme", "alpha", "k").ok());
  keyring_.reset();
  std::string file = ReadRaw(keyring_path_);
  // Move acme's wrapped key to another tenant name: the wrap's additional data no longer matches.
  file.replace(file.find("\"acme\""), 6, "\"evil\"");
  WriteRaw(keyring_path_, file);
  auto status = Keyring::Open(keyring_path_, *provider_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("evil"));
  WriteRaw(keyring_path_, "{\"format\": \"gpugeek-keyring\", \"version\": 2, \"data_keys\": []}");
  status = Keyring::Open(keyring_path_, *provider_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(keyring_path_ + ": /version"));
}

TEST_F(KeyringTest, RotationRewrapsKeysAndLeavesBlobsUntouched) {
  std::vector<std::pair<std::string, std::string>> blobs;  // tenant, blob
  for (int i = 0; i < 20; ++i) {
    const std::string tenant = absl::StrCat("tenant-", i % 5);
    blobs.emplace_back(tenant, keyring_->Seal(tenant, absl::StrCat("secret ", i), absl::StrCat("s", i)).value());
  }
  const std::string old_key = provider_->active_key_id();
  auto rotation = RotateMasterKeyAndRewrap(*provider_, *keyring_, /*retire_unused=*/true);
  ASSERT_TRUE(rotation.ok()) << rotation.status();
  EXPECT_EQ(rotation->rewrapped, 5u);
  EXPECT_THAT(rotation->retired, ElementsAre(old_key));
  EXPECT_THAT(keyring_->master_key_ids(), ElementsAre(rotation->new_key_id));
  EXPECT_THAT(provider_->key_ids(), ElementsAre(rotation->new_key_id));
  EXPECT_EQ(ReadRaw(key_path_).find(old_key), std::string::npos);
  EXPECT_EQ(keyring_->Rewrap().value(), 0u);  // nothing left to move: nothing written

  keyring_.reset();
  auto provider = FileKeyProvider::Open(key_path_).value();
  auto reopened = Keyring::Open(keyring_path_, *provider).value();
  for (size_t i = 0; i < blobs.size(); ++i) {
    EXPECT_EQ(reopened->Open(blobs[i].first, blobs[i].second, absl::StrCat("s", i)).value(),
              absl::StrCat("secret ", i));
  }
}

TEST_F(KeyringTest, RetiringAKeyStillInUseIsWhatOpenCatches) {
  ASSERT_TRUE(keyring_->Seal("acme", "alpha", "k").ok());
  const std::string old_key = provider_->active_key_id();
  ASSERT_TRUE(RotateMasterKey(key_path_).ok());
  // Retired before the rewrap: the operator skipped a step. Open says which key is missing.
  ASSERT_TRUE(RetireMasterKey(key_path_, old_key).ok());
  keyring_.reset();
  auto provider = FileKeyProvider::Open(key_path_).value();
  auto status = Keyring::Open(keyring_path_, *provider).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("retired before a rewrap"));
  EXPECT_THAT(status.message(), HasSubstr(old_key));
}

TEST_F(KeyringTest, RotateDataKeyKeepsOldBlobsOpen) {
  const std::string old_blob = keyring_->Seal("acme", "old", "k").value();
  const uint32_t new_id = keyring_->RotateDataKey("acme").value();
  const std::string new_blob = keyring_->Seal("acme", "new", "k").value();
  EXPECT_EQ(ParseSealedBlob(new_blob).value().data_key_id, new_id);
  EXPECT_NE(ParseSealedBlob(old_blob).value().data_key_id, new_id);
  keyring_.reset();
  auto reopened = Keyring::Open(keyring_path_, *provider_).value();
  EXPECT_EQ(reopened->Open("acme", old_blob, "k").value(), "old");
  EXPECT_EQ(reopened->Open("acme", new_blob, "k").value(), "new");
  EXPECT_EQ(ParseSealedBlob(reopened->Seal("acme", "x", "k").value()).value().data_key_id, new_id);
}

TEST_F(KeyringTest, ConcurrentSealOpenAndNewTenants) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string tenant = absl::StrCat("t", (t + i) % 6);
        const std::string plaintext = absl::StrCat("payload ", t, "/", i);
        auto blob = keyring_->Seal(tenant, plaintext, "c");
        if (!blob.ok() || keyring_->Open(tenant, *blob, "c").value_or("") != plaintext) ++failures;
        if (i == 100 && t == 0 && !keyring_->Rewrap().ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(keyring_->tenants().size(), 6u);
  keyring_.reset();
  EXPECT_EQ(Keyring::Open(keyring_path_, *provider_).value()->tenants().size(), 6u);  // each persisted once
}

TEST(KeyringFile, ParsesWhatItFormatsAndNamesTheBadField) {
  std::vector<WrappedDataKey> keys = {{"acme", 1, "mk-1", std::string("\x01\x02", 2)},
                                      {"globex", 7, "mk-2", "wrapped"}};
  auto parsed = ParseKeyringFile(FormatKeyringFile(keys), "k.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[1].tenant, "globex");
  EXPECT_EQ((*parsed)[1].id, 7u);
  EXPECT_EQ((*parsed)[0].wrapped, keys[0].wrapped);
  const std::string head = R"({"format": "gpugeek-keyring", "version": 1, "data_keys": [)";
  struct Case {
    std::string text;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {"[]", "(top level)"},
           {"{\"format\": \"x\"}", "/format"},
           {head + "3]}", "/data_keys/0: is not an object"},
           {head + R"({"tenant": "a/b", "id": 1, "master_key": "m", "wrapped": "00"}]})", "/data_keys/0/tenant"},
           {head + R"({"tenant": "a", "id": 0, "master_key": "m", "wrapped": "00"}]})", "/data_keys/0/id"},
           {head + R"({"tenant": "a", "id": 4294967296, "master_key": "m", "wrapped": "00"}]})", "/data_keys/0/id"},
           {head + R"({"tenant": "a", "id": 1, "master_key": "m", "wrapped": "0g"}]})", "/data_keys/0/wrapped"},
           {head + R"({"tenant": "a", "id": 1, "master_key": "m", "wrapped": ""}]})", "/data_keys/0/wrapped"},
           {head + R"({"tenant": "a", "id": 1, "master_key": "m", "wrapped": "00"},)" +
                R"({"tenant": "b", "id": 1, "master_key": "m", "wrapped": "00"}]})",
            "/data_keys/1/id: data key id 1 appears twice"},
           {head + R"({"tenant": "a", "id": 1, "wrapped": "00"}]})", "/data_keys/0/master_key"},
       }) {
    auto bad = ParseKeyringFile(c.text, "k.json");
    ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(bad.status().message(), HasSubstr("k.json"));
    EXPECT_THAT(bad.status().message(), HasSubstr(c.want)) << c.text;
  }
}

}  // namespace
}  // namespace gpugeek::crypto
