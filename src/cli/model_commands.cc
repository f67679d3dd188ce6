// Signed manifests of a model's files (models/signing.h; OpenSSF model-signing v1.0 shape):
//   gpugeek model keygen --out KEY.pem [--algorithm ed25519|ecdsa-p256]   KEY.pem (mode 0600) + KEY.pub.pem
//   gpugeek model sign DIR --key KEY.pem [--out DIR/model.sig] [--ignore PATH]... [--json]
//   gpugeek model verify DIR --key KEY.pub.pem [--signature DIR/model.sig] [--json]
// verify prints "verified: N files, M bytes", or one line per problem and exits 1. Exit 2: a bad flag or an
// unreadable key or folder.

#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "models/signing.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string PublicKeyPath(const std::string& private_path) {
  const std::string suffix = ".pem";
  if (private_path.size() > suffix.size() && private_path.ends_with(suffix)) {
    return private_path.substr(0, private_path.size() - suffix.size()) + ".pub.pem";
  }
  return private_path + ".pub.pem";
}

void RegisterKeygen(CLI::App* model) {
  struct Options {
    std::string out;
    std::string algorithm = "ed25519";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = model->add_subcommand("keygen", "Create a signing key: KEY.pem (private, mode 0600) and KEY.pub.pem");
  sub->add_option("--out", o->out, "The private key file to create, e.g. signing.pem; never overwritten")->required();
  sub->add_option("--algorithm", o->algorithm, "ed25519 (default) or ecdsa-p256");
  sub->callback([o] {
    const std::string cmd = "model keygen";
    absl::StatusOr<models::KeyAlgorithm> algorithm = models::ParseKeyAlgorithm(o->algorithm);
    if (!algorithm.ok()) Fail(cmd, fmt::format("--algorithm: {}", algorithm.status().message()), kExitUsage);
    const std::string pub = PublicKeyPath(o->out);
    for (const std::string& path : {o->out, pub}) {
      if (fs::exists(path))
        Fail(cmd, fmt::format("--out: {} exists; pick another name or delete it", path), kExitUsage);
    }
    absl::StatusOr<models::SigningKey> key = models::SigningKey::Generate(*algorithm);
    if (!key.ok()) Fail(cmd, std::string(key.status().message()));
    if (absl::Status s = WriteFilePrivate(o->out, key->PrivatePem()); !s.ok()) {
      Fail(cmd, fmt::format("--out: {}", s.message()), kExitUsage);
    }
    if (absl::Status s = models::WriteSignatureFile(pub, key->PublicPem()); !s.ok()) {
      Fail(cmd, fmt::format("--out: {}", s.message()), kExitUsage);
    }
    std::cout << fmt::format(
        "Created {} key {}: private {} (mode 0600; keep it secret), public {} (give it to verifiers)\n",
        models::KeyAlgorithmName(*algorithm), key->KeyId().substr(0, 16), o->out, pub);
  });
}

// An --ignore given from the current folder (DIR/sub, or absolute, as shell completion writes it) becomes
// relative to the model folder; anything else is taken as relative to it already.
std::vector<std::string> RelativeIgnores(const std::string& dir, const std::vector<std::string>& ignores) {
  std::vector<std::string> out;
  std::string prefix = fs::path(dir).lexically_normal().generic_string();
  if (!prefix.ends_with('/')) prefix += '/';
  for (const std::string& p : ignores) {
    if (p.starts_with(prefix) && prefix != "./") {
      out.push_back(p.substr(prefix.size()));
    } else if (fs::path(p).is_absolute()) {
      std::error_code ec;
      const fs::path rel = fs::weakly_canonical(p, ec).lexically_relative(fs::weakly_canonical(dir, ec));
      out.push_back(ec ? p : rel.generic_string());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

void RegisterSign(CLI::App* model) {
  struct Options {
    std::string dir;
    std::string key;
    std::string out;
    std::vector<std::string> ignore;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = model->add_subcommand(
      "sign", "Sign every file of a model folder: per-file SHA-256 in an in-toto statement, signed with your key");
  sub->add_option("dir", o->dir, "The model folder")->required();
  sub->add_option("--key", o->key, "Private key file (gpugeek model keygen)")->required();
  sub->add_option("--out", o->out, "Signature file to write (default DIR/model.sig)");
  sub->add_option(
      "--ignore", o->ignore,
      "A path in the folder to leave out (repeatable); .git, .gitattributes, .github, .gitignore always are");
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] {
    const std::string cmd = "model sign";
    absl::StatusOr<models::SigningKey> key = models::SigningKey::Load(o->key);
    if (!key.ok()) Fail(cmd, fmt::format("--key: {}", key.status().message()), kExitUsage);
    const std::string out = o->out.empty() ? (fs::path(o->dir) / models::kSignatureFileName).string() : o->out;
    absl::StatusOr<models::Manifest> m =
        models::BuildManifest(o->dir, {.ignore_paths = RelativeIgnores(o->dir, o->ignore), .signature_path = out});
    if (!m.ok()) Fail(cmd, std::string(m.status().message()));
    absl::StatusOr<std::string> text = models::SignManifest(*m, *key);
    if (!text.ok()) Fail(cmd, std::string(text.status().message()));
    if (absl::Status s = models::WriteSignatureFile(out, *text); !s.ok()) {
      Fail(cmd, fmt::format("--out: {}", s.message()), kExitUsage);
    }
    uint64_t bytes = 0;
    for (const models::ManifestEntry& e : m->files) bytes += e.size;
    const std::string subject = models::SubjectDigest(m->files);
    if (o->json) {
      return PrintJson({{"signature", out},
                        {"model", m->model_name},
                        {"files", m->files.size()},
                        {"bytes", bytes},
                        {"subject_sha256", subject},
                        {"key_id", key->KeyId()},
                        {"algorithm", models::KeyAlgorithmName(key->algorithm())},
                        {"ignore_paths", m->ignore_paths}});
    }
    std::cout << fmt::format("signed: {} files, {} bytes of {} into {} with {} key {} (ignored: {})\n", m->files.size(),
                             bytes, o->dir, out, models::KeyAlgorithmName(key->algorithm()), key->KeyId().substr(0, 16),
                             fmt::join(m->ignore_paths, ", "));
  });
}

json ResultJson(const models::VerifyResult& r) {
  json problems = json::array();
  for (const models::Problem& p : r.problems) {
    problems.push_back({{"kind", models::ProblemKindName(p.kind)}, {"path", p.path}, {"message", p.message}});
  }
  return {{"verified", r.status.ok()}, {"model", r.model_name}, {"files", r.files},
          {"bytes", r.bytes},          {"key_id", r.key_id},    {"problems", problems}};
}

void RegisterVerify(CLI::App* model) {
  struct Options {
    std::string dir;
    std::string key;
    std::string signature;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = model->add_subcommand(
      "verify", "Verify a model folder against its signature: every missing, extra or changed file is named");
  sub->add_option("dir", o->dir, "The model folder")->required();
  sub->add_option("--key", o->key, "Public key file of the signer (KEY.pub.pem)")->required();
  sub->add_option("--signature", o->signature, "Signature file (default DIR/model.sig)");
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] {
    const std::string cmd = "model verify";
    absl::StatusOr<models::VerifyingKey> key = models::VerifyingKey::Load(o->key);
    if (!key.ok()) Fail(cmd, fmt::format("--key: {}", key.status().message()), kExitUsage);
    const models::VerifyResult r = models::VerifyModel(o->dir, *key, o->signature);
    if (o->json) {
      PrintJson(ResultJson(r));
      if (!r.status.ok()) throw CLI::RuntimeError(kExitFailed);
      return;
    }
    if (r.status.ok()) {
      std::cout << fmt::format("verified: {} files, {} bytes of {} (key {})\n", r.files, r.bytes, r.model_name,
                               r.key_id.substr(0, 16));
      return;
    }
    for (const models::Problem& p : r.problems) std::cout << p.message << "\n";
    Fail(cmd,
         fmt::format("{} NOT verified: {} problem{}", o->dir, r.problems.size(), r.problems.size() == 1 ? "" : "s"));
  });
}

}  // namespace

void RegisterModelCommands(CLI::App& app) {
  CLI::App* model = app.add_subcommand("model", "Sign and verify model folders (OpenSSF model-signing format)");
  model->require_subcommand(1);
  RegisterKeygen(model);
  RegisterSign(model);
  RegisterVerify(model);
}

}  // namespace gpugeek::cli
