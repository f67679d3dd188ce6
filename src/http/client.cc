#include "http/client.h"

#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cctype>
#include <memory>

#include <fmt/format.h>

#include "common/file.h"
#include "common/status_macros.h"
#include "http/client_tls.h"
#include "http/status_http.h"

namespace gpugeek::http {
namespace {

// Certificates and keys are a few KiB; a path to something large is a mistake.
constexpr uint64_t kMaxPemBytes = 1 << 20;
// cpp-httplib loads the system's CA directory unless told of a CA file or directory. Our CAs are set on
// the context directly, so it is given this directory, which does not exist: OpenSSL only looks there
// for a certificate by subject hash and finds none, and the server is verified against our CAs only.
constexpr char kNoSystemCaDir[] = "/nonexistent/gpugeek-trusts-only-its-own-ca";

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// This thread's OpenSSL errors as one line ("" when none), and the queue emptied.
std::string DrainOpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out;
}

// Every certificate in `pem`, in order. InvalidArgument naming `what` when there is none.
absl::StatusOr<std::vector<std::unique_ptr<X509, X509Free>>> ParseCerts(const std::string& pem,
                                                                        const std::string& what) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<std::unique_ptr<X509, X509Free>> certs;
  while (bio) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of the input reads as an error
  if (certs.empty()) {
    return absl::InvalidArgumentError(fmt::format("{} holds no PEM certificate (BEGIN CERTIFICATE)", what));
  }
  return certs;
}

}  // namespace

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

Client::Client(const ClientOptions& options) : options_(options) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  const std::string& u = options.base_url;
  if (!(u.starts_with("http://") || u.starts_with("https://")) || u.find(':', 6) == std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("server URL '{}' must look like http://HOST:PORT (e.g. http://127.0.0.1:8470)", u));
  }
  const bool tls = u.starts_with("https://");
  if (tls && options.ca_file.empty() && options.ca_pem.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("server URL '{}' is https: give the CA to verify the server with (ca_file, e.g. the server's "
                    "tls/ca.crt)",
                    u));
  }
  if (options.client_cert_file.empty() != options.client_key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both client_cert_file and client_key_file");
  }
  auto client = std::unique_ptr<Client>(new Client(options));
  client->client_ = std::make_unique<httplib::Client>(u);
  if (!client->client_->is_valid()) return absl::InvalidArgumentError(fmt::format("server URL '{}' is not valid", u));
  if (tls) RETURN_IF_ERROR(client->ConfigureTls());
  if (!options.bearer_token.empty()) client->client_->set_bearer_token_auth(options.bearer_token);
  if (!options.headers.empty()) {
    httplib::Headers headers;
    for (const auto& [name, value] : options.headers) headers.emplace(name, value);
    client->client_->set_default_headers(std::move(headers));
  }
  const auto connect = std::chrono::duration_cast<std::chrono::microseconds>(options.connect_timeout);
  const auto read = std::chrono::duration_cast<std::chrono::microseconds>(options.read_timeout);
  client->client_->set_connection_timeout(connect);
  client->client_->set_read_timeout(read);
  client->client_->set_keep_alive(true);
  client->client_->set_tcp_nodelay(true);  // see http/server.cc: Nagle + delayed ACK cost ~40 ms a call
  return client;
}

absl::Status ConfigureClientTls(SSL_CTX* ctx, const ClientOptions& options) {
  // TLS 1.3 only, as our servers: an older server or a downgrade is refused.
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
    return absl::InternalError("cannot restrict the TLS context to TLS 1.3");
  }
  std::string ca_pem = options.ca_pem;
  std::string ca_what = "ca_pem";
  if (!options.ca_file.empty()) {
    ca_what = "CA file " + options.ca_file;
    ASSIGN_OR_RETURN(ca_pem, ReadFileBounded(options.ca_file, kMaxPemBytes, ca_what));
  }
  ASSIGN_OR_RETURN(auto cas, ParseCerts(ca_pem, ca_what));
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  if (!store) return absl::InternalError("X509_STORE_new failed");
  for (const auto& ca : cas) {
    if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
      return absl::InvalidArgumentError(
          fmt::format("{}: cannot add a CA certificate: {}", ca_what, DrainOpenSslErrors()));
    }
  }
  SSL_CTX_set_cert_store(ctx, store.release());  // the context owns it from here

  if (!options.client_cert_file.empty()) {
    const std::string cert_what = "client certificate " + options.client_cert_file;
    const std::string key_what = "client key " + options.client_key_file;
    ASSIGN_OR_RETURN(const std::string cert_pem, ReadFileBounded(options.client_cert_file, kMaxPemBytes, cert_what));
    ASSIGN_OR_RETURN(const std::string key_pem, ReadFileBounded(options.client_key_file, kMaxPemBytes, key_what));
    ASSIGN_OR_RETURN(auto chain, ParseCerts(cert_pem, cert_what));
    if (SSL_CTX_use_certificate(ctx, chain[0].get()) != 1) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", cert_what, DrainOpenSslErrors()));
    }
    for (size_t i = 1; i < chain.size(); ++i) {
      if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) {
        return absl::InvalidArgumentError(fmt::format("{}: {}", cert_what, DrainOpenSslErrors()));
      }
    }
    std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
    std::unique_ptr<EVP_PKEY, PkeyFree> key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                                                : nullptr);
    if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1) {
      return absl::InvalidArgumentError(
          fmt::format("{} is not an unencrypted PEM private key: {}", key_what, DrainOpenSslErrors()));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      DrainOpenSslErrors();
      return absl::InvalidArgumentError(
          fmt::format("{} does not belong to {}; use the pair issued together", key_what, cert_what));
    }
  }
  return absl::OkStatus();
}

absl::Status Client::ConfigureTls() {
  SSL_CTX* ctx = client_->ssl_context();
  if (ctx == nullptr) return absl::InternalError("cpp-httplib made no TLS context for an https URL");
  RETURN_IF_ERROR(ConfigureClientTls(ctx, options_));
  client_->set_ca_cert_path("", kNoSystemCaDir);
  client_->enable_server_certificate_verification(true);
  return absl::OkStatus();
}

absl::Status Client::Unreachable(const std::string& what, int error) const {
  const auto e = static_cast<httplib::Error>(error);
  std::string detail = httplib::to_string(e);
  if (e == httplib::Error::SSLServerVerification) {
    const long result = client_->get_openssl_verify_result();
    detail += result == X509_V_OK ? ": the certificate does not name this host (subjectAltName)"
                                  : fmt::format(": {} (verified against {})", X509_verify_cert_error_string(result),
                                                options_.ca_file.empty() ? "ca_pem" : options_.ca_file);
  }
  // Why a handshake or a read over TLS failed (a refused client certificate, an old protocol version).
  if (const std::string ssl = DrainOpenSslErrors(); !ssl.empty()) detail += " (" + ssl + ")";
  return absl::UnavailableError(
      fmt::format("cannot reach gpugeek server at {} ({}): {}", options_.base_url, what, detail));
}

absl::StatusOr<nlohmann::json> Client::Decode(const std::string& what, int status, const std::string& body) {
  if (status < 200 || status >= 300) return StatusFromHttp(status, body);
  if (body.empty()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(fmt::format("{}: the server's reply is not JSON", what));
  return j;
}

absl::StatusOr<nlohmann::json> Client::Get(const std::string& path) {
  auto res = client_->Get(path);
  if (!res) return Unreachable("GET " + path, static_cast<int>(res.error()));
  return Decode("GET " + path, res->status, res->body);
}

absl::StatusOr<Client::Reply> Client::Send(const std::string& method, const std::string& path) {
  if (method != "GET" && method != "DELETE") return absl::InvalidArgumentError("Send: GET or DELETE");
  httplib::Result res = method == "DELETE" ? client_->Delete(path) : client_->Get(path);
  if (!res) return Unreachable(method + " " + path, static_cast<int>(res.error()));
  return Reply{res->status, res->body};
}

absl::StatusOr<std::string> Client::GetText(const std::string& path) {
  auto res = client_->Get(path);
  if (!res) return Unreachable("GET " + path, static_cast<int>(res.error()));
  if (res->status < 200 || res->status >= 300) return StatusFromHttp(res->status, res->body);
  return res->body;
}

absl::StatusOr<nlohmann::json> Client::Post(const std::string& path, const nlohmann::json& body) {
  auto res = client_->Post(path, DumpJson(body), "application/json");
  if (!res) return Unreachable("POST " + path, static_cast<int>(res.error()));
  return Decode("POST " + path, res->status, res->body);
}

absl::StatusOr<nlohmann::json> Client::Put(const std::string& path, const nlohmann::json& body) {
  auto res = client_->Put(path, DumpJson(body), "application/json");
  if (!res) return Unreachable("PUT " + path, static_cast<int>(res.error()));
  return Decode("PUT " + path, res->status, res->body);
}

absl::StatusOr<nlohmann::json> Client::PutBytes(const std::string& path, const std::string& body,
                                                const std::string& content_type) {
  auto res = client_->Put(path, body, content_type);
  if (!res) return Unreachable("PUT " + path, static_cast<int>(res.error()));
  return Decode("PUT " + path, res->status, res->body);
}

absl::Status Client::Head(const std::string& path) {
  auto res = client_->Head(path);
  if (!res) return Unreachable("HEAD " + path, static_cast<int>(res.error()));
  if (res->status >= 200 && res->status < 300) return absl::OkStatus();
  return StatusFromHttp(res->status, "");
}

absl::StatusOr<nlohmann::json> Client::Delete(const std::string& path) {
  auto res = client_->Delete(path);
  if (!res) return Unreachable("DELETE " + path, static_cast<int>(res.error()));
  return Decode("DELETE " + path, res->status, res->body);
}

absl::Status Client::GetStream(const std::string& path, const std::function<bool(const std::string&)>& on_chunk) {
  int status = 0;
  std::string error_body;
  auto res = client_->Get(
      path,
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t size) {
        if (status < 200 || status >= 300) {
          error_body.append(data, size);
          return true;
        }
        return on_chunk(std::string(data, size));
      });
  if (!res && res.error() != httplib::Error::Canceled) return Unreachable("GET " + path, static_cast<int>(res.error()));
  if (status != 0 && (status < 200 || status >= 300)) return StatusFromHttp(status, error_body);
  return absl::OkStatus();
}

void Client::Cancel() { client_->stop(); }

absl::Status Client::PostStream(const std::string& path, const nlohmann::json& body,
                                const std::function<void(int status)>& on_head,
                                const std::function<bool(const std::string&)>& on_chunk) {
  int status = 0;
  std::string error_body;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = DumpJson(body);
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    if (on_head) on_head(status);
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status < 200 || status >= 300) {
      if (error_body.size() < (64 << 10)) error_body.append(data, size);
      return true;
    }
    return on_chunk(std::string(data, size));
  };
  auto res = client_->send(req);
  if (!res && res.error() != httplib::Error::Canceled) {
    if (status == 0) return Unreachable("POST " + path, static_cast<int>(res.error()));
    if (status >= 200 && status < 300) {
      return absl::UnavailableError(fmt::format("POST {} at {}: the stream broke off ({})", path, options_.base_url,
                                                httplib::to_string(res.error())));
    }
  }
  if (status != 0 && (status < 200 || status >= 300)) return StatusFromHttp(status, error_body);
  return absl::OkStatus();
}

}  // namespace gpugeek::http
