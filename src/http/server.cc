#include "http/server.h"

#include <sys/socket.h>

#include <httplib.h>

#include <regex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "http/status_http.h"

namespace gpugeek::http {

std::string Request::param(const std::string& name) const {
  auto it = path_params.find(name);
  return it == path_params.end() ? std::string() : it->second;
}

std::string Request::query_value(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

absl::StatusOr<nlohmann::json> Request::JsonBody() const {
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(fmt::format("request body is not valid JSON at byte {}: {}", e.byte, e.what()));
  }
}

Reply Reply::Json(const nlohmann::json& j, int status) {
  Reply r;
  r.status = status;
  r.body = DumpJson(j);
  return r;
}

Reply Reply::Text(std::string text, std::string content_type) {
  Reply r;
  r.body = std::move(text);
  r.content_type = std::move(content_type);
  return r;
}

Server::Server(const ServerOptions& options) : options_(options), server_(std::make_unique<httplib::Server>()) {}

Server::~Server() { Stop(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  if (options.threads < 1) return absl::InvalidArgumentError("http server: threads must be >= 1");
  auto server = std::unique_ptr<Server>(new Server(options));
  const int threads = options.threads;
  server->server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server->server_->set_payload_max_length(options.max_body_bytes);
  // Idle keep-alive connections hold a pool thread and delay Stop() by up to this long.
  server->server_->set_keep_alive_timeout(5);
  // Headers and body go out in separate writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms.
  server->server_->set_tcp_nodelay(true);
  return server;
}

void Server::Route(const std::string& method, const std::string& pattern, Handler handler) {
  // "{name}" segments become capture groups; the names are remembered in order.
  std::vector<std::string> names;
  std::string regex;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '{') {
      const size_t close = pattern.find('}', i);
      names.push_back(pattern.substr(i + 1, close - i - 1));
      regex += "([^/]+)";
      i = close + 1;
    } else {
      const char c = pattern[i++];
      if (std::string_view(".+*?^$()[]|\\").find(c) != std::string_view::npos) regex += '\\';
      regex += c;
    }
  }
  auto wrapped = [this, method, pattern, names, handler = std::move(handler)](const httplib::Request& req,
                                                                              httplib::Response& res) {
    const TimePoint start = RealClock().Now();
    Request r;
    r.method = req.method;
    r.path = req.path;
    for (size_t i = 0; i < names.size() && i + 1 < req.matches.size(); ++i)
      r.path_params[names[i]] = req.matches[i + 1];
    for (const auto& [k, v] : req.params) r.query.emplace(k, v);
    for (const auto& [k, v] : req.headers) r.headers[absl::AsciiStrToLower(k)] = v;
    r.body = req.body;
    absl::StatusOr<Reply> reply = absl::InternalError("handler did not run");
    try {
      reply = handler(r);
    } catch (const std::exception& e) {
      spdlog::error("http: handler for {} {} threw: {}", method, pattern, e.what());
      reply = absl::InternalError("internal error");
    }
    if (!reply.ok()) {
      res.status = HttpStatusFor(reply.status());
      res.set_content(DumpJson(ErrorBody(reply.status())), "application/json");
    } else if (reply->stream) {
      res.status = reply->status;
      auto stream = std::move(reply->stream);
      res.set_chunked_content_provider(reply->content_type, [stream](size_t, httplib::DataSink& sink) {
        stream(
            [&sink](const std::string& chunk) { return sink.is_writable() && sink.write(chunk.data(), chunk.size()); });
        sink.done();
        return true;
      });
    } else {
      res.status = reply->status;
      res.set_content(reply->body, reply->content_type);
    }
    if (options_.observer) options_.observer(method, pattern, res.status, RealClock().Now() - start);
  };
  if (method == "GET") {
    server_->Get(regex, wrapped);
  } else if (method == "POST") {
    server_->Post(regex, wrapped);
  } else if (method == "PUT") {
    server_->Put(regex, wrapped);
  } else if (method == "DELETE") {
    server_->Delete(regex, wrapped);
  } else if (method == "PATCH") {
    server_->Patch(regex, wrapped);
  }
}

absl::Status Server::Start() {
  server_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      res.set_content(ErrorBody(absl::NotFoundError(fmt::format("no route for {} {}", req.method, req.path))).dump(),
                      "application/json");
    }
  });
  // SO_REUSEADDR only: a restarted server may bind while old connections sit in TIME_WAIT. cpp-httplib's
  // default adds SO_REUSEPORT, which lets a second process bind a port already in use and take over
  // part of its traffic (a second server on the same port would steal the agents).
  server_->set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  port_ = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                             : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) {
    return absl::UnavailableError(fmt::format(
        "http server: cannot listen on {}:{}: the port is in use, or the address is not this host's; choose "
        "another with --listen HOST:PORT",
        options_.host, options_.port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // cpp-httplib ignores stop() until its accept loop runs; wait for it so Stop() right after Start()
  // (a Ctrl-C during start-up) cannot hang.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return absl::OkStatus();
}

std::string Server::url() const { return fmt::format("http://{}:{}", options_.host, port_); }

void Server::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpugeek::http
