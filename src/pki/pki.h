#pragma once
// pki: a small certificate authority for gpugeek's own TLS, on OpenSSL 3.
//
// The problem: every listener (API, agents, metrics) serves TLS 1.3, and a single-machine install
// (`gpugeek up`) must work without anyone running openssl by hand. EnsureLocalPki makes a private CA
// and a server certificate in a directory the first time and reuses them afterwards; IssueCertificate
// signs further certificates with that CA, e.g. node client certificates for mutual TLS (CN = node name).
//
//   ASSIGN_OR_RETURN(pki::LocalPki local, pki::EnsureLocalPki({.dir = state_dir + "/tls"}));
//   server_options.tls = {.cert_file = local.server_cert_file, .key_file = local.server_key_file};
//   ASSIGN_OR_RETURN(auto ca, pki::CertificateAuthority::Load(local.ca_cert_file, local.ca_key_file));
//   ASSIGN_OR_RETURN(pki::IssuedCert node, pki::IssueCertificate(ca, {.common_name = "node-7",
//                                                                    .server_auth = false}));
//
// Keys are ECDSA P-256; certificates are X.509 v3 signed with SHA-256; everything is PEM text.
// Errors are absl::Status and name the file or field at fault. Thread-safety: free functions and
// const members may be called from any thread concurrently.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::pki {

using Days = std::chrono::duration<int64_t, std::ratio<86400>>;

// What a certificate says, for checks and logs.
struct CertInfo {
  std::string subject_cn;                 // "" when the subject has no CN
  std::string issuer_cn;                  // "" when the issuer has no CN
  std::string serial_hex;                 // upper-case hex, no separators
  std::vector<std::string> dns_names;     // subjectAltName DNS entries, in order
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries, textual ("127.0.0.1", "::1")
  int64_t not_before_unix = 0;            // seconds since the Unix epoch
  int64_t not_after_unix = 0;             // seconds since the Unix epoch
  bool is_ca = false;                     // basicConstraints CA:TRUE
};

// Parses the first certificate of `cert_pem`. InvalidArgument when it is not a PEM certificate;
// `what` names the source in the message (a file name).
absl::StatusOr<CertInfo> InspectCertificate(const std::string& cert_pem, const std::string& what = "certificate");

// OK when `key_pem` is the private key of the first certificate in `cert_pem`. InvalidArgument naming
// `what` when either does not parse or the key belongs to another certificate.
absl::Status CheckKeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem,
                                        const std::string& what);

// What IssueCertificate signs.
struct CertRequest {
  std::string common_name;                // subject CN; required (a node name, "gpugeek server")
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries: IPv4 or IPv6 text
  Days validity = Days(365);              // from now (backdated 5 minutes for clock skew); > 0
  bool server_auth = true;                // extendedKeyUsage serverAuth
  bool client_auth = true;                // extendedKeyUsage clientAuth
};

// A signed certificate and its new private key (PKCS#8), both PEM.
struct IssuedCert {
  std::string cert_pem;
  std::string key_pem;
};

// A CA certificate with its private key. A value: copies share nothing mutable.
class CertificateAuthority {
 public:
  // A new self-signed CA: ECDSA P-256, basicConstraints CA:TRUE (critical), keyUsage keyCertSign and
  // cRLSign (critical), valid `validity` from now. InvalidArgument for an empty CN or validity <= 0.
  static absl::StatusOr<CertificateAuthority> Generate(const std::string& common_name, Days validity);
  // From PEM files. NotFound / PermissionDenied naming the file when one cannot be read;
  // InvalidArgument naming the file when it does not parse, the key does not match the certificate, or
  // the certificate is not a CA.
  static absl::StatusOr<CertificateAuthority> Load(const std::string& cert_file, const std::string& key_file);
  // From PEM text; errors as Load, naming `what`.
  static absl::StatusOr<CertificateAuthority> FromPem(const std::string& cert_pem, const std::string& key_pem,
                                                      const std::string& what = "CA");

  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }

 private:
  CertificateAuthority(std::string cert_pem, std::string key_pem)
      : cert_pem_(std::move(cert_pem)), key_pem_(std::move(key_pem)) {}

  std::string cert_pem_;
  std::string key_pem_;
};

// Signs a new ECDSA P-256 key for `request` with `ca`: serial 128 random bits, keyUsage
// digitalSignature (critical), the requested extendedKeyUsage, subjectAltName when any SAN is given,
// authority and subject key identifiers. Valid no longer than the CA. InvalidArgument for an empty CN,
// validity <= 0, neither usage, or an IP address that does not parse; Internal if OpenSSL fails.
absl::StatusOr<IssuedCert> IssueCertificate(const CertificateAuthority& ca, const CertRequest& request);

// Writes `data` to `path` atomically: a temporary file beside it with `mode`, fsync, rename, fsync of the
// directory. Internal (with the errno text) naming the path on failure; `path` is unchanged then.
absl::Status WriteFileAtomically(const std::string& path, const std::string& data, unsigned mode);

struct LocalPkiOptions {
  std::string dir;  // created (0700) if missing; required
  // subjectAltNames of the server certificate. The host's name (gethostname) is added to the DNS names
  // when `add_hostname`.
  std::vector<std::string> dns_names = {"localhost"};
  std::vector<std::string> ip_addresses = {"127.0.0.1", "::1"};
  bool add_hostname = true;
  std::string ca_common_name = "gpugeek local CA";
  std::string server_common_name = "gpugeek server";
  Days ca_validity = Days(3650);
  Days server_validity = Days(365);
  // The server certificate is issued again when it expires within this long.
  Days renew_before = Days(30);
};

// The files of a local PKI (all PEM) and what EnsureLocalPki did.
struct LocalPki {
  std::string ca_cert_file;      // <dir>/ca.crt, 0644: what clients trust
  std::string ca_key_file;       // <dir>/ca.key, 0600
  std::string server_cert_file;  // <dir>/server.crt, 0644
  std::string server_key_file;   // <dir>/server.key, 0600
  bool created_ca = false;       // this call made ca.crt and ca.key
  bool issued_server = false;    // this call (re)issued server.crt and server.key
};

// Makes `options.dir` hold a CA and a server certificate signed by it, reusing what is there:
//  - ca.crt + ca.key both missing: a new CA (and then a new server certificate);
//  - one of them missing, unreadable or not matching: an error naming the file (nothing is replaced, so
//    certificates issued by the old CA are never silently orphaned);
//  - server.crt or server.key missing, expiring within `renew_before`, not signed by this CA, or not
//    matching each other: a new server key and certificate;
//  - otherwise nothing is written and the files keep their bytes.
// Keys are written 0600 and certificates 0644, each atomically (WriteFileAtomically). Errors:
// InvalidArgument (empty dir, a bad SAN, a file that does not parse or match, naming it),
// NotFound/PermissionDenied (a file that cannot be read), Internal (cannot create the directory or write).
// Not safe against a concurrent call on the same directory from another process.
absl::StatusOr<LocalPki> EnsureLocalPki(const LocalPkiOptions& options);

}  // namespace gpugeek::pki
