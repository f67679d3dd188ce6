// The model registry over the API on loopback: team-a pushes a model; team-b and team-c learn nothing of
// it (the answers are those for a model that does not exist); team-a grants team-b `pull`; team-b pulls
// (logged, readable by team-a), then reads exactly that version's objects; a revoked grant ends it; the
// rights to deploy and fine-tune are checked apart from pull.
#include "controlplane/model_routes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "archive/test_util.h"
#include "common/clock.h"
#include "common/fake_clock.h"
#include "controlplane/server.h"
#include "controlplane/testing/version_upload.h"
#include "data/version_transfer.h"
#include "http/status_http.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using J = nlohmann::json;

class ModelRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = archive::testing::TempDir("model-routes");
    auto s = ControlPlaneServer::Start({.port = 0,
                                        .agent_port = 0,
                                        .data_dir = dir_ + "/server",
                                        .lease = std::chrono::minutes(5),
                                        .max_model_bytes = 1 << 20});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    admin_ = ClientFor(server_->admin_token());
    for (const char* t : {"team-a", "team-b", "team-c"}) ASSERT_TRUE(admin_->Post("/v1/tenants", {{"name", t}}).ok());
    for (const auto& [user, tenant, role] :
         {std::tuple{"member-a", "team-a", "member"}, std::tuple{"viewer-a", "team-a", "viewer"},
          std::tuple{"member-b", "team-b", "member"}, std::tuple{"member-c", "team-c", "member"}}) {
      ASSERT_TRUE(admin_->Post("/v1/users", {{"name", user}, {"tenant", tenant}, {"role", role}}).ok());
      auto token = admin_->Post("/v1/tokens", {{"user", user}});
      ASSERT_TRUE(token.ok()) << token.status();
      clients_[user] = ClientFor((*token)["token"]);
    }
    local_ = data::VersionStore::Open(dir_ + "/local", RealClock()).value();
  }
  std::unique_ptr<http::Client> ClientFor(const std::string& token) {
    return *http::Client::Create({.base_url = server_->url(), .bearer_token = token});
  }
  http::Client& As(const std::string& user) { return *clients_.at(user); }
  // Pushes folder `files` as model `name` of team-a (branch main): its commit digest.
  std::string Push(const std::string& name, const std::map<std::string, std::string>& files) {
    const std::string src = dir_ + "/src-" + name;
    for (const auto& [path, bytes] : files) {
      fs::create_directories(fs::path(src + "/" + path).parent_path());
      std::ofstream(src + "/" + path, std::ios::binary) << bytes;
    }
    absl::StatusOr<data::PushResult> r = local_->Snapshot(src, {.dataset = name, .message = "v1", .author = "ada"}, "");
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(testing::UploadVersion(As("member-a"), *local_, r->commit, "/v1/model-objects").ok());
    auto moved = As("member-a").Put("/v1/models/" + name + "/branches/main", {{"commit", r->commit}, {"expected", ""}});
    EXPECT_TRUE(moved.ok()) << moved.status();
    return r->commit;
  }
  // The status and message of a call.
  static std::pair<int, std::string> Answer(const absl::Status& s) {
    return {http::HttpStatusFor(s), std::string(s.message())};
  }

  std::string dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::unique_ptr<http::Client> admin_;
  std::map<std::string, std::unique_ptr<http::Client>> clients_;
  std::unique_ptr<data::VersionStore> local_;
};

TEST_F(ModelRoutesTest, ATenantWithoutRightsLearnsNothingAndAGrantLetsItPullOneVersionLogged) {
  const std::string tiny =
      Push("tiny", {{"config.json", "{\"hidden_size\": 8}\n"}, {"model.safetensors", std::string(5000, '\x01')}});
  const std::string secret = Push("secret", {{"weights.bin", std::string(3000, '\x02')}});
  auto versions = As("viewer-a").Get("/v1/models/tiny/versions/main");
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ((*versions)["commit"], tiny);
  EXPECT_EQ((*versions)["files"], 2);
  EXPECT_EQ((*versions)["bytes"], 19 + 5000);

  // team-b: the model that exists and one that does not get the same answers.
  for (const char* name : {"tiny", "ghost"}) {
    EXPECT_EQ(Answer(As("member-b").Post(fmt::format("/v1/models/{}/pulls", name), {{"owner", "team-a"}}).status()),
              std::pair(404, fmt::format("no model 'team-a/{}' shared with your tenant", name)));
    EXPECT_EQ(http::HttpStatusFor(As("member-b").Get(fmt::format("/v1/models/{}", name)).status()), 404);
  }
  EXPECT_EQ(As("member-b").Get("/v1/models").value()["models"], J::array());
  EXPECT_EQ(As("member-b").Get("/v1/shared-models").value()["models"], J::array());
  const std::string absent_object = std::string(64, 'e');
  for (const std::string& digest : {tiny, absent_object}) {
    EXPECT_EQ(
        Answer(
            As("member-b").GetText(fmt::format("/v1/model-objects/{}?owner=team-a&commit={}", digest, tiny)).status()),
        std::pair(404, "no object " + digest));
  }

  // Granting: a member of the owner only; a known tenant and known rights.
  const std::string grant = "/v1/models/tiny/grants/team-b";
  EXPECT_EQ(http::HttpStatusFor(As("viewer-a").Put(grant, {{"rights", {"pull"}}}).status()), 403);
  EXPECT_EQ(http::HttpStatusFor(As("member-b").Put(grant, {{"rights", {"pull"}}}).status()), 404);
  EXPECT_EQ(Answer(As("member-a").Put(grant, {{"rights", {"pull", "copy"}}}).status()),
            std::pair(400, std::string("rights: unknown right 'copy'; the rights are pull, deploy and finetune")));
  EXPECT_EQ(http::HttpStatusFor(As("member-a").Put("/v1/models/tiny/grants/team-z", {{"rights", {"pull"}}}).status()),
            404);
  ASSERT_TRUE(As("member-a").Put(grant, {{"rights", {"pull"}}}).ok());
  EXPECT_EQ(As("viewer-a").Get("/v1/models/tiny/grants").value()["grants"],
            J::parse(R"([{"tenant":"team-b","rights":["pull"]}])"));
  EXPECT_EQ(As("member-b").Get("/v1/shared-models").value()["models"],
            J::parse(R"([{"owner":"team-a","name":"tiny","rights":["pull"]}])"));

  // Before a logged pull no object leaves, even of the granted version.
  const std::string object_url = fmt::format("/v1/model-objects/{}?owner=team-a&commit={}", tiny, tiny);
  EXPECT_EQ(http::HttpStatusFor(As("member-b").GetText(object_url).status()), 404);
  auto pulled = As("member-b").Post("/v1/models/tiny/pulls", {{"owner", "team-a"}, {"rev", "main"}});
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ((*pulled)["commit"], tiny);
  EXPECT_EQ((*pulled)["seq"], 1);
  EXPECT_EQ((*pulled)["files"], 2);
  // Every object of the version, byte for byte; none of another model's, named with this commit.
  const std::vector<data::VersionObject> objects = data::ListVersionObjects(*local_, tiny).value();
  EXPECT_EQ(objects.size(), 4u);  // two chunks, the tree, the commit
  for (const data::VersionObject& o : objects) {
    auto bytes = As("member-b").GetText(fmt::format("/v1/model-objects/{}?owner=team-a&commit={}", o.digest, tiny));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, local_->objects().Get(o.digest).value());
  }
  EXPECT_EQ(
      http::HttpStatusFor(
          As("member-b").GetText(fmt::format("/v1/model-objects/{}?owner=team-a&commit={}", secret, tiny)).status()),
      404);
  EXPECT_EQ(
      http::HttpStatusFor(
          As("member-b").GetText(fmt::format("/v1/model-objects/{}?owner=team-a&commit={}", secret, secret)).status()),
      404);
  // team-c still learns nothing.
  EXPECT_EQ(http::HttpStatusFor(As("member-c").GetText(object_url).status()), 404);
  EXPECT_EQ(http::HttpStatusFor(As("member-c").Post("/v1/models/tiny/pulls", {{"owner", "team-a"}}).status()), 404);

  // The owner reads the pull log; team-b's own /v1/models/tiny is not team-a's.
  auto log = As("viewer-a").Get("/v1/models/tiny/pulls");
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ((*log)["pulls"].size(), 1u);
  EXPECT_EQ((*log)["pulls"][0]["user"], "member-b");
  EXPECT_EQ((*log)["pulls"][0]["tenant"], "team-b");
  EXPECT_EQ((*log)["pulls"][0]["commit"], tiny);
  EXPECT_EQ(http::HttpStatusFor(As("member-b").Get("/v1/models/tiny/pulls").status()), 404);

  // Rights apart: pull alone does not let team-b deploy or fine-tune; the owner may everything.
  DatasetStores& models = server_->models();
  ModelRegistry& registry = server_->model_registry();
  EXPECT_EQ(ResolveModelFor(models, registry, "team-b", "team-a", "tiny", "main", kModelPull).value(), tiny);
  EXPECT_EQ(Answer(ResolveModelFor(models, registry, "team-b", "team-a", "tiny", "main", kModelDeploy).status()),
            std::pair(403, std::string("tenant 'team-b' may pull model team-a/tiny but not deploy it; ask its owner "
                                       "to grant deploy")));
  EXPECT_EQ(http::HttpStatusFor(
                ResolveModelFor(models, registry, "team-c", "team-a", "tiny", "main", kModelFinetune).status()),
            404);
  EXPECT_EQ(ResolveModelFor(models, registry, "team-a", "", "tiny", "main", kModelFinetune).value(), tiny);
  // A commit of another model is not a version of this one.
  EXPECT_EQ(http::HttpStatusFor(ResolveModelFor(models, registry, "team-a", "", "tiny", secret, kModelPull).status()),
            404);
  // A job naming an engine format runs only on a version holding a file of it.
  absl::Status no_engine =
      AdmitWeights(models, registry, "team-a", "member-a", "", "tiny", "main", kModelDeploy, "onnx").status();
  EXPECT_TRUE(absl::IsFailedPrecondition(no_engine)) << no_engine;
  EXPECT_EQ(no_engine.message(),
            "engine onnx: the version holds no onnx file (none of its 2 files ends in .onnx); push the export "
            "(examples/gpt/export_engine.py writes model.torchscript.pt, model.onnx, model.int8.onnx) or leave "
            "engine: out");
  const std::string exported = Push("exported", {{"config.json", "{}\n"}, {"engines/model.int8.onnx", "onnx"}});
  EXPECT_EQ(
      AdmitWeights(models, registry, "team-a", "member-a", "", "exported", "main", kModelDeploy, "onnx-int8").value(),
      exported);
  EXPECT_EQ(AdmitWeights(models, registry, "team-a", "member-a", "", "exported", "main", kModelDeploy, "tensorrt")
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // A grantee naming another model's commit learns neither its name nor that it exists: the answer is the one
  // for a digest nothing has.
  for (const std::string& rev : {secret, absent_object, std::string("nosuchtag")}) {
    EXPECT_EQ(Answer(ResolveModelFor(models, registry, "team-b", "team-a", "tiny", rev, kModelPull).status()),
              std::pair(404, fmt::format("no version '{}' of model team-a/tiny", rev)));
  }

  // Revoked: no more pulls, and the ticket of the earlier one no longer reads.
  ASSERT_TRUE(As("member-a").Delete(grant).ok());
  EXPECT_EQ(http::HttpStatusFor(As("member-b").Post("/v1/models/tiny/pulls", {{"owner", "team-a"}}).status()), 404);
  EXPECT_EQ(http::HttpStatusFor(As("member-b").GetText(object_url).status()), 404);
  EXPECT_EQ(As("member-b").Get("/v1/shared-models").value()["models"], J::array());
}

TEST_F(ModelRoutesTest, ModelsHaveTheirOwnByteLimit) {
  fs::create_directories(dir_ + "/big");
  std::ofstream(dir_ + "/big/w.bin", std::ios::binary) << std::string(2 << 20, '\x03');
  absl::StatusOr<data::PushResult> r = local_->Snapshot(dir_ + "/big", {.dataset = "big"}, "");
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<int> sent = testing::UploadVersion(As("member-a"), *local_, r->commit, "/v1/model-objects");
  // 413 on the wire (the client reads it as ResourceExhausted).
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kResourceExhausted) << sent.status();
  EXPECT_NE(sent.status().message().find("(--max-model-bytes)"), std::string::npos) << sent.status();
  EXPECT_NE(sent.status().message().find("bytes of models"), std::string::npos) << sent.status();
}

TEST(ModelRegistryTest, GrantsAndThePullLogSurviveARestart) {
  const std::string dir = archive::testing::TempDir("model-registry");
  FakeClock clock;
  {
    auto registry = ModelRegistry::Open(dir, clock).value();
    ASSERT_TRUE(registry->SetGrant("team-a", "tiny", "team-b", kModelPull | kModelFinetune).ok());
    ASSERT_TRUE(registry->SetGrant("team-a", "tiny", "team-c", kModelDeploy).ok());
    EXPECT_EQ(registry->SetGrant("team-a", "tiny", "team-a", kModelPull).code(), absl::StatusCode::kInvalidArgument);
    for (const char* tenant : {"team-b", "team-c"}) {
      ASSERT_TRUE(
          registry->RecordPull("team-a", {.user = "u", .tenant = tenant, .model = "tiny", .commit = "c1"}).ok());
    }
    ASSERT_TRUE(
        registry->RecordPull("team-a", {.user = "v", .tenant = "team-a", .model = "other", .commit = "c2"}).ok());
    EXPECT_TRUE(registry->HasPullTicket("team-b", "team-a", "c1"));
    EXPECT_FALSE(registry->HasPullTicket("team-b", "team-a", "c2"));
    clock.Advance(ModelRegistry::kPullTicketTtl);
    EXPECT_FALSE(registry->HasPullTicket("team-b", "team-a", "c1"));
  }
  auto registry = ModelRegistry::Open(dir, clock).value();
  EXPECT_EQ(registry->RightsOf("team-a", "tiny", "team-b"), kModelPull | kModelFinetune);
  EXPECT_EQ(registry->RightsOf("team-a", "tiny", "team-c"), kModelDeploy);
  EXPECT_EQ(registry->RightsOf("team-a", "tiny", "team-a"), kAllModelRights);
  EXPECT_EQ(registry->RightsOf("team-a", "other", "team-b"), 0u);
  // The log keeps its order and numbering; a filter by model keeps the global seq; pages after a seq.
  auto all = registry->Pulls("team-a", "", 0, 10).value();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].seq, 3);
  EXPECT_EQ(all[2].model, "other");
  auto tiny = registry->Pulls("team-a", "tiny", 1, 10).value();
  ASSERT_EQ(tiny.size(), 1u);
  EXPECT_EQ(tiny[0].seq, 2);
  EXPECT_EQ(tiny[0].tenant, "team-c");
  auto next = registry->RecordPull("team-a", {.user = "w", .tenant = "team-b", .model = "tiny", .commit = "c1"});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->seq, 4);
  // Revoking the last right removes the grant, also on disk.
  ASSERT_TRUE(registry->SetGrant("team-a", "tiny", "team-c", 0).ok());
  EXPECT_EQ(ModelRegistry::Open(dir, clock).value()->GrantsTo("team-c").size(), 0u);
  EXPECT_EQ(ModelRightNames(kModelPull | kModelFinetune), (std::vector<std::string>{"pull", "finetune"}));
}

}  // namespace
}  // namespace gpugeek::controlplane
