#include "http/client.h"

#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

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

// Whether the answer is a standby's (it did nothing with the request).
bool IsStandby(const httplib::Response& r) { return r.get_header_value(kStandbyHeader) == "1"; }

// Whether the request was never sent: no connection (refused, unresolvable, connect timeout) or no TLS
// session (handshake or verification failed). Only then may any request, a POST included, go elsewhere.
bool NeverSent(httplib::Error e) {
  return e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout ||
         e == httplib::Error::SSLConnection || e == httplib::Error::SSLServerVerification;
}

// "scheme://host:port" of a URL in lower case, the port made explicit (80/443 when absent), to compare a
// standby's Location with the listed servers; "" for a URL without a scheme.
std::string OriginOf(const std::string& url) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos || sep == 0) return "";
  const std::string scheme = absl::AsciiStrToLower(url.substr(0, sep));
  const size_t end = url.find_first_of("/?#", sep + 3);
  std::string authority = absl::AsciiStrToLower(url.substr(sep + 3, end == std::string::npos ? end : end - sep - 3));
  const size_t colon = authority.rfind(':');
  const size_t bracket = authority.rfind(']');  // an IPv6 literal's colons are not a port's
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    authority += scheme == "https" ? ":443" : ":80";
  }
  return scheme + "://" + authority;
}

}  // namespace

struct Client::Answer {
  httplib::Result result;
  size_t url = 0;  // index into urls_ of the server that gave it
};

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
  std::vector<std::string> urls;
  for (absl::string_view item : absl::StrSplit(options.base_url, ','))
    urls.emplace_back(absl::StripAsciiWhitespace(item));
  // Names the list too when the bad URL is one item of several.
  const std::string in = urls.size() > 1 ? fmt::format(" (in the list '{}')", options.base_url) : "";
  for (const std::string& u : urls) {
    if (!(u.starts_with("http://") || u.starts_with("https://")) || u.find(':', 6) == std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("server URL '{}'{} must look like http://HOST:PORT (e.g. http://127.0.0.1:8470)", u, in));
    }
    if (u.starts_with("https://") && options.ca_file.empty() && options.ca_pem.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("server URL '{}'{} is https: give the CA to verify the server with (ca_file, e.g. the server's "
                      "tls/ca.crt)",
                      u, in));
    }
  }
  if (options.client_cert_file.empty() != options.client_key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both client_cert_file and client_key_file");
  }
  auto client = std::unique_ptr<Client>(new Client(options));
  for (const std::string& u : urls) {
    auto c = std::make_unique<httplib::Client>(u);
    if (!c->is_valid()) return absl::InvalidArgumentError(fmt::format("server URL '{}'{} is not valid", u, in));
    if (u.starts_with("https://")) RETURN_IF_ERROR(client->ConfigureTls(*c));
    if (!options.bearer_token.empty()) c->set_bearer_token_auth(options.bearer_token);
    if (!options.headers.empty()) {
      httplib::Headers headers;
      for (const auto& [name, value] : options.headers) headers.emplace(name, value);
      c->set_default_headers(std::move(headers));
    }
    c->set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.connect_timeout));
    c->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.read_timeout));
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);  // see http/server.cc: Nagle + delayed ACK cost ~40 ms a call
    client->urls_.push_back(u);
    client->origins_.push_back(OriginOf(u));
    client->clients_.push_back(std::move(c));
  }
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

absl::Status Client::ConfigureTls(httplib::Client& client) {
  SSL_CTX* ctx = client.ssl_context();
  if (ctx == nullptr) return absl::InternalError("cpp-httplib made no TLS context for an https URL");
  RETURN_IF_ERROR(ConfigureClientTls(ctx, options_));
  client.set_ca_cert_path("", kNoSystemCaDir);
  client.enable_server_certificate_verification(true);
  return absl::OkStatus();
}

absl::Status Client::Unreachable(size_t url, const std::string& what, int error) const {
  const auto e = static_cast<httplib::Error>(error);
  std::string detail = httplib::to_string(e);
  if (e == httplib::Error::SSLServerVerification) {
    const long result = clients_[url]->get_openssl_verify_result();
    detail += result == X509_V_OK ? ": the certificate does not name this host (subjectAltName)"
                                  : fmt::format(": {} (verified against {})", X509_verify_cert_error_string(result),
                                                options_.ca_file.empty() ? "ca_pem" : options_.ca_file);
  }
  // Why a handshake or a read over TLS failed (a refused client certificate, an old protocol version).
  if (const std::string ssl = DrainOpenSslErrors(); !ssl.empty()) detail += " (" + ssl + ")";
  return absl::UnavailableError(fmt::format("cannot reach gpugeek server at {} ({}): {}", urls_[url], what, detail));
}

std::string Client::current_base_url() const { return urls_[current_.load()]; }

absl::StatusOr<Client::Answer> Client::Exchange(const std::string& what,
                                                const std::function<httplib::Result(httplib::Client&)>& exchange,
                                                bool safe_to_repeat) {
  const auto start = std::chrono::steady_clock::now();
  const uint64_t epoch = cancel_epoch_.load();
  auto cancelled = [&] {
    return absl::UnavailableError(fmt::format("{} to {}: cancelled", what, urls_[current_.load()]));
  };
  const size_t n = urls_.size();
  size_t i = current_.load();
  std::vector<bool> tried(n, false);     // in this call
  std::vector<bool> in_round(n, false);  // since the last backoff
  std::string reason;                    // why the last server tried gave no leader's answer
  for (;;) {
    // Published before the check, and Cancel() bumps the epoch before it reads active_: either this call
    // sees the Cancel, or the Cancel stops this client.
    active_.store(static_cast<int>(i));
    if (cancel_epoch_.load() != epoch) {
      active_.store(-1);
      return cancelled();
    }
    httplib::Result res = exchange(*clients_[i]);
    active_.store(-1);
    tried[i] = true;
    in_round[i] = true;
    // Where to go next: a listed server a standby redirects to, else the next in the list. Only to one
    // not yet tried this round, so that standbys naming each other (a stale view) cannot starve the rest.
    std::optional<size_t> next;
    if (res && IsStandby(*res)) {
      // The leader it names: its base URL, or the origin of the Location it redirects to.
      const std::string location = res->status == 307 ? res->get_header_value("Location") : "";
      std::string leader = res->get_header_value(kLeaderHeader);
      if (leader.empty() && !location.empty()) leader = OriginOf(location);
      if (n == 1) {
        return absl::UnavailableError(
            leader.empty()
                ? fmt::format("{} is a standby server and knows no leader yet (an election is under way); {} was "
                              "not run: retry shortly",
                              urls_[i], what)
                : fmt::format("{} is a standby server; the leader is at {} ({} was not run; give the leader's "
                              "URL, or both comma-separated to fail over)",
                              urls_[i], leader, what));
      }
      bool listed = false;
      const std::string origin = OriginOf(location);
      for (size_t j = 0; j < n && !location.empty(); ++j) {
        if (origins_[j] == origin) {
          listed = true;
          if (!in_round[j]) next = j;
          break;
        }
      }
      reason = leader.empty() ? fmt::format("{} is a standby and knows no leader", urls_[i])
                              : fmt::format("{} is a standby; the leader is at {}{}", urls_[i], leader,
                                            listed ? "" : " (not a listed server, so not asked)");
    } else if (n > 1 && !res && (safe_to_repeat || NeverSent(res.error()))) {
      reason = std::string(Unreachable(i, what, static_cast<int>(res.error())).message());
    } else if (n > 1 && !res) {
      // Sent, then no answer (a read timeout, a reset): the request may have run, so it is not repeated, but
      // the next call starts at the next server (one frozen server must not hold every later call).
      current_.store((i + 1) % n);
      return Answer{std::move(res), i};
    } else {
      // A leader's answer, or a failure after the request may have reached a server (or one URL only).
      current_.store(i);
      return Answer{std::move(res), i};
    }
    if (cancel_epoch_.load() != epoch) return cancelled();
    const auto timeout_at = start + options_.failover_timeout;
    auto give_up = [&] {
      std::vector<std::string> names;
      for (size_t j = 0; j < n; ++j) {
        if (tried[j]) names.push_back(urls_[j]);
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      return absl::UnavailableError(fmt::format("no leader among {} ({}; looked for {} ms): {}",
                                                absl::StrJoin(names, ", "), what, ms.count(), reason));
    };
    const bool all_tried = std::all_of(tried.begin(), tried.end(), [](bool t) { return t; });
    if (all_tried && std::chrono::steady_clock::now() >= timeout_at) return give_up();
    for (size_t k = 1; !next && k < n; ++k) {
      if (!in_round[(i + k) % n]) next = (i + k) % n;
    }
    if (!next) {  // a full round without a leader's answer
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, std::min(std::chrono::steady_clock::now() + options_.failover_backoff, timeout_at),
                     [&] { return cancel_epoch_.load() != epoch; });
      lock.unlock();
      if (cancel_epoch_.load() != epoch) return cancelled();
      if (std::chrono::steady_clock::now() >= timeout_at) return give_up();
      std::fill(in_round.begin(), in_round.end(), false);
      next = (i + 1) % n;
    }
    i = *next;
  }
}

absl::StatusOr<nlohmann::json> Client::Decode(const std::string& what, int status, const std::string& body) {
  if (status < 200 || status >= 300) return StatusFromHttp(status, body);
  if (body.empty()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(fmt::format("{}: the server's reply is not JSON", what));
  return j;
}

absl::StatusOr<nlohmann::json> Client::Get(const std::string& path) {
  const std::string what = "GET " + path;
  ASSIGN_OR_RETURN(Answer a, Exchange(
                                 what, [&](httplib::Client& c) { return c.Get(path); }, /*safe_to_repeat=*/true));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  return Decode(what, a.result->status, a.result->body);
}

absl::StatusOr<Client::Reply> Client::Send(const std::string& method, const std::string& path) {
  if (method != "GET" && method != "DELETE") return absl::InvalidArgumentError("Send: GET or DELETE");
  const std::string what = method + " " + path;
  ASSIGN_OR_RETURN(
      Answer a, Exchange(what, [&](httplib::Client& c) { return method == "DELETE" ? c.Delete(path) : c.Get(path); }));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  return Reply{a.result->status, a.result->body};
}

absl::StatusOr<std::string> Client::GetText(const std::string& path) {
  const std::string what = "GET " + path;
  ASSIGN_OR_RETURN(Answer a, Exchange(
                                 what, [&](httplib::Client& c) { return c.Get(path); }, /*safe_to_repeat=*/true));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  if (a.result->status < 200 || a.result->status >= 300) return StatusFromHttp(a.result->status, a.result->body);
  return std::move(a.result->body);
}

absl::StatusOr<nlohmann::json> Client::Post(const std::string& path, const nlohmann::json& body) {
  const std::string what = "POST " + path;
  const std::string json = DumpJson(body);
  ASSIGN_OR_RETURN(Answer a,
                   Exchange(what, [&](httplib::Client& c) { return c.Post(path, json, "application/json"); }));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  return Decode(what, a.result->status, a.result->body);
}

absl::StatusOr<nlohmann::json> Client::Put(const std::string& path, const nlohmann::json& body) {
  return PutBytes(path, DumpJson(body), "application/json");
}

absl::StatusOr<nlohmann::json> Client::PutBytes(const std::string& path, const std::string& body,
                                                const std::string& content_type) {
  const std::string what = "PUT " + path;
  ASSIGN_OR_RETURN(Answer a, Exchange(what, [&](httplib::Client& c) { return c.Put(path, body, content_type); }));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  return Decode(what, a.result->status, a.result->body);
}

absl::Status Client::Head(const std::string& path) {
  const std::string what = "HEAD " + path;
  ASSIGN_OR_RETURN(Answer a, Exchange(
                                 what, [&](httplib::Client& c) { return c.Head(path); }, /*safe_to_repeat=*/true));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  if (a.result->status >= 200 && a.result->status < 300) return absl::OkStatus();
  return StatusFromHttp(a.result->status, "");
}

absl::StatusOr<nlohmann::json> Client::Delete(const std::string& path) {
  const std::string what = "DELETE " + path;
  ASSIGN_OR_RETURN(Answer a, Exchange(what, [&](httplib::Client& c) { return c.Delete(path); }));
  if (!a.result) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  return Decode(what, a.result->status, a.result->body);
}

absl::Status Client::GetStream(const std::string& path, const std::function<bool(const std::string&)>& on_chunk) {
  const std::string what = "GET " + path;
  int status = 0;
  std::string error_body;
  // A standby's answer is not 2xx, so its body lands in error_body, which each attempt starts afresh.
  ASSIGN_OR_RETURN(Answer a, Exchange(what, [&](httplib::Client& c) {
                     status = 0;
                     error_body.clear();
                     return c.Get(
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
                   }));
  if (!a.result && a.result.error() != httplib::Error::Canceled) {
    return Unreachable(a.url, what, static_cast<int>(a.result.error()));
  }
  if (status != 0 && (status < 200 || status >= 300)) return StatusFromHttp(status, error_body);
  return absl::OkStatus();
}

void Client::Cancel() {
  cancel_epoch_.fetch_add(1);
  {
    // Taken so that a call between its check of the epoch and its wait on cv_ cannot miss the notify.
    std::lock_guard<std::mutex> lock(mu_);
  }
  cv_.notify_all();
  if (const int i = active_.load(); i >= 0) clients_[static_cast<size_t>(i)]->stop();
}

absl::Status Client::PostStream(const std::string& path, const nlohmann::json& body,
                                const std::function<void(int status)>& on_head,
                                const std::function<bool(const std::string&)>& on_chunk) {
  const std::string what = "POST " + path;
  const std::string json = DumpJson(body);
  int status = 0;
  std::string error_body;
  ASSIGN_OR_RETURN(Answer a, Exchange(what, [&](httplib::Client& c) {
                     status = 0;
                     error_body.clear();
                     // A Request of its own for each attempt: sending one adds headers (Host) to it.
                     httplib::Request req;
                     req.method = "POST";
                     req.path = path;
                     req.body = json;
                     req.set_header("Content-Type", "application/json");
                     req.response_handler = [&](const httplib::Response& r) {
                       status = r.status;
                       if (on_head && !IsStandby(r)) on_head(status);  // a standby's head fails over
                       return true;
                     };
                     req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
                       if (status < 200 || status >= 300) {
                         if (error_body.size() < (64 << 10)) error_body.append(data, size);
                         return true;
                       }
                       return on_chunk(std::string(data, size));
                     };
                     return c.send(req);
                   }));
  if (!a.result && a.result.error() != httplib::Error::Canceled) {
    if (status == 0) return Unreachable(a.url, what, static_cast<int>(a.result.error()));
    if (status >= 200 && status < 300) {
      return absl::UnavailableError(fmt::format("POST {} at {}: the stream broke off ({})", path, urls_[a.url],
                                                httplib::to_string(a.result.error())));
    }
  }
  if (status != 0 && (status < 200 || status >= 300)) return StatusFromHttp(status, error_body);
  return absl::OkStatus();
}

}  // namespace gpugeek::http
