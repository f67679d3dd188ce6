#include "pki/pki.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpugeek::pki {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

unsigned Mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

X509* ParsePem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return x;
}

// OpenSSL's own chain verification of `cert_pem` against the single trust anchor `ca_pem`, for `purpose`
// (X509_PURPOSE_SSL_SERVER / _CLIENT) and, when given, the host name or IP the peer would check. Returns
// X509_V_OK or the verification error.
int Verify(const std::string& ca_pem, const std::string& cert_pem, int purpose, const std::string& host = "",
           const std::string& ip = "") {
  X509* ca = ParsePem(ca_pem);
  X509* cert = ParsePem(cert_pem);
  EXPECT_NE(ca, nullptr);
  EXPECT_NE(cert, nullptr);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  if (!host.empty()) X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  if (!ip.empty()) X509_VERIFY_PARAM_set1_ip_asc(param, ip.c_str());
  const int ok = X509_verify_cert(ctx);
  const int error = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(cert);
  X509_free(ca);
  ERR_clear_error();
  return error;
}

class PkiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpugeek_pki_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LocalPkiOptions Options() const {
    return {.dir = dir_.string(), .dns_names = {"localhost", "gpugeek.test"}, .add_hostname = false};
  }

  std::filesystem::path dir_;
};

TEST_F(PkiTest, IssuedCertificateVerifiesAgainstItsCaWithSansAndUsages) {
  auto ca = CertificateAuthority::Generate("test CA", Days(30));
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto issued = IssueCertificate(*ca, {.common_name = "node-7",
                                       .dns_names = {"node-7.cluster", "localhost"},
                                       .ip_addresses = {"10.0.0.7", "::1"},
                                       .validity = Days(10),
                                       .server_auth = false,
                                       .client_auth = true});
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_EQ(Verify(ca->cert_pem(), issued->cert_pem, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  // clientAuth only: refused as a server certificate.
  EXPECT_EQ(Verify(ca->cert_pem(), issued->cert_pem, X509_PURPOSE_SSL_SERVER), X509_V_ERR_INVALID_PURPOSE);
  EXPECT_TRUE(CheckKeyMatchesCertificate(issued->cert_pem, issued->key_pem, "node").ok());

  auto info = InspectCertificate(issued->cert_pem);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->subject_cn, "node-7");
  EXPECT_EQ(info->issuer_cn, "test CA");
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"node-7.cluster", "localhost"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"10.0.0.7", "::1"}));
  EXPECT_FALSE(info->is_ca);
  EXPECT_GE(info->serial_hex.size(), 16u);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  EXPECT_LE(info->not_before_unix, now);
  EXPECT_NEAR(static_cast<double>(info->not_after_unix - now), 10.0 * 86400, 120.0);

  auto ca_info = InspectCertificate(ca->cert_pem());
  ASSERT_TRUE(ca_info.ok());
  EXPECT_TRUE(ca_info->is_ca);
  EXPECT_EQ(ca_info->subject_cn, "test CA");
}

TEST_F(PkiTest, IssuedCertificateNeverOutlivesTheCa) {
  auto ca = CertificateAuthority::Generate("short CA", Days(2));
  ASSERT_TRUE(ca.ok());
  auto issued = IssueCertificate(*ca, {.common_name = "x", .validity = Days(365)});
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_EQ(InspectCertificate(issued->cert_pem)->not_after_unix, InspectCertificate(ca->cert_pem())->not_after_unix);
}

TEST_F(PkiTest, IssueRefusesBadRequests) {
  auto ca = CertificateAuthority::Generate("test CA", Days(30));
  ASSERT_TRUE(ca.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(IssueCertificate(*ca, {.common_name = ""}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(IssueCertificate(*ca, {.common_name = "x", .validity = Days(0)}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      IssueCertificate(*ca, {.common_name = "x", .server_auth = false, .client_auth = false}).status()));
  const auto bad_ip = IssueCertificate(*ca, {.common_name = "x", .ip_addresses = {"10.0.0.300"}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad_ip.status()));
  EXPECT_NE(bad_ip.status().message().find("10.0.0.300"), std::string::npos);
  EXPECT_TRUE(
      absl::IsInvalidArgument(IssueCertificate(*ca, {.common_name = "x", .dns_names = {"a,IP:1.2.3.4"}}).status()));
}

TEST_F(PkiTest, EnsureLocalPkiCreatesAVerifiableServerCertificateWithPrivateKeys) {
  auto pki = EnsureLocalPki(Options());
  ASSERT_TRUE(pki.ok()) << pki.status();
  EXPECT_TRUE(pki->created_ca);
  EXPECT_TRUE(pki->issued_server);
  EXPECT_EQ(pki->ca_cert_file, (dir_ / "ca.crt").string());
  EXPECT_EQ(Mode(pki->ca_key_file), 0600u);
  EXPECT_EQ(Mode(pki->server_key_file), 0600u);
  EXPECT_EQ(Mode(pki->ca_cert_file), 0644u);
  EXPECT_EQ(Mode(pki->server_cert_file), 0644u);
  EXPECT_EQ(Mode(dir_.string()), 0700u);

  const std::string ca_pem = Slurp(pki->ca_cert_file);
  const std::string server_pem = Slurp(pki->server_cert_file);
  EXPECT_EQ(Verify(ca_pem, server_pem, X509_PURPOSE_SSL_SERVER, "localhost"), X509_V_OK);
  EXPECT_EQ(Verify(ca_pem, server_pem, X509_PURPOSE_SSL_SERVER, "", "127.0.0.1"), X509_V_OK);
  EXPECT_EQ(Verify(ca_pem, server_pem, X509_PURPOSE_SSL_SERVER, "", "::1"), X509_V_OK);
  EXPECT_EQ(Verify(ca_pem, server_pem, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  // A name not in the SANs is refused: the SANs are what clients check.
  EXPECT_EQ(Verify(ca_pem, server_pem, X509_PURPOSE_SSL_SERVER, "evil.example"), X509_V_ERR_HOSTNAME_MISMATCH);

  auto info = InspectCertificate(server_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"localhost", "gpugeek.test"}));
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"127.0.0.1", "::1"}));
  auto ca_info = InspectCertificate(ca_pem);
  ASSERT_TRUE(ca_info.ok());
  EXPECT_TRUE(ca_info->is_ca);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  EXPECT_GT(ca_info->not_after_unix - now, 3649LL * 86400);
  EXPECT_NEAR(static_cast<double>(info->not_after_unix - now), 365.0 * 86400, 600.0);

  // Loadable as a CA that issues further certificates.
  auto ca = CertificateAuthority::Load(pki->ca_cert_file, pki->ca_key_file);
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto node = IssueCertificate(*ca, {.common_name = "node-1", .server_auth = false});
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(Verify(ca_pem, node->cert_pem, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
}

TEST_F(PkiTest, EnsureLocalPkiAddsTheHostName) {
  LocalPkiOptions options = Options();
  options.add_hostname = true;
  auto pki = EnsureLocalPki(options);
  ASSERT_TRUE(pki.ok()) << pki.status();
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  const auto info = InspectCertificate(Slurp(pki->server_cert_file));
  ASSERT_TRUE(info.ok());
  EXPECT_NE(std::find(info->dns_names.begin(), info->dns_names.end(), host), info->dns_names.end()) << host;
}

TEST_F(PkiTest, EnsureLocalPkiReusesWhatExists) {
  auto first = EnsureLocalPki(Options());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string files[] = {first->ca_cert_file, first->ca_key_file, first->server_cert_file,
                               first->server_key_file};
  std::vector<std::string> before;
  for (const auto& f : files) before.push_back(Slurp(f));
  auto second = EnsureLocalPki(Options());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->created_ca);
  EXPECT_FALSE(second->issued_server);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(Slurp(files[i]), before[i]) << files[i];
}

TEST_F(PkiTest, EnsureLocalPkiReissuesAMissingOrExpiringServerCertificateWithTheSameCa) {
  auto first = EnsureLocalPki(Options());
  ASSERT_TRUE(first.ok());
  const std::string ca_before = Slurp(first->ca_cert_file);
  const std::string server_before = Slurp(first->server_cert_file);

  std::filesystem::remove(first->server_cert_file);
  auto missing = EnsureLocalPki(Options());
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->created_ca);
  EXPECT_TRUE(missing->issued_server);
  EXPECT_EQ(Slurp(first->ca_cert_file), ca_before);
  const std::string reissued = Slurp(first->server_cert_file);
  EXPECT_NE(reissued, server_before);
  EXPECT_EQ(Verify(ca_before, reissued, X509_PURPOSE_SSL_SERVER, "localhost"), X509_V_OK);

  // A certificate valid 10 more days is inside the 30-day renewal window.
  LocalPkiOptions short_lived = Options();
  short_lived.server_validity = Days(10);
  std::filesystem::remove(first->server_key_file);
  ASSERT_TRUE(EnsureLocalPki(short_lived).ok());
  const std::string ten_days = Slurp(first->server_cert_file);
  auto renewed = EnsureLocalPki(Options());
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_TRUE(renewed->issued_server);
  EXPECT_NE(Slurp(first->server_cert_file), ten_days);
  EXPECT_GT(InspectCertificate(Slurp(first->server_cert_file))->not_after_unix,
            static_cast<int64_t>(std::time(nullptr)) + 300LL * 86400);
}

TEST_F(PkiTest, KeyNotMatchingItsCertificateIsAnErrorNamingTheFile) {
  auto first = EnsureLocalPki(Options());
  ASSERT_TRUE(first.ok());
  auto other = CertificateAuthority::Generate("other CA", Days(30));
  ASSERT_TRUE(other.ok());

  // The server key replaced by another key.
  const std::string server_key = Slurp(first->server_key_file);
  Spit(first->server_key_file, other->key_pem());
  auto mismatch = EnsureLocalPki(Options());
  EXPECT_TRUE(absl::IsInvalidArgument(mismatch.status())) << mismatch.status();
  EXPECT_NE(mismatch.status().message().find(first->server_key_file), std::string::npos) << mismatch.status();
  Spit(first->server_key_file, server_key);

  // The CA key replaced: Load and EnsureLocalPki both refuse, naming ca.key.
  Spit(first->ca_key_file, other->key_pem());
  auto load = CertificateAuthority::Load(first->ca_cert_file, first->ca_key_file);
  EXPECT_TRUE(absl::IsInvalidArgument(load.status())) << load.status();
  EXPECT_NE(load.status().message().find(first->ca_key_file), std::string::npos) << load.status();
  auto ensure = EnsureLocalPki(Options());
  EXPECT_TRUE(absl::IsInvalidArgument(ensure.status()));
  EXPECT_NE(ensure.status().message().find(first->ca_key_file), std::string::npos) << ensure.status();
}

TEST_F(PkiTest, UnreadableOrHalfMissingFilesAreErrorsNamingTheFile) {
  auto first = EnsureLocalPki(Options());
  ASSERT_TRUE(first.ok());
  Spit(first->server_cert_file, "not a certificate\n");
  auto garbage = EnsureLocalPki(Options());
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status()));
  EXPECT_NE(garbage.status().message().find(first->server_cert_file), std::string::npos) << garbage.status();

  std::filesystem::remove(first->ca_key_file);
  auto half = EnsureLocalPki(Options());
  EXPECT_TRUE(absl::IsFailedPrecondition(half.status()));
  EXPECT_NE(half.status().message().find(first->ca_key_file), std::string::npos) << half.status();

  auto missing = CertificateAuthority::Load(first->ca_cert_file, (dir_ / "nope.key").string());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("nope.key"), std::string::npos);

  EXPECT_TRUE(absl::IsInvalidArgument(EnsureLocalPki({.dir = ""}).status()));
}

TEST_F(PkiTest, LoadRefusesALeafCertificateAsCa) {
  auto ca = CertificateAuthority::Generate("test CA", Days(30));
  ASSERT_TRUE(ca.ok());
  auto leaf = IssueCertificate(*ca, {.common_name = "leaf"});
  ASSERT_TRUE(leaf.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(CertificateAuthority::FromPem(leaf->cert_pem, leaf->key_pem).status()));
  EXPECT_TRUE(CertificateAuthority::FromPem(ca->cert_pem(), ca->key_pem()).ok());
}

TEST_F(PkiTest, WriteFileAtomicallyReplacesWithTheMode) {
  std::filesystem::create_directories(dir_);
  const std::string path = (dir_ / "f").string();
  Spit(path, "old");
  ASSERT_TRUE(WriteFileAtomically(path, "new bytes", 0600).ok());
  EXPECT_EQ(Slurp(path), "new bytes");
  EXPECT_EQ(Mode(path), 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
  const auto failed = WriteFileAtomically((dir_ / "no" / "such" / "dir").string(), "x", 0600);
  EXPECT_TRUE(absl::IsInternal(failed));
  EXPECT_NE(failed.message().find("no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace gpugeek::pki
