// Dataset versions over the API on loopback: a member pushes a version object by object (children
// first) and moves a branch by compare-and-swap; another tenant sees nothing of it; a viewer cannot
// write; forged or incomplete objects change nothing; a job naming `dataset: corpus@main` is stored
// with the commit's digest, and only the node holding its member can read that version's objects.
#include "controlplane/dataset_routes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "api/job_spec.h"
#include "archive/digest.h"
#include "archive/test_util.h"
#include "common/clock.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "controlplane/testing/version_upload.h"
#include "data/version_transfer.h"
#include "http/status_http.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class DatasetRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = archive::testing::TempDir("dataset-routes");
    auto s = ControlPlaneServer::Start(
        {.port = 0, .agent_port = 0, .data_dir = dir_ + "/server", .lease = std::chrono::minutes(5)});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    admin_ = ClientFor(server_->admin_token());
    for (const char* t : {"team-a", "team-b"}) ASSERT_TRUE(admin_->Post("/v1/tenants", {{"name", t}}).ok());
    for (const auto& [user, tenant, role] :
         {std::tuple{"member-a", "team-a", "member"}, std::tuple{"viewer-a", "team-a", "viewer"},
          std::tuple{"member-b", "team-b", "member"}}) {
      ASSERT_TRUE(admin_->Post("/v1/users", {{"name", user}, {"tenant", tenant}, {"role", role}}).ok());
      auto token = admin_->Post("/v1/tokens", {{"user", user}});
      ASSERT_TRUE(token.ok()) << token.status();
      clients_[user] = ClientFor((*token)["token"]);
    }
    local_ = data::VersionStore::Open(dir_ + "/local", RealClock()).value();
    WriteFile(dir_ + "/src/train.txt", std::string(50'000, 'a') + "the end\n");
    WriteFile(dir_ + "/src/eval/eval.txt", "held out\n");
  }
  std::unique_ptr<http::Client> ClientFor(const std::string& token) {
    return *http::Client::Create({.base_url = server_->url(), .bearer_token = token});
  }
  http::Client& As(const std::string& user) { return *clients_.at(user); }
  // A local snapshot of src/ on `parent`: its commit digest.
  std::string Snapshot(const std::string& parent) {
    absl::StatusOr<data::PushResult> r =
        local_->Snapshot(dir_ + "/src", {.dataset = "corpus", .message = "v", .author = "ada"}, parent);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->commit : "";
  }
  absl::StatusOr<int> Upload(http::Client& c, const std::string& commit) {
    return testing::UploadVersion(c, *local_, commit);
  }

  std::string dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::unique_ptr<http::Client> admin_;
  std::map<std::string, std::unique_ptr<http::Client>> clients_;
  std::unique_ptr<data::VersionStore> local_;
};

TEST_F(DatasetRoutesTest, AMemberPushesAVersionThatOnlyItsTenantSees) {
  const std::string v1 = Snapshot("");
  // train.txt's chunks, the eval/ tree, the top tree and the commit.
  absl::StatusOr<std::vector<data::VersionObject>> listed = data::ListVersionObjects(*local_, v1);
  ASSERT_TRUE(listed.ok()) << listed.status();
  const size_t objects = listed->size();
  // A viewer may not write.
  EXPECT_EQ(http::HttpStatusFor(Upload(As("viewer-a"), v1).status()), 403);
  absl::StatusOr<int> sent = Upload(As("member-a"), v1);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(*sent, static_cast<int>(objects));
  // Sent again: nothing is missing.
  EXPECT_EQ(Upload(As("member-a"), v1).value(), 0);
  ASSERT_TRUE(As("member-a").Put("/v1/datasets/corpus/branches/main", {{"commit", v1}, {"expected", ""}}).ok());
  // A stale compare-and-swap: 409, the branch stays.
  auto stale = As("member-a").Put("/v1/datasets/corpus/branches/main", {{"commit", v1}, {"expected", ""}});
  EXPECT_EQ(http::HttpStatusFor(stale.status()), 409) << stale.status();
  auto version = As("viewer-a").Get("/v1/datasets/corpus/versions/main");
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ((*version)["commit"], v1);
  EXPECT_EQ((*version)["files"], 2);
  EXPECT_EQ((*version)["bytes"], 50'008 + 9);

  // A second version: one file changed; only its chunk, the top tree and the commit are sent.
  WriteFile(dir_ + "/src/eval/eval.txt", "held out, fixed\n");
  const std::string v2 = Snapshot(v1);
  EXPECT_EQ(Upload(As("member-a"), v2).value(), 1 + 2 + 1);
  ASSERT_TRUE(As("member-a").Put("/v1/datasets/corpus/branches/main", {{"commit", v2}, {"expected", v1}}).ok());
  ASSERT_TRUE(As("member-a").Put("/v1/datasets/corpus/tags/v1", {{"commit", v1}}).ok());
  auto log = As("viewer-a").Get("/v1/datasets/corpus/log?rev=main&limit=1");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)["commits"].size(), 1u);
  EXPECT_EQ((*log)["commits"][0]["commit"], v2);
  EXPECT_EQ((*log)["next_rev"], v1);
  auto diff = As("viewer-a").Get("/v1/datasets/corpus/diff?from=v1&to=main");
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_EQ(
      (*diff)["changes"],
      nlohmann::json::parse(R"([{"path":"eval/eval.txt","change":"modified","bytes_before":9,"bytes_after":16}])"));
  auto datasets = As("viewer-a").Get("/v1/datasets");
  ASSERT_TRUE(datasets.ok());
  EXPECT_EQ((*datasets)["datasets"][0]["name"], "corpus");
  EXPECT_EQ((*datasets)["datasets"][0]["branches"][0]["commit"], v2);
  EXPECT_EQ((*datasets)["datasets"][0]["tags"][0]["name"], "v1");

  // Tenant b: no dataset, no object, and its store lacks everything (no probing of a's chunks).
  EXPECT_EQ((*As("member-b").Get("/v1/datasets"))["datasets"].size(), 0u);
  EXPECT_EQ(http::HttpStatusFor(As("member-b").Get("/v1/datasets/corpus").status()), 404);
  EXPECT_EQ(http::HttpStatusFor(As("member-b").GetText("/v1/dataset-objects/" + v1).status()), 404);
  auto missing = As("member-b").Post("/v1/dataset-objects/missing", {{"digests", {v1}}});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ((*missing)["missing"], nlohmann::json::array({v1}));
  EXPECT_EQ(http::HttpStatusFor(
                As("member-b").Put("/v1/datasets/corpus/branches/main", {{"commit", v1}, {"expected", ""}}).status()),
            404);
  auto bytes = As("viewer-a").GetText("/v1/dataset-objects/" + v1);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, local_->objects().Get(v1).value());
}

TEST_F(DatasetRoutesTest, ForgedOrIncompleteObjectsChangeNothing) {
  const std::string v1 = Snapshot("");
  const std::string commit_bytes = local_->objects().Get(v1).value();
  http::Client& a = As("member-a");
  // Bytes that do not hash to the digest: 400.
  auto forged =
      a.PutBytes("/v1/dataset-objects/" + v1 + "?kind=commit", commit_bytes + " ", "application/octet-stream");
  EXPECT_EQ(http::HttpStatusFor(forged.status()), 400) << forged.status();
  // The commit before its tree: 409 naming what is missing.
  auto early = a.PutBytes("/v1/dataset-objects/" + v1 + "?kind=commit", commit_bytes, "application/octet-stream");
  EXPECT_EQ(http::HttpStatusFor(early.status()), 409) << early.status();
  EXPECT_NE(std::string(early.status().message()).find("the commit's tree"), std::string::npos);
  // No kind, a bad kind, a bad digest.
  EXPECT_EQ(http::HttpStatusFor(a.PutBytes("/v1/dataset-objects/" + v1, commit_bytes, "x").status()), 400);
  EXPECT_EQ(http::HttpStatusFor(a.PutBytes("/v1/dataset-objects/" + v1 + "?kind=blob", commit_bytes, "x").status()),
            400);
  EXPECT_EQ(http::HttpStatusFor(a.PutBytes("/v1/dataset-objects/not-a-digest?kind=chunk", "x", "x").status()), 400);
  // A path out of the store is no route at all.
  EXPECT_EQ(http::HttpStatusFor(a.PutBytes("/v1/dataset-objects/..%2f..%2fx?kind=chunk", "x", "x").status()), 404);
  // A branch naming a commit the store lacks: 404.
  EXPECT_EQ(
      http::HttpStatusFor(a.Put("/v1/datasets/corpus/branches/main", {{"commit", v1}, {"expected", ""}}).status()),
      404);
  // Too many digests in one question: 400.
  nlohmann::json many = nlohmann::json::array();
  for (size_t i = 0; i <= kMaxMissingQuery; ++i) many.push_back(v1);
  EXPECT_EQ(http::HttpStatusFor(a.Post("/v1/dataset-objects/missing", {{"digests", many}}).status()), 400);
  EXPECT_EQ((*a.Get("/v1/datasets"))["datasets"].size(), 0u);
  EXPECT_EQ(server_->datasets().TenantBytes("team-a").value(), 0u);

  auto put = [&](data::ObjectKind kind, const std::string& bytes) {
    const std::string digest = archive::Sha256Hex(bytes);
    auto r = a.PutBytes(fmt::format("/v1/dataset-objects/{}?kind={}", digest, data::ObjectKindName(kind)), bytes,
                        "application/octet-stream");
    return r.ok() ? absl::StatusOr<std::string>(digest) : absl::StatusOr<std::string>(r.status());
  };
  // The kind is the sender's word: a tree (whose file's chunk was never sent) and a commit sent as
  // "chunks" are stored, but never taken for a tree or a commit: a parent tree naming that tree is refused
  // (409), and no branch, tag or job can name that commit.
  const std::string top = local_->ReadCommit(v1)->tree;
  absl::StatusOr<data::Tree> top_tree = local_->ReadTree(top);
  ASSERT_TRUE(top_tree.ok());
  std::string eval_tree;
  for (const data::TreeEntry& e : top_tree->entries) {
    if (e.is_dir) eval_tree = e.tree;
  }
  ASSERT_TRUE(put(data::ObjectKind::kChunk, local_->objects().Get(eval_tree).value()).ok());
  data::Tree parent;
  parent.entries.push_back({.name = "eval", .is_dir = true, .bytes = 9, .tree = eval_tree, .files = 1});
  absl::StatusOr<std::string> smuggled = put(data::ObjectKind::kTree, data::EncodeTree(parent));
  EXPECT_EQ(http::HttpStatusFor(smuggled.status()), 409) << smuggled.status();
  EXPECT_NE(std::string(smuggled.status().message()).find("is not in the store as a tree"), std::string::npos)
      << smuggled.status();
  ASSERT_TRUE(put(data::ObjectKind::kChunk, commit_bytes).ok());
  EXPECT_EQ(
      http::HttpStatusFor(a.Put("/v1/datasets/corpus/branches/main", {{"commit", v1}, {"expected", ""}}).status()),
      404);
  // Asked with kinds, the server reports the commit missing (as a commit) though it holds its bytes.
  auto as_commit = a.Post("/v1/dataset-objects/missing", {{"digests", {v1}}, {"kinds", {"commit"}}});
  ASSERT_TRUE(as_commit.ok()) << as_commit.status();
  EXPECT_EQ((*as_commit)["missing"], nlohmann::json::array({v1}));

  // A tree bomb: 41 small objects describing 2^40 files (each folder names the one below twice). Every
  // object is honest and accepted, but the commit is refused: no diff, checkout or node walks it.
  const std::string chunk = put(data::ObjectKind::kChunk, "x").value();
  data::Tree tree;
  tree.entries.push_back({.name = "f", .bytes = 1, .chunks = {{chunk, 1}}});
  std::string digest = put(data::ObjectKind::kTree, data::EncodeTree(tree)).value();
  uint64_t files = 1;
  for (int level = 0; level < 40; ++level) {
    tree.entries = {{.name = "a", .is_dir = true, .bytes = files, .tree = digest, .files = files},
                    {.name = "b", .is_dir = true, .bytes = files, .tree = digest, .files = files}};
    files *= 2;
    digest = put(data::ObjectKind::kTree, data::EncodeTree(tree)).value();
  }
  const data::Commit bomb{.tree = digest, .dataset = "bomb", .files = files, .bytes = files};
  absl::StatusOr<std::string> refused = put(data::ObjectKind::kCommit, data::EncodeCommit(bomb));
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 400) << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("a version of 1099511627776 files"), std::string::npos)
      << refused.status();
}

TEST_F(DatasetRoutesTest, AJobPinsTheVersionAndOnlyItsNodeReadsIt) {
  const std::string v1 = Snapshot("");
  ASSERT_TRUE(Upload(As("member-a"), v1).ok());
  ASSERT_TRUE(As("member-a").Put("/v1/datasets/corpus/branches/main", {{"commit", v1}, {"expected", ""}}).ok());
  testing::AgentCaller agents(*server_);
  for (const std::string node : {"node-a", "node-b"}) {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("1xH100-SXM-80GB"), node,
                                             {node, 32, uint64_t{256} << 30, 1, ""});
    ASSERT_TRUE(agents.Post("/v1/agents/register", api::ToJson(r)).ok());
  }
  const std::string head = "name: w\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n";
  // An unknown dataset or revision is refused at submission, naming the field.
  auto refused = As("member-a").Post("/v1/jobs", {{"spec_yaml", head + "dataset: corpus@nope\n"}});
  EXPECT_EQ(http::HttpStatusFor(refused.status()), 400);
  EXPECT_EQ(std::string(refused.status().message()).substr(0, 22), "dataset: corpus@nope: ");
  // Tenant b has no dataset corpus.
  EXPECT_EQ(http::HttpStatusFor(As("member-b").Post("/v1/jobs", {{"spec_yaml", head + "dataset: corpus\n"}}).status()),
            400);
  auto job = As("member-a").Post("/v1/jobs", {{"spec_yaml", head + "dataset: corpus\n"}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  // The stored spec names the commit, not the branch: every placement reads v1 even after main moves.
  auto stored = api::ParseJobSpec((*job)["spec_yaml"].get<std::string>());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->dataset, "corpus");
  EXPECT_EQ(stored->dataset_rev, v1);

  std::string holder;
  for (int i = 0; i < 100 && holder.empty(); ++i) {
    for (const std::string node : {"node-a", "node-b"}) {
      auto reply = agents.Post(fmt::format("/v1/agents/{}/heartbeat", node), {{"node", node}});
      ASSERT_TRUE(reply.ok()) << reply.status();
      for (const auto& a : (*reply)["assignments"]) {
        if (a["job_id"] == id) {
          EXPECT_EQ(a["dataset"], "corpus");
          EXPECT_EQ(a["dataset_commit"], v1);
          holder = node;
        }
      }
    }
    if (holder.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(holder.empty());
  const std::string other = holder == "node-a" ? "node-b" : "node-a";
  const auto node_client = [&](const std::string& node) {
    return *http::Client::Create({.base_url = server_->agent_url(), .bearer_token = agents.credential(node)});
  };
  // Every object of the version, to the holder.
  absl::StatusOr<std::vector<data::VersionObject>> listed = data::ListVersionObjects(*local_, v1);
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const data::VersionObject& o : *listed) {
    auto bytes =
        node_client(holder)->GetText(fmt::format("/v1/agents/{}/datasets/{}/objects/{}", holder, v1, o.digest));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, local_->objects().Get(o.digest).value());
  }
  // The other node: as absent. An object of another version of the tenant: as absent.
  auto refused_node = node_client(other)->GetText(fmt::format("/v1/agents/{}/datasets/{}/objects/{}", other, v1, v1));
  EXPECT_EQ(http::HttpStatusFor(refused_node.status()), 404) << refused_node.status();
  WriteFile(dir_ + "/src/secret.txt", "not in v1\n");
  const std::string v2 = Snapshot(v1);
  ASSERT_TRUE(Upload(As("member-a"), v2).ok());
  const std::string secret_chunk = archive::Sha256Hex("not in v1\n");  // a small file is one chunk
  ASSERT_TRUE(server_->datasets().For("team-a").value()->objects().Has(secret_chunk));
  for (const std::string& digest : {secret_chunk, v2}) {
    auto outside =
        node_client(holder)->GetText(fmt::format("/v1/agents/{}/datasets/{}/objects/{}", holder, v1, digest));
    EXPECT_EQ(http::HttpStatusFor(outside.status()), 404) << outside.status();
  }
}

}  // namespace
}  // namespace gpugeek::controlplane
