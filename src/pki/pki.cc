#include "pki/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::pki {
namespace {

// PEM files are a few KiB; a path that points at something large is a mistake, not a certificate.
constexpr uint64_t kMaxPemBytes = 1 << 20;
// Certificates start a little in the past, so a peer whose clock lags by minutes still accepts them.
constexpr long kBackdateSeconds = 5 * 60;

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* n) const { GENERAL_NAMES_free(n); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, ExtFree>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, NamesFree>;

// Drains this thread's OpenSSL error queue into one line, so a failure never leaks into a later,
// unrelated call on the same thread.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL error recorded" : out;
}

absl::Status OpenSslFailure(const std::string& what) {
  return absl::InternalError(fmt::format("OpenSSL: {}: {}", what, OpenSslErrors()));
}

absl::StatusOr<X509Ptr> ParseCert(const std::string& pem, const std::string& what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return OpenSslFailure("BIO_new_mem_buf");
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return absl::InvalidArgumentError(
        fmt::format("{} is not a PEM certificate (BEGIN CERTIFICATE): {}", what, OpenSslErrors()));
  }
  return cert;
}

absl::StatusOr<PkeyPtr> ParseKey(const std::string& pem, const std::string& what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return OpenSslFailure("BIO_new_mem_buf");
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(
        fmt::format("{} is not an unencrypted PEM private key: {}", what, OpenSslErrors()));
  }
  return key;
}

absl::Status CheckMatch(X509* cert, EVP_PKEY* key, const std::string& what) {
  if (X509_check_private_key(cert, key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        fmt::format("{}: the private key does not belong to the certificate (a key and certificate from different "
                    "issues?); replace both files together",
                    what));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslFailure("PEM_write_bio_X509");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> ToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslFailure("PEM_write_bio_PrivateKey");
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslFailure("generating a P-256 key");
  return key;
}

std::string NameCn(const X509_NAME* name) {
  const int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) return "";
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, data);
  if (n < 0) {
    ERR_clear_error();
    return "";
  }
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

int64_t UnixTime(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

// An extension from its OpenSSL config text ("critical,CA:TRUE"), with `issuer` and `subject` for the key
// identifiers.
absl::Status AddExt(X509* subject, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, subject, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(subject, ext.get(), -1) != 1) {
    return OpenSslFailure(fmt::format("adding extension {}={}", OBJ_nid2sn(nid), value));
  }
  return absl::OkStatus();
}

bool ValidDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '*' || c == '_')) return false;
  }
  return true;
}

absl::Status AddSubjectAltNames(X509* cert, const std::vector<std::string>& dns_names,
                                const std::vector<std::string>& ips) {
  if (dns_names.empty() && ips.empty()) return absl::OkStatus();
  NamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return OpenSslFailure("sk_GENERAL_NAME_new_null");
  for (const std::string& dns : dns_names) {
    if (!ValidDnsName(dns)) {
      return absl::InvalidArgumentError(
          fmt::format("DNS name '{}' is not a host name (letters, digits, '-', '.', '*')", dns));
    }
    GENERAL_NAME* gen = GENERAL_NAME_new();
    ASN1_IA5STRING* ia5 = ASN1_IA5STRING_new();
    if (gen == nullptr || ia5 == nullptr || ASN1_STRING_set(ia5, dns.data(), static_cast<int>(dns.size())) != 1) {
      GENERAL_NAME_free(gen);
      ASN1_IA5STRING_free(ia5);
      return OpenSslFailure("building a DNS subjectAltName");
    }
    GENERAL_NAME_set0_value(gen, GEN_DNS, ia5);
    sk_GENERAL_NAME_push(names.get(), gen);
  }
  for (const std::string& ip : ips) {
    ASN1_OCTET_STRING* octets = a2i_IPADDRESS(ip.c_str());
    if (octets == nullptr) {
      ERR_clear_error();
      return absl::InvalidArgumentError(fmt::format("IP address '{}' is not an IPv4 or IPv6 address", ip));
    }
    GENERAL_NAME* gen = GENERAL_NAME_new();
    if (gen == nullptr) {
      ASN1_OCTET_STRING_free(octets);
      return OpenSslFailure("GENERAL_NAME_new");
    }
    GENERAL_NAME_set0_value(gen, GEN_IPADD, octets);
    sk_GENERAL_NAME_push(names.get(), gen);
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return OpenSslFailure("adding subjectAltName");
  }
  return absl::OkStatus();
}

// A new certificate with version 3, a random 128-bit serial, subject CN and validity; issuer, key and
// extensions are the caller's.
absl::StatusOr<X509Ptr> NewCert(const std::string& cn, Days validity) {
  if (cn.empty()) return absl::InvalidArgumentError("a certificate needs a common name (CN)");
  if (validity.count() <= 0) return absl::InvalidArgumentError("certificate validity must be > 0 days");
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) return OpenSslFailure("X509_new");
  // RFC 5280 section 4.1.2.2: positive, at most 20 octets; 127 random bits keep it positive.
  BnPtr serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpenSslFailure("making a serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdateSeconds) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), static_cast<int>(validity.count()), 0, nullptr) == nullptr) {
    return OpenSslFailure("setting the validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1) {
    return OpenSslFailure(fmt::format("setting CN '{}'", cn));
  }
  return cert;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  return ReadFileBounded(path, kMaxPemBytes, what);
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

absl::StatusOr<CertInfo> InspectCertificate(const std::string& cert_pem, const std::string& what) {
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, what));
  CertInfo info;
  info.subject_cn = NameCn(X509_get_subject_name(cert.get()));
  info.issuer_cn = NameCn(X509_get_issuer_name(cert.get()));
  BnPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  if (serial) {
    char* hex = BN_bn2hex(serial.get());
    if (hex != nullptr) info.serial_hex = hex;
    OPENSSL_free(hex);
  }
  info.not_before_unix = UnixTime(X509_get0_notBefore(cert.get()));
  info.not_after_unix = UnixTime(X509_get0_notAfter(cert.get()));
  info.is_ca = (X509_get_extension_flags(cert.get()) & EXFLAG_CA) != 0;
  NamesPtr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gen = sk_GENERAL_NAME_value(names.get(), i);
    if (gen->type == GEN_DNS) {
      const ASN1_STRING* s = gen->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gen->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = gen->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      const int family = ASN1_STRING_length(s) == 4 ? AF_INET : AF_INET6;
      if (inet_ntop(family, ASN1_STRING_get0_data(s), text, sizeof(text)) != nullptr) {
        info.ip_addresses.emplace_back(text);
      }
    }
  }
  ERR_clear_error();
  return info;
}

absl::Status CheckKeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem,
                                        const std::string& what) {
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, what));
  ASSIGN_OR_RETURN(PkeyPtr key, ParseKey(key_pem, what));
  return CheckMatch(cert.get(), key.get(), what);
}

absl::StatusOr<CertificateAuthority> CertificateAuthority::Generate(const std::string& common_name, Days validity) {
  ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  ASSIGN_OR_RETURN(X509Ptr cert, NewCert(common_name, validity));
  X509* c = cert.get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1 || X509_set_pubkey(c, key.get()) != 1) {
    return OpenSslFailure("setting the CA's issuer and key");
  }
  RETURN_IF_ERROR(AddExt(c, c, NID_basic_constraints, "critical,CA:TRUE"));
  RETURN_IF_ERROR(AddExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExt(c, c, NID_subject_key_identifier, "hash"));
  RETURN_IF_ERROR(AddExt(c, c, NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(c, key.get(), EVP_sha256()) == 0) return OpenSslFailure("signing the CA certificate");
  ASSIGN_OR_RETURN(std::string cert_pem, ToPem(c));
  ASSIGN_OR_RETURN(std::string key_pem, ToPem(key.get()));
  return CertificateAuthority(std::move(cert_pem), std::move(key_pem));
}

absl::StatusOr<CertificateAuthority> CertificateAuthority::Load(const std::string& cert_file,
                                                                const std::string& key_file) {
  ASSIGN_OR_RETURN(std::string cert_pem, ReadPemFile(cert_file, "CA certificate " + cert_file));
  ASSIGN_OR_RETURN(std::string key_pem, ReadPemFile(key_file, "CA key " + key_file));
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, "CA certificate " + cert_file));
  ASSIGN_OR_RETURN(PkeyPtr key, ParseKey(key_pem, "CA key " + key_file));
  RETURN_IF_ERROR(CheckMatch(cert.get(), key.get(), fmt::format("CA key {} for certificate {}", key_file, cert_file)));
  if ((X509_get_extension_flags(cert.get()) & EXFLAG_CA) == 0) {
    return absl::InvalidArgumentError(
        fmt::format("CA certificate {} is not a CA (no basicConstraints CA:TRUE)", cert_file));
  }
  return CertificateAuthority(std::move(cert_pem), std::move(key_pem));
}

absl::StatusOr<CertificateAuthority> CertificateAuthority::FromPem(const std::string& cert_pem,
                                                                   const std::string& key_pem,
                                                                   const std::string& what) {
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, what + " certificate"));
  ASSIGN_OR_RETURN(PkeyPtr key, ParseKey(key_pem, what + " key"));
  RETURN_IF_ERROR(CheckMatch(cert.get(), key.get(), what));
  if ((X509_get_extension_flags(cert.get()) & EXFLAG_CA) == 0) {
    return absl::InvalidArgumentError(fmt::format("{} certificate is not a CA (no basicConstraints CA:TRUE)", what));
  }
  return CertificateAuthority(cert_pem, key_pem);
}

absl::StatusOr<IssuedCert> IssueCertificate(const CertificateAuthority& ca, const CertRequest& request) {
  if (!request.server_auth && !request.client_auth) {
    return absl::InvalidArgumentError("a certificate request needs server_auth, client_auth or both");
  }
  ASSIGN_OR_RETURN(X509Ptr ca_cert, ParseCert(ca.cert_pem(), "CA certificate"));
  ASSIGN_OR_RETURN(PkeyPtr ca_key, ParseKey(ca.key_pem(), "CA key"));
  ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  ASSIGN_OR_RETURN(X509Ptr cert, NewCert(request.common_name, request.validity));
  X509* c = cert.get();
  if (X509_set_issuer_name(c, X509_get_subject_name(ca_cert.get())) != 1 || X509_set_pubkey(c, key.get()) != 1) {
    return OpenSslFailure("setting issuer and key");
  }
  // A certificate outliving its CA would fail verification at the CA's expiry anyway; say so in the dates.
  if (ASN1_TIME_compare(X509_get0_notAfter(c), X509_get0_notAfter(ca_cert.get())) > 0 &&
      X509_set1_notAfter(c, X509_get0_notAfter(ca_cert.get())) != 1) {
    return OpenSslFailure("capping notAfter at the CA's");
  }
  RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_key_usage, "critical,digitalSignature"));
  const char* eku = request.server_auth && request.client_auth ? "serverAuth,clientAuth"
                    : request.server_auth                      ? "serverAuth"
                                                               : "clientAuth";
  RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_ext_key_usage, eku));
  RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_subject_key_identifier, "hash"));
  RETURN_IF_ERROR(AddExt(c, ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  RETURN_IF_ERROR(AddSubjectAltNames(c, request.dns_names, request.ip_addresses));
  if (X509_sign(c, ca_key.get(), EVP_sha256()) == 0) return OpenSslFailure("signing the certificate");
  IssuedCert issued;
  ASSIGN_OR_RETURN(issued.cert_pem, ToPem(c));
  ASSIGN_OR_RETURN(issued.key_pem, ToPem(key.get()));
  return issued;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& data, unsigned mode) {
  const auto failed = [&](const std::string& step) {
    return absl::InternalError(fmt::format("cannot write {}: {}: {}", path, step, std::strerror(errno)));
  };
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  ::unlink(tmp.c_str());  // a leftover of a crashed earlier write
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return failed("open " + tmp);
  // The umask may have cleared bits of `mode`; and a key must never be readable by others, even briefly.
  bool ok = ::fchmod(fd, mode) == 0;
  for (size_t done = 0; ok && done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    errno = saved;
    const absl::Status status = failed("write " + tmp);
    ::unlink(tmp.c_str());
    return status;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status status = failed("rename " + tmp);
    ::unlink(tmp.c_str());
    return status;
  }
  // The rename is durable once the directory is.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<LocalPki> EnsureLocalPki(const LocalPkiOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("local PKI: a directory is required");
  const std::filesystem::path dir(options.dir);
  LocalPki pki{.ca_cert_file = (dir / "ca.crt").string(),
               .ca_key_file = (dir / "ca.key").string(),
               .server_cert_file = (dir / "server.crt").string(),
               .server_key_file = (dir / "server.key").string()};
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (!std::filesystem::create_directories(dir, ec) && ec) {
      return absl::InternalError(fmt::format("local PKI: cannot create directory {}: {}", options.dir, ec.message()));
    }
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  }

  std::vector<std::string> dns_names = options.dns_names;
  if (options.add_hostname) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0 && ValidDnsName(host) &&
        std::find(dns_names.begin(), dns_names.end(), host) == dns_names.end()) {
      dns_names.emplace_back(host);
    }
  }

  // The CA: both files or neither. One without the other is left for a person to sort out, because a
  // new CA would orphan every certificate the old one issued (node client certificates).
  const bool have_ca_cert = Exists(pki.ca_cert_file);
  const bool have_ca_key = Exists(pki.ca_key_file);
  std::optional<CertificateAuthority> ca;
  if (!have_ca_cert && !have_ca_key) {
    ASSIGN_OR_RETURN(CertificateAuthority made,
                     CertificateAuthority::Generate(options.ca_common_name, options.ca_validity));
    // The key first: a crash between the two leaves a key without a certificate, which the next call
    // reports instead of silently pairing a certificate with no key.
    RETURN_IF_ERROR(WriteFileAtomically(pki.ca_key_file, made.key_pem(), 0600));
    RETURN_IF_ERROR(WriteFileAtomically(pki.ca_cert_file, made.cert_pem(), 0644));
    ca = std::move(made);
    pki.created_ca = true;
  } else if (!have_ca_cert || !have_ca_key) {
    const std::string& missing = have_ca_cert ? pki.ca_key_file : pki.ca_cert_file;
    return absl::FailedPreconditionError(fmt::format(
        "local PKI: {} is missing but {} exists; restore it, or remove both to make a new CA (certificates the "
        "old CA issued then stop being trusted)",
        missing, have_ca_cert ? pki.ca_cert_file : pki.ca_key_file));
  } else {
    ASSIGN_OR_RETURN(CertificateAuthority loaded, CertificateAuthority::Load(pki.ca_cert_file, pki.ca_key_file));
    ca = std::move(loaded);
  }

  // The server certificate: reused while it is whole, ours, and not about to expire.
  bool reissue = pki.created_ca || !Exists(pki.server_cert_file) || !Exists(pki.server_key_file);
  if (!reissue) {
    ASSIGN_OR_RETURN(std::string cert_pem, ReadPemFile(pki.server_cert_file, "server certificate"));
    ASSIGN_OR_RETURN(std::string key_pem, ReadPemFile(pki.server_key_file, "server key"));
    ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, "server certificate " + pki.server_cert_file));
    ASSIGN_OR_RETURN(PkeyPtr key, ParseKey(key_pem, "server key " + pki.server_key_file));
    RETURN_IF_ERROR(
        CheckMatch(cert.get(), key.get(),
                   fmt::format("server key {} for certificate {}", pki.server_key_file, pki.server_cert_file)));
    ASSIGN_OR_RETURN(X509Ptr ca_cert, ParseCert(ca->cert_pem(), "CA certificate " + pki.ca_cert_file));
    const bool signed_by_ca = X509_verify(cert.get(), X509_get0_pubkey(ca_cert.get())) == 1;
    ERR_clear_error();
    const int64_t renew_at = static_cast<int64_t>(std::time(nullptr)) +
                             std::chrono::duration_cast<std::chrono::seconds>(options.renew_before).count();
    reissue = !signed_by_ca || UnixTime(X509_get0_notAfter(cert.get())) <= renew_at;
  }
  if (reissue) {
    ASSIGN_OR_RETURN(IssuedCert issued, IssueCertificate(*ca, {.common_name = options.server_common_name,
                                                               .dns_names = dns_names,
                                                               .ip_addresses = options.ip_addresses,
                                                               .validity = options.server_validity,
                                                               .server_auth = true,
                                                               .client_auth = true}));
    RETURN_IF_ERROR(WriteFileAtomically(pki.server_key_file, issued.key_pem, 0600));
    RETURN_IF_ERROR(WriteFileAtomically(pki.server_cert_file, issued.cert_pem, 0644));
    pki.issued_server = true;
  }
  return pki;
}

}  // namespace gpugeek::pki
