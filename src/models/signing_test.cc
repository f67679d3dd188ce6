#include "models/signing.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/json_parse.h"

namespace gpugeek::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kHelloSha256[] = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
constexpr char kWorldSha256[] = "486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string B64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  out.resize(static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                 reinterpret_cast<const unsigned char*>(bytes.data()),
                                                 static_cast<int>(bytes.size()))));
  return out;
}

std::vector<std::string> Messages(const VerifyResult& r) {
  std::vector<std::string> out;
  for (const Problem& p : r.problems) out.push_back(p.message);
  return out;
}

// A model folder "llama" with two files, in a fresh temporary directory, and an Ed25519 key.
class ModelSignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "gpugeek-signing-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    tmp_ = pattern;
    dir_ = tmp_ + "/llama";
    sig_ = dir_ + "/model.sig";
    Write("config.json", "hello");
    Write("weights/model.safetensors", "world");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  void Write(const std::string& rel, const std::string& bytes) const {
    fs::create_directories(fs::path(dir_ + "/" + rel).parent_path());
    std::ofstream(dir_ + "/" + rel, std::ios::binary | std::ios::trunc) << bytes;
  }
  void Sign(const ManifestOptions& options = {}) const {
    absl::StatusOr<Manifest> m = BuildManifest(dir_, options);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<std::string> text = SignManifest(*m, key_);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string out = options.signature_path.empty() ? sig_ : options.signature_path;
    ASSERT_TRUE(WriteSignatureFile(out, *text).ok());
  }
  // Signs `statement` by hand (DSSE PAE, then the bundle), independently of SignManifest.
  void SignStatement(const json& statement, const SigningKey& key) const {
    const std::string payload = statement.dump();
    const std::string sig = key.Sign(DssePae(kInTotoPayloadType, payload)).value();
    json bundle = {{"mediaType", kBundleMediaType},
                   {"verificationMaterial", {{"publicKey", {{"hint", key.KeyId()}}}, {"tlogEntries", json::array()}}},
                   {"dsseEnvelope",
                    {{"payloadType", kInTotoPayloadType},
                     {"payload", B64(payload)},
                     {"signatures", json::array({{{"keyid", ""}, {"sig", B64(sig)}}})}}}};
    ASSERT_TRUE(WriteSignatureFile(sig_, bundle.dump(2)).ok());
  }
  VerifyResult Verify() const { return VerifyModel(dir_, VerifyingKey::Of(key_)); }
  json Bundle() const { return ParseJsonBounded(ReadAll(sig_), {kMaxSignatureFileBytes, 16}).value(); }
  json Statement() const {
    const std::string payload = ParseSignatureBundle(ReadAll(sig_)).value().payload;
    return json::parse(payload);
  }

  std::string tmp_, dir_, sig_;
  SigningKey key_ = SigningKey::Generate(KeyAlgorithm::kEd25519).value();
};

TEST_F(ModelSignTest, SignsAndVerifiesTheModelTransparencyShape) {
  Sign();
  const VerifyResult r = Verify();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.files, 2u);
  EXPECT_EQ(r.bytes, 10u);
  EXPECT_EQ(r.model_name, "llama");

  const json bundle = Bundle();
  EXPECT_EQ(bundle["mediaType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(bundle["verificationMaterial"]["publicKey"]["hint"], key_.KeyId());
  EXPECT_EQ(bundle["dsseEnvelope"]["payloadType"], "application/vnd.in-toto+json");
  EXPECT_EQ(bundle["dsseEnvelope"]["signatures"].size(), 1u);

  const json st = Statement();
  EXPECT_EQ(st["_type"], "https://in-toto.io/Statement/v1");
  EXPECT_EQ(st["predicateType"], "https://model_signing/signature/v1.0");
  EXPECT_EQ(st["subject"][0]["name"], "llama");
  const json& ser = st["predicate"]["serialization"];
  EXPECT_EQ(ser["method"], "files");
  EXPECT_EQ(ser["hash_type"], "sha256");
  EXPECT_EQ(ser["allow_symlinks"], false);
  EXPECT_EQ(ser["ignore_paths"], json({".git", ".gitattributes", ".github", ".gitignore", "model.sig"}));
  EXPECT_EQ(st["predicate"]["resources"],
            json::parse(fmt::format(R"([{{"name":"config.json","algorithm":"sha256","digest":"{}"}},
                                        {{"name":"weights/model.safetensors","algorithm":"sha256","digest":"{}"}}])",
                                    kHelloSha256, kWorldSha256)));
  // The subject digest: SHA-256 of the raw 32-byte digests in resource order (model-transparency's Payload).
  std::string raw;
  for (const char* hex : {kHelloSha256, kWorldSha256}) {
    for (size_t i = 0; i < 64; i += 2) raw += static_cast<char>(std::stoi(std::string(hex + i, 2), nullptr, 16));
  }
  EXPECT_EQ(st["subject"][0]["digest"]["sha256"], archive::Sha256Hex(raw));
}

TEST_F(ModelSignTest, EcdsaP256KeysSignAndVerifyToo) {
  key_ = SigningKey::Generate(KeyAlgorithm::kEcdsaP256).value();
  Sign();
  const VerifyResult r = Verify();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(VerifyingKey::Of(key_).algorithm(), KeyAlgorithm::kEcdsaP256);
}

TEST_F(ModelSignTest, KeysRoundTripThroughPem) {
  const SigningKey again = SigningKey::FromPem(key_.PrivatePem()).value();
  EXPECT_EQ(again.KeyId(), key_.KeyId());
  EXPECT_EQ(VerifyingKey::FromPem(key_.PublicPem()).value().KeyId(), key_.KeyId());
  EXPECT_EQ(SigningKey::FromPem(key_.PublicPem(), "k.pub.pem").status().message(),
            "k.pub.pem is a public key; signing needs the private key (gpugeek model keygen wrote both)");
  EXPECT_EQ(VerifyingKey::FromPem(key_.PrivatePem(), "k.pem").status().message(),
            "k.pem is a private key; verify with the public one (the .pub.pem file)");
  EXPECT_EQ(VerifyingKey::FromPem("junk", "x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelSignTest, ExtraFileIsNamed) {
  Sign();
  Write("weights/extra.bin", "x");
  const VerifyResult r = Verify();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Messages(r), std::vector<std::string>{"extra: weights/extra.bin (on disk, not in the signed manifest; "
                                                  "remove it or sign again)"});
  EXPECT_EQ(r.problems[0].kind, ProblemKind::kExtra);
  EXPECT_EQ(r.problems[0].path, "weights/extra.bin");
}

TEST_F(ModelSignTest, RenamedFileIsOneMissingAndOneExtra) {
  Sign();
  fs::rename(dir_ + "/config.json", dir_ + "/config2.json");
  const VerifyResult r = Verify();
  EXPECT_EQ(Messages(r), (std::vector<std::string>{
                             "missing: config.json (in the signed manifest, not on disk; renamed or deleted?)",
                             "extra: config2.json (on disk, not in the signed manifest; remove it or sign again)"}));
  EXPECT_EQ(r.status.message(), tmp_ +
                                    "/llama cannot be verified: 2 problems; the first: missing: config.json (in the "
                                    "signed manifest, not on disk; renamed or deleted?)");
}

TEST_F(ModelSignTest, ChangedByteNamesBothDigests) {
  Sign();
  Write("weights/model.safetensors", "worle");
  const VerifyResult r = Verify();
  EXPECT_EQ(Messages(r), std::vector<std::string>{fmt::format("changed: weights/model.safetensors: sha256 is {}, "
                                                              "signed {}",
                                                              archive::Sha256Hex("worle"), kWorldSha256)});
  EXPECT_EQ(r.bytes, 5u);  // config.json verified
}

TEST_F(ModelSignTest, UnsafeManifestPathsAreRefusedBeforeTheFilesystem) {
  Manifest m{"llama",
             {{"../outside.bin", kHelloSha256, 0},
              {"/etc/passwd", kHelloSha256, 0},
              {"a//b", kHelloSha256, 0},
              {"", kHelloSha256, 0},
              {"config.json", kHelloSha256, 0},
              {"config.json", kHelloSha256, 0}},
             {"../x"}};
  SignStatement(StatementJson(m), key_);
  const VerifyResult r = Verify();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  const std::string why =
      " (in the signed manifest: absolute, '..', empty and non-normalised paths are refused; nothing was read)";
  EXPECT_EQ(Messages(r), (std::vector<std::string>{
                             "unsafe path: \"../outside.bin\"" + why,
                             "unsafe path: \"/etc/passwd\"" + why,
                             "unsafe path: \"a//b\"" + why,
                             "unsafe path: \"\"" + why,
                             "duplicate: config.json (listed twice in the signed manifest)",
                             "unsafe path: \"../x\" (an ignore path of the signed manifest: absolute, '..', empty and "
                             "non-normalised paths are refused; nothing was read)",
                         }));
  EXPECT_EQ(r.bytes, 0u);
}

TEST_F(ModelSignTest, EmptyModelIsRefusedAtSignAndAtVerify) {
  fs::remove_all(dir_);
  fs::create_directories(dir_ + "/.git");
  std::ofstream(dir_ + "/.git/HEAD") << "ref";
  const absl::StatusOr<Manifest> m = BuildManifest(dir_);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), fmt::format("no files to sign in {} (ignored: .git, .gitattributes, .github, "
                                              ".gitignore, model.sig); an empty model cannot be signed",
                                              dir_));
  SignStatement(StatementJson(Manifest{"llama", {}, {}}), key_);
  const VerifyResult r = Verify();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Messages(r), std::vector<std::string>{
                             fmt::format("manifest: {} lists no files; an empty model cannot be verified", sig_)});
}

TEST_F(ModelSignTest, TamperedPayloadDoesNotVerify) {
  Sign();
  json bundle = Bundle();
  json st = Statement();
  st["predicate"]["resources"][0]["digest"] = archive::Sha256Hex("evil");
  bundle["dsseEnvelope"]["payload"] = B64(st.dump());
  std::ofstream(sig_, std::ios::trunc) << bundle.dump();
  const VerifyResult r = Verify();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Messages(r), std::vector<std::string>{fmt::format(
                             "signature: {} does not verify with key {}: the signed manifest was altered after "
                             "signing, or another key signed it",
                             sig_, key_.KeyId().substr(0, 16))});
  EXPECT_EQ(r.problems[0].kind, ProblemKind::kSignature);
}

TEST_F(ModelSignTest, WrongKeyIsNamed) {
  Sign();
  const SigningKey other = SigningKey::Generate(KeyAlgorithm::kEd25519).value();
  VerifyResult r = VerifyModel(dir_, VerifyingKey::Of(other));
  EXPECT_EQ(Messages(r), std::vector<std::string>{fmt::format(
                             "signature: {} was signed by key {}, not by the given key {}; pass the public key that "
                             "matches it",
                             sig_, key_.KeyId().substr(0, 16), other.KeyId().substr(0, 16))});
  // Without the (unsigned) hint the signature check itself catches it.
  json bundle = Bundle();
  bundle["verificationMaterial"]["publicKey"].erase("hint");
  std::ofstream(sig_, std::ios::trunc) << bundle.dump();
  r = VerifyModel(dir_, VerifyingKey::Of(other));
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].message.substr(0, r.problems[0].message.find(':', 11)),
            fmt::format("signature: {} does not verify with key {}", sig_, other.KeyId().substr(0, 16)));
}

TEST_F(ModelSignTest, IgnoredGitDirectoryDoesNotBreakVerification) {
  Write(".git/HEAD", "ref: refs/heads/main");
  Write(".gitattributes", "*.safetensors filter=lfs");
  Sign();
  Write(".git/HEAD", "ref: refs/heads/other");
  Write(".git/objects/ab/cdef", "blob");
  Write(".github/workflows/ci.yml", "on: push");
  const VerifyResult r = Verify();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.files, 2u);
}

TEST_F(ModelSignTest, UserIgnorePathsAreRecordedAndHonoured) {
  Write("checkpoints/step1.bin", "old");
  Sign({.ignore_paths = {"checkpoints/"}});
  EXPECT_EQ(Statement()["predicate"]["serialization"]["ignore_paths"],
            json({".git", ".gitattributes", ".github", ".gitignore", "checkpoints", "model.sig"}));
  Write("checkpoints/step2.bin", "new");
  EXPECT_TRUE(Verify().status.ok());
  EXPECT_EQ(BuildManifest(dir_, {.ignore_paths = {"../x"}}).status().message(),
            "--ignore ../x: give a path relative to the model folder, without '..', e.g. checkpoints/old");
}

TEST_F(ModelSignTest, SymlinksAreRefusedAtSignAndAtVerify) {
  fs::create_symlink("config.json", dir_ + "/link.json");
  const absl::StatusOr<Manifest> m = BuildManifest(dir_);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.status().message(), fmt::format("cannot sign {}: symlink: link.json (symbolic links are not signed; "
                                              "replace it with the file it points to, or ignore it)",
                                              dir_));
  fs::remove(dir_ + "/link.json");
  Sign();
  fs::create_directory_symlink("weights", dir_ + "/weights2");
  const VerifyResult r = Verify();
  EXPECT_EQ(Messages(r), std::vector<std::string>{"symlink: weights2 (symbolic links are not signed; replace it with "
                                                  "the file it points to, or ignore it)"});
  fs::remove(dir_ + "/weights2");
  ASSERT_EQ(::mkfifo((dir_ + "/pipe").c_str(), 0600), 0);
  EXPECT_EQ(Messages(Verify()), std::vector<std::string>{"not a regular file: pipe (only regular files are signed; "
                                                         "remove it or ignore it)"});
}

TEST_F(ModelSignTest, SignatureOutsideTheFolder) {
  const std::string outside = tmp_ + "/llama.sig";
  Write("model.sig", "an older signature");  // never signed as a model file
  Sign({.signature_path = outside});
  const std::string payload = ParseSignatureBundle(ReadAll(outside)).value().payload;
  EXPECT_EQ(json::parse(payload)["predicate"]["serialization"]["ignore_paths"],
            json({".git", ".gitattributes", ".github", ".gitignore", "model.sig"}));
  const VerifyResult r = VerifyModel(dir_, VerifyingKey::Of(key_), outside);
  EXPECT_TRUE(r.status.ok()) << r.status;
}

TEST_F(ModelSignTest, MissingOrDamagedSignatureFile) {
  VerifyResult r = Verify();
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].message,
            fmt::format("signature: cannot read signature file {}: No such file or directory", sig_));
  std::ofstream(sig_, std::ios::trunc) << "{\"mediaType\": 3}";
  r = Verify();
  EXPECT_EQ(Messages(r),
            std::vector<std::string>{fmt::format("signature: {}: mediaType: is 3, expected a string", sig_)});
}

TEST(SigningBundle, ParsingNamesTheFieldAndTheFix) {
  const auto message = [](const std::string& text) {
    return std::string(ParseSignatureBundle(text).status().message());
  };
  const std::string head = R"({"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json",)";
  EXPECT_EQ(message("[1,2"),
            "not a signature file (JSON syntax error at byte offset 4: syntax error while parsing array - "
            "unexpected end of input; "
            "expected ']'); sign the model with gpugeek model sign");
  EXPECT_EQ(message(R"({"mediaType":"x"})"),
            "mediaType: is \"x\", expected \"application/vnd.dev.sigstore.bundle.v0.3+json\"");
  EXPECT_EQ(message(head + R"("dsseEnvelope":{"payloadType":"application/vnd.in-toto+json","payload":"a!==",
                              "signatures":[]}})"),
            "dsseEnvelope.payload: not base64; the file is damaged, sign the model again");
  EXPECT_EQ(message(head + R"("dsseEnvelope":{"payloadType":"application/vnd.in-toto+json","payload":"e30=",
                              "signatures":[]}})"),
            "dsseEnvelope.signatures: has 0 entries, expected 1; sign the model again");
  const absl::StatusOr<SignatureBundle> ok =
      ParseSignatureBundle(head + R"("dsseEnvelope":{"payloadType":"application/vnd.in-toto+json","payload":"e30=",
                "signatures":[{"sig":"YWI="}]}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->payload, "{}");
  EXPECT_EQ(ok->signature, "ab");
  EXPECT_EQ(ok->key_hint, "");
}

TEST(SigningStatement, InconsistentSubjectDigestIsRefused) {
  json st = StatementJson(Manifest{"m", {{"a", kHelloSha256, 0}}, {}});
  EXPECT_TRUE(ParseStatement(st.dump()).ok());
  st["subject"][0]["digest"]["sha256"] = kWorldSha256;
  EXPECT_EQ(ParseStatement(st.dump()).status().message(),
            fmt::format("subject[0].digest.sha256: is {} but the resources hash to {}; the statement is inconsistent",
                        kWorldSha256, SubjectDigest({{"a", kHelloSha256, 0}})));
  st["predicate"]["resources"][0]["digest"] = "XYZ";
  EXPECT_EQ(ParseStatement(st.dump()).status().message(),
            "predicate.resources[0].digest: \"XYZ\" is not 64 lower-case hex digits");
  st["predicateType"] = "https://model_signing/Digests/v0.1";
  EXPECT_EQ(ParseStatement(st.dump()).status().message(),
            "predicateType: is the pre-1.0 \"https://model_signing/Digests/v0.1\"; sign the model again");
}

TEST_F(ModelSignTest, ManyFilesHashInParallelAndMatchOneThread) {
  for (int i = 0; i < 40; ++i) Write(fmt::format("shards/{:03}.bin", i), std::string(1000 + i * 997, 'a' + i % 26));
  const Manifest one = BuildManifest(dir_, {.threads = 1}).value();
  const Manifest many = BuildManifest(dir_, {.threads = 8}).value();
  EXPECT_EQ(one.files, many.files);
  EXPECT_EQ(one.files.size(), 42u);
  EXPECT_TRUE(
      std::is_sorted(one.files.begin(), one.files.end(), [](const auto& a, const auto& b) { return a.path < b.path; }));
}

}  // namespace
}  // namespace gpugeek::models
