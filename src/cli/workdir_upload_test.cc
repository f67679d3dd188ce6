// `gpugeek submit`'s workdir upload against a real server on loopback: upload once, per-tenant archives,
// digest and entry checks, the size limit, and submissions naming a digest.
#include "cli/workdir_upload.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "archive/digest.h"
#include "archive/test_util.h"
#include "controlplane/server.h"
#include "http/status_http.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class WorkdirUploadTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  void Start(controlplane::ServerOptions options) {
    server_.reset();
    dir_ = archive::testing::TempDir("upload-test");
    options.port = 0;
    options.agent_port = 0;
    options.data_dir = dir_ + "/server";
    auto s = controlplane::ControlPlaneServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    admin_ = ClientFor(server_->admin_token());
    // Two tenants, a member each.
    for (const char* t : {"team-a", "team-b"}) {
      ASSERT_TRUE(admin_->Post("/v1/tenants", {{"name", t}}).ok());
      const std::string user = fmt::format("{}-member", t);
      ASSERT_TRUE(admin_->Post("/v1/users", {{"name", user}, {"tenant", t}, {"role", "member"}}).ok());
      auto token = admin_->Post("/v1/tokens", {{"user", user}});
      ASSERT_TRUE(token.ok()) << token.status();
      (std::string(t) == "team-a" ? a_ : b_) = ClientFor((*token)["token"]);
    }
  }

  std::unique_ptr<http::Client> ClientFor(const std::string& token) {
    return *http::Client::Create({.base_url = server_->url(), .bearer_token = token});
  }

  std::string dir_;
  std::unique_ptr<controlplane::ControlPlaneServer> server_;
  std::unique_ptr<http::Client> admin_, a_, b_;
};

TEST_F(WorkdirUploadTest, TenThousandFilesAreUploadedOnceAndThenNeverAgain) {
  const std::string work = dir_ + "/work";
  for (int d = 0; d < 100; ++d) {
    for (int f = 0; f < 100; ++f) {
      archive::testing::WriteFile(fmt::format("{}/pkg{:03}/m{:03}.py", work, d, f),
                                  fmt::format("X = {}\n", d * 100 + f));
    }
  }
  auto first = UploadWorkdir(*a_, work, {.temp_dir = dir_});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->files, 10'000u);
  EXPECT_EQ(first->put_requests, 1);
  EXPECT_EQ(first->bytes_sent, first->archive_bytes);
  EXPECT_EQ(server_->archives().put_calls(), 1u);
  EXPECT_TRUE(server_->archives().Has("team-a", first->digest));
  std::printf("[ measured ] 10,000 files, %llu bytes: packed to %llu bytes in %.1f ms, uploaded in %.1f ms (%d PUT)\n",
              static_cast<unsigned long long>(first->content_bytes),
              static_cast<unsigned long long>(first->archive_bytes), first->pack_ms, first->upload_ms,
              first->put_requests);

  auto second = UploadWorkdir(*a_, work, {.temp_dir = dir_});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->digest, first->digest);  // the same tree, the same bytes
  EXPECT_EQ(second->bytes_sent, 0u);
  EXPECT_EQ(second->put_requests, 0);
  EXPECT_EQ(server_->archives().put_calls(), 1u);  // the server saw one PUT in all
  std::printf("[ measured ] second submission: packed in %.1f ms, %llu bytes uploaded\n", second->pack_ms,
              static_cast<unsigned long long>(second->bytes_sent));
  // No plaintext at rest: the stored file is sealed, not the archive's bytes.
  const std::string stored = dir_ + "/server/archives/team-a/" + first->digest;
  ASSERT_TRUE(fs::exists(stored));
  EXPECT_NE(*archive::Sha256OfFile(stored), first->digest);
}

TEST_F(WorkdirUploadTest, AnotherTenantsDigestReadsAsAbsent) {
  const std::string work = dir_ + "/work";
  archive::testing::WriteFile(work + "/train.py", "print('a')\n");
  auto up = UploadWorkdir(*a_, work, {.temp_dir = dir_});
  ASSERT_TRUE(up.ok()) << up.status();
  const std::string path = "/v1/archives/" + up->digest;
  EXPECT_TRUE(a_->Head(path).ok());
  EXPECT_TRUE(a_->GetText(path).ok());
  EXPECT_EQ(*a_->GetText(path), [&] {
    std::string bytes;
    EXPECT_TRUE(server_->archives()
                    .Read("team-a", up->digest,
                          [&](std::string_view p) {
                            bytes.append(p);
                            return true;
                          })
                    .ok());
    return bytes;
  }());
  EXPECT_EQ(http::HttpStatusFor(b_->Head(path)), 404);
  EXPECT_EQ(http::HttpStatusFor(b_->GetText(path).status()), 404);
  // A job of team-b naming team-a's archive is refused at submission, naming the field.
  const std::string spec = fmt::format(
      "name: w\nresources: {{accelerators: A100-SXM-80GB:1}}\nworkdir_digest: {}\nrun: python train.py\n", up->digest);
  auto refused = b_->Post("/v1/jobs", {{"spec_yaml", spec}});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_EQ(refused.status().message().substr(0, 15), "workdir_digest:");
  EXPECT_TRUE(a_->Post("/v1/jobs", {{"spec_yaml", spec}}).ok());
  // A spec still naming a client-side folder is refused too.
  auto path_spec = a_->Post(
      "/v1/jobs", {{"spec_yaml", "name: w\nresources: {accelerators: A100-SXM-80GB:1}\nworkdir: .\nrun: x\n"}});
  EXPECT_EQ(path_spec.status().message().substr(0, 8), "workdir:");
  // Once team-b uploads the same tree itself, it has its own copy.
  auto own = UploadWorkdir(*b_, work, {.temp_dir = dir_});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->put_requests, 1);
  EXPECT_TRUE(b_->Post("/v1/jobs", {{"spec_yaml", spec}}).ok());
}

TEST_F(WorkdirUploadTest, WrongDigestOrUnsafeArchiveIsRefusedAndNothingKept) {
  const std::string tar = archive::testing::RawTar({{"a.py", AE_IFREG, "x"}});
  const std::string wrong(64, '0');
  auto r = a_->PutBytes(fmt::format("/v1/archives/{}?offset=0&total={}", wrong, tar.size()), tar,
                        "application/octet-stream");
  ASSERT_EQ(http::HttpStatusFor(r.status()), 400) << r.status();
  EXPECT_NE(r.status().message().find("nothing was kept"), std::string::npos);
  EXPECT_FALSE(server_->archives().Has("team-a", wrong));
  EXPECT_TRUE(fs::is_empty(dir_ + "/server/archives/team-a"));

  const std::string evil = archive::testing::RawTar({{"../../etc/cron.d/x", AE_IFREG, "x"}});
  r = a_->PutBytes(fmt::format("/v1/archives/{}?offset=0&total={}", archive::Sha256Hex(evil), evil.size()), evil,
                   "application/octet-stream");
  ASSERT_EQ(http::HttpStatusFor(r.status()), 400) << r.status();
  EXPECT_NE(r.status().message().find("has a '..' component"), std::string::npos) << r.status();
  EXPECT_FALSE(server_->archives().Has("team-a", archive::Sha256Hex(evil)));
  EXPECT_TRUE(fs::is_empty(dir_ + "/server/archives/team-a"));
}

TEST_F(WorkdirUploadTest, AnArchiveGoesUpInPiecesThatMayRestartButNotSkip) {
  const std::string work = dir_ + "/work";
  std::string noise;
  uint32_t x = 12345;
  for (int i = 0; i < 60'000; ++i) noise += static_cast<char>((x = x * 1103515245 + 12345) >> 24);  // incompressible
  archive::testing::WriteFile(work + "/weights.bin", noise);
  auto up = UploadWorkdir(*a_, work, {.piece_bytes = 16 << 10, .temp_dir = dir_});
  ASSERT_TRUE(up.ok()) << up.status();
  const int pieces = static_cast<int>((up->archive_bytes + (16 << 10) - 1) / (16 << 10));
  EXPECT_GE(pieces, 4);
  EXPECT_EQ(up->put_requests, pieces);
  EXPECT_EQ(server_->archives().put_calls(), static_cast<uint64_t>(pieces));
  std::string stored;
  ASSERT_TRUE(server_->archives()
                  .Read("team-a", up->digest,
                        [&](std::string_view p) {
                          stored.append(p);
                          return true;
                        })
                  .ok());
  EXPECT_EQ(archive::Sha256Hex(stored), up->digest);

  // team-b sends the same bytes by hand: a skipped piece is refused with where to continue; a restart at 0
  // drops what was sent.
  const std::string base = fmt::format("/v1/archives/{}?total={}&offset=", up->digest, stored.size());
  ASSERT_TRUE(b_->PutBytes(base + "0", stored.substr(0, 1000), "application/octet-stream").ok());
  auto skipped = b_->PutBytes(base + "2000", stored.substr(2000, 1000), "application/octet-stream");
  ASSERT_EQ(http::HttpStatusFor(skipped.status()), 409);
  EXPECT_NE(skipped.status().message().find("continue from offset 1000"), std::string::npos) << skipped.status();
  auto whole = b_->PutBytes(base + "0", stored, "application/octet-stream");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ((*whole)["complete"], true);
  EXPECT_TRUE(server_->archives().Has("team-b", up->digest));
}

TEST_F(WorkdirUploadTest, OverTheLimitIs413NamingIt) {
  Start({.max_archive_bytes = 1000, .max_archive_files = 3});
  const std::string work = dir_ + "/work";
  for (int i = 0; i < 5; ++i) archive::testing::WriteFile(fmt::format("{}/f{}", work, i), "x");
  // The client would stop before sending; a server with smaller limits answers 413 naming its own.
  auto up = UploadWorkdir(*a_, work, {.temp_dir = dir_});
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.status().code(), absl::StatusCode::kResourceExhausted) << up.status();
  EXPECT_NE(up.status().message().find("more than 3 entries (the limit) (this server's --max-archive-files)"),
            std::string::npos)
      << up.status();
  auto big = a_->PutBytes(fmt::format("/v1/archives/{}?offset=0&total=5000", std::string(64, 'a')), "x",
                          "application/octet-stream");
  EXPECT_NE(big.status().message().find("this server's limit is 1000 bytes (--max-archive-bytes)"), std::string::npos)
      << big.status();
  // On the wire: 413, with the limits in the error's details.
  httplib::Client raw(server_->url());
  auto res = raw.Put(fmt::format("/v1/archives/{}?offset=0&total=5000", std::string(64, 'a')),
                     {{"Authorization", "Bearer " + server_->admin_token()}}, "x", "application/octet-stream");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(json::parse(res->body)["details"]["limit_bytes"], 1000);
}

}  // namespace
}  // namespace gpugeek::cli
