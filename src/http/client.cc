#include "http/client.h"

#include <cctype>

#include <httplib.h>

#include <fmt/format.h>

#include "http/status_http.h"

namespace gpugeek::http {
namespace {

absl::Status Unreachable(const std::string& url, const std::string& what, httplib::Error error) {
  return absl::UnavailableError(
      fmt::format("cannot reach gpugeek server at {} ({}): {}", url, what, httplib::to_string(error)));
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
  auto client = std::unique_ptr<Client>(new Client(options));
  client->client_ = std::make_unique<httplib::Client>(u);
  if (!client->client_->is_valid()) return absl::InvalidArgumentError(fmt::format("server URL '{}' is not valid", u));
  const auto connect = std::chrono::duration_cast<std::chrono::microseconds>(options.connect_timeout);
  const auto read = std::chrono::duration_cast<std::chrono::microseconds>(options.read_timeout);
  client->client_->set_connection_timeout(connect);
  client->client_->set_read_timeout(read);
  client->client_->set_keep_alive(true);
  client->client_->set_tcp_nodelay(true);  // see http/server.cc: Nagle + delayed ACK cost ~40 ms a call
  return client;
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
  if (!res) return Unreachable(options_.base_url, "GET " + path, res.error());
  return Decode("GET " + path, res->status, res->body);
}

absl::StatusOr<std::string> Client::GetText(const std::string& path) {
  auto res = client_->Get(path);
  if (!res) return Unreachable(options_.base_url, "GET " + path, res.error());
  if (res->status < 200 || res->status >= 300) return StatusFromHttp(res->status, res->body);
  return res->body;
}

absl::StatusOr<nlohmann::json> Client::Post(const std::string& path, const nlohmann::json& body) {
  auto res = client_->Post(path, DumpJson(body), "application/json");
  if (!res) return Unreachable(options_.base_url, "POST " + path, res.error());
  return Decode("POST " + path, res->status, res->body);
}

absl::StatusOr<nlohmann::json> Client::Delete(const std::string& path) {
  auto res = client_->Delete(path);
  if (!res) return Unreachable(options_.base_url, "DELETE " + path, res.error());
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
  if (!res && res.error() != httplib::Error::Canceled)
    return Unreachable(options_.base_url, "GET " + path, res.error());
  if (status != 0 && (status < 200 || status >= 300)) return StatusFromHttp(status, error_body);
  return absl::OkStatus();
}

}  // namespace gpugeek::http
