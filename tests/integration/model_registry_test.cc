// The model registry end to end, with real processes: `gpugeek server`, one `gpugeek agent`, and the CLI
// as two tenants. team-a signs a model and pushes it; team-b can neither pull it nor run a job on it, and
// gets the answer for a model that does not exist. Granted `pull`, team-b pulls a byte-identical copy whose
// signature verifies, but a job naming it (`weights: team-a/tiny@v1`, a deployment) is refused for want of
// `deploy`. Granted `deploy`, the job runs with the model in $GPUGEEK_MODEL_DIR, and with
// `weights_signer:` only where the node verified every file against the signature; team-a's pull log
// shows every pull by team-b.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "archive/digest.h"
#include "common/testing/process.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using subprocess::Process;
using subprocess::ReadFile;
using subprocess::WriteFile;

class ModelRegistryEndToEnd : public testing::PoolFixture {
 protected:
  void SetUp() override {
    const std::string agent_url = StartPool("model_registry_e2e", 1);
    ASSERT_FALSE(agent_url.empty());
    StartAgent(agent_url, "node-mr-" + std::to_string(::getpid()));
    for (const char* t : {"team-a", "team-b"}) ASSERT_TRUE(Client().Post("/v1/tenants", {{"name", t}}).ok());
    for (const auto& [user, tenant] : {std::pair{"ada", "team-a"}, std::pair{"bob", "team-b"}}) {
      ASSERT_TRUE(Client().Post("/v1/users", {{"name", user}, {"tenant", tenant}, {"role", "member"}}).ok());
      auto token = Client().Post("/v1/tokens", {{"user", user}});
      ASSERT_TRUE(token.ok()) << token.status();
      tokens_[user] = (*token)["token"];
    }
  }
  // `gpugeek ARGS --token <user's>` (each user with a model cache of its own).
  std::pair<int, std::string> As(const std::string& user, std::vector<std::string> args) {
    args.push_back("--token");
    args.push_back(tokens_.at(user));
    if (args[0] == "model" && (args[1] == "push" || args[1] == "pull")) {
      args.push_back("--cache");
      args.push_back((dir_ / ("cache-" + user)).string());
    }
    return Cli(args);
  }
  // A command that calls no server.
  std::pair<int, std::string> Local(const std::vector<std::string>& args) {
    return subprocess::RunCli(args, dir_ / "cli.log");
  }
  // Submits as `user`; the CLI's exit code and output.
  std::pair<int, std::string> SubmitAs(const std::string& user, const std::string& name, const std::string& spec) {
    WriteFile(dir_ / (name + ".yaml"), spec);
    return As(user, {"submit", (dir_ / (name + ".yaml")).string()});
  }

  std::map<std::string, std::string> tokens_;
};

TEST_F(ModelRegistryEndToEnd, OnlyGrantedTenantsPullOrDeployAndEveryPullIsLogged) {
  // A signed model folder.
  std::mt19937_64 rng(7);
  std::string weights(300'000, '\0');
  for (char& c : weights) c = static_cast<char>(rng());
  const fs::path model = dir_ / "tiny";
  WriteFile(model / "config.json", "{\"model_type\": \"gpt2\", \"n_embd\": 64}\n");
  WriteFile(model / "model.safetensors", weights);
  const std::string key = (dir_ / "signer.pem").string();
  ASSERT_EQ(Local({"model", "keygen", "--out", key}).first, 0);
  auto [code, out] = Local({"model", "sign", model.string(), "--key", key});
  ASSERT_EQ(code, 0) << out;

  std::tie(code, out) = As("ada", {"model", "push", model.string(), "--name", "tiny", "--tag", "v1", "-m", "first"});
  ASSERT_EQ(code, 0) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("tiny@main -> ([0-9a-f]{12}): 3 files"))) << out;
  const std::string commit_short = m[1];

  // team-b learns nothing: not in its list, and a pull or a job gets the answer for an absent model.
  std::tie(code, out) = As("bob", {"model", "ls"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_FALSE(absl::StrContains(out, "tiny")) << out;
  for (const char* name : {"tiny", "ghost"}) {
    std::tie(code, out) =
        As("bob", {"model", "pull", fmt::format("team-a/{}", name), "--out", (dir_ / "never").string()});
    EXPECT_EQ(code, 1) << out;
    EXPECT_TRUE(absl::StrContains(out, fmt::format("no model 'team-a/{}' shared with your tenant", name))) << out;
  }
  const std::string job_spec =
      "name: serve-tiny\nresources: {accelerators: H100-SXM-80GB:1}\nweights: team-a/tiny@v1\n"
      "run: cd \"$GPUGEEK_MODEL_DIR\" && sha256sum model.safetensors && echo \"model=$GPUGEEK_MODEL\"\n";
  std::tie(code, out) = SubmitAs("bob", "denied", job_spec);
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "weights: team-a/tiny@v1: no model 'team-a/tiny' shared with your tenant")) << out;

  // Granted pull: a byte-identical copy whose signature verifies; a deployment still needs `deploy`.
  std::tie(code, out) = As("ada", {"model", "share", "tiny", "--tenant", "team-b", "--rights", "pull"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "tiny: tenant team-b may pull")) << out;
  const fs::path copy = dir_ / "copy";
  std::tie(code, out) = As("bob", {"model", "pull", "team-a/tiny@v1", "--out", copy.string()});
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, fmt::format("team-a/tiny@v1 ({})", commit_short))) << out;
  EXPECT_EQ(ReadFile(copy / "model.safetensors"), weights);
  std::tie(code, out) = Local({"model", "verify", copy.string(), "--key", (dir_ / "signer.pub.pem").string()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "verified")) << out;
  std::tie(code, out) = SubmitAs("bob", "pull-only", job_spec);
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "tenant 'team-b' may pull model team-a/tiny but not deploy it")) << out;

  // Granted deploy: the job runs on the model's bytes.
  std::tie(code, out) = As("ada", {"model", "share", "tiny", "--tenant", "team-b", "--rights", "pull,deploy"});
  ASSERT_EQ(code, 0) << out;
  std::tie(code, out) = SubmitAs("bob", "deployed", job_spec);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("submitted (\\S+) "))) << out;
  const std::string id = m[1];
  const nlohmann::json job = WaitEnded(id);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << "\n" << agents_[0]->output();
  const std::string log = Log(id);
  EXPECT_TRUE(absl::StrContains(log, archive::Sha256Hex(weights) + "  model.safetensors\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "model=team-a/tiny@" + commit_short)) << log;

  // A deployment that names the signer's key runs only on a checkout whose every file verifies: with the
  // signer's key it runs; with another key, or on a version changed after signing, the node refuses to
  // start it and names why.
  const std::string signed_spec = job_spec + "weights_signer: signer.pub.pem\n";
  std::tie(code, out) = SubmitAs("bob", "signed", signed_spec);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("submitted (\\S+) "))) << out;
  EXPECT_EQ(WaitEnded(m[1]).value("state", ""), "SUCCEEDED") << agents_[0]->output();
  ASSERT_EQ(Local({"model", "keygen", "--out", (dir_ / "other.pem").string()}).first, 0);
  std::tie(code, out) = SubmitAs("bob", "other-key", job_spec + "weights_signer: other.pub.pem\n");
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("submitted (\\S+) "))) << out;
  nlohmann::json failed = WaitEnded(m[1]);
  EXPECT_EQ(failed.value("state", ""), "FAILED");
  EXPECT_TRUE(absl::StrContains(failed.dump(), "signature NOT verified")) << failed.dump();
  WriteFile(model / "model.safetensors", weights + "!");  // changed after signing, pushed as main
  std::tie(code, out) = As("ada", {"model", "push", model.string(), "--name", "tiny", "-m", "tampered"});
  ASSERT_EQ(code, 0) << out;
  std::string tampered = signed_spec;
  tampered.replace(tampered.find("tiny@v1"), 7, "tiny@main");
  std::tie(code, out) = SubmitAs("bob", "tampered", tampered);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("submitted (\\S+) "))) << out;
  failed = WaitEnded(m[1]);
  EXPECT_EQ(failed.value("state", ""), "FAILED");
  EXPECT_TRUE(
      absl::StrContains(failed.dump(), "changed: model.safetensors: sha256 is " + archive::Sha256Hex(weights + "!")))
      << failed.dump();

  // team-a's pull log: the CLI pull and each admitted job, all by bob of team-b.
  std::tie(code, out) = As("ada", {"model", "pulls", "tiny", "--json"});
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json pulls = nlohmann::json::parse(out)["pulls"];
  ASSERT_EQ(pulls.size(), 5u) << out;
  for (const nlohmann::json& p : pulls) {
    EXPECT_EQ(p["user"], "bob");
    EXPECT_EQ(p["tenant"], "team-b");
  }
  EXPECT_EQ(pulls[0]["commit"].get<std::string>().substr(0, 12), commit_short);
  std::tie(code, out) = As("bob", {"model", "ls"});
  EXPECT_TRUE(absl::StrContains(out, "team-a")) << out;
  EXPECT_TRUE(absl::StrContains(out, "pull,deploy")) << out;
}

}  // namespace
}  // namespace gpugeek
