// kill -9 during master-key rotation loses nothing: a child process loops over new tenants' secrets and
// full rotations (new master key, rewrap, retire the old ones) and is SIGKILLed at seeded random moments;
// after each kill the parent reopens the key file and keyring as a restarting server would and checks
// that every secret and log record sealed so far still opens.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rng.h"
#include "crypto/sealed_file.h"
#include "crypto/test_util.h"

namespace gpugeek::crypto {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string SecretOf(const std::string& tenant) { return "secret of " + tenant; }

// The child: never returns. Exits 1 only when a step fails without a kill (the parent then sees it).
[[noreturn]] void RotateForever(const std::string& key_path, const std::string& keyring_path,
                                const std::string& secrets, int round) {
  auto provider = FileKeyProvider::Open(key_path);
  if (!provider.ok()) _exit(1);
  auto keyring = Keyring::Open(keyring_path, **provider);
  if (!keyring.ok()) _exit(1);
  for (int i = 0;; ++i) {
    // A new tenant's data key is durable before SealFile writes its secret.
    const std::string tenant = absl::StrCat("new-", round, "-", i);
    if (!SealFile(**keyring, tenant, secrets + "/" + tenant, SecretOf(tenant), "secret:" + tenant).ok()) _exit(1);
    if (!RotateMasterKeyAndRewrap(**provider, **keyring, /*retire_unused=*/true).ok()) _exit(1);
  }
}

TEST(RotationCrash, KillDuringRotationLosesNothing) {
  TempDir dir;
  const std::string key_path = dir.Path("master.key");
  const std::string keyring_path = dir.Path("keyring.json");
  const std::string secrets = dir.Path("secrets");
  const std::string log_path = dir.Path("job.log");
  fs::create_directories(secrets);
  ASSERT_TRUE(CreateMasterKeyFile(key_path).ok());
  {
    auto provider = FileKeyProvider::Open(key_path).value();
    auto keyring = Keyring::Open(keyring_path, *provider).value();
    for (int i = 0; i < 10; ++i) {
      const std::string tenant = absl::StrCat("base-", i);
      ASSERT_TRUE(SealFile(*keyring, tenant, secrets + "/" + tenant, SecretOf(tenant), "secret:" + tenant).ok());
    }
    auto log = SealedLogWriter::Open(*keyring, "base-0", log_path, "log:job").value();
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(log->Append(absl::StrCat("line ", i)).ok());
    ASSERT_TRUE(log->Sync().ok());
  }

  Rng rng(20250314);
  std::set<std::string> active_keys_seen;
  std::set<std::string> tenants_seen;  // every secret file seen after some kill must open after every later one
  int killed_mid_rotation = 0;         // rounds after which the key file held more than one key
  const auto secret_files = [&] {      // written whole (renamed into place)
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(secrets)) {
      n += entry.path().filename().string().find(".tmp.") == std::string::npos;
    }
    return n;
  };
  for (int round = 0; round < 50; ++round) {
    const size_t before = secret_files();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) RotateForever(key_path, keyring_path, secrets, round);
    // Each round writes at least one secret before its kill, however slow the machine (at most 30 s), so the
    // rounds add up to many rotations; then a rotation takes a few fsyncs (milliseconds): the kills land
    // before, inside and between rotations.
    for (int i = 0; i < 30000 && secret_files() == before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng.Uniform(80000)));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the child failed on its own (exit "
                                     << WEXITSTATUS(status) << ")";

    // Restart: both files open, every data key unwraps, every secret and log record opens.
    auto provider = FileKeyProvider::Open(key_path);
    ASSERT_TRUE(provider.ok()) << "round " << round << ": " << provider.status();
    auto keyring = Keyring::Open(keyring_path, **provider);
    ASSERT_TRUE(keyring.ok()) << "round " << round << ": " << keyring.status();
    active_keys_seen.insert((*provider)->active_key_id());
    if ((*provider)->key_ids().size() > 1) ++killed_mid_rotation;
    std::set<std::string> present;
    for (const auto& entry : fs::directory_iterator(secrets)) {
      const std::string tenant = entry.path().filename().string();
      if (tenant.find(".tmp.") != std::string::npos) continue;  // a write the kill cut short: never renamed
      present.insert(tenant);
    }
    for (const std::string& tenant : tenants_seen) EXPECT_TRUE(present.count(tenant)) << tenant << " vanished";
    for (const std::string& tenant : present) {
      auto secret = OpenFile(**keyring, tenant, secrets + "/" + tenant, "secret:" + tenant);
      ASSERT_TRUE(secret.ok()) << "round " << round << ": " << secret.status();
      EXPECT_EQ(*secret, SecretOf(tenant));
    }
    tenants_seen = present;
    auto log = ReadSealedLog(**keyring, "base-0", log_path, "log:job", 0, uint64_t{1} << 20);
    ASSERT_TRUE(log.ok()) << "round " << round << ": " << log.status();
    ASSERT_EQ(log->records.size(), 50u);
    EXPECT_EQ(log->records[49].plaintext, "line 49");
  }
  // The kills landed in many rotations, some of them between adding a key and retiring the old one.
  EXPECT_GE(active_keys_seen.size(), 10u);
  EXPECT_GE(killed_mid_rotation, 1);
  EXPECT_GE(tenants_seen.size(), 10u + 25u);
  std::printf("rotation crash: %zu secrets, %zu distinct active master keys over 50 kills, %d kills mid-rotation\n",
              tenants_seen.size(), active_keys_seen.size(), killed_mid_rotation);
}

}  // namespace
}  // namespace gpugeek::crypto
