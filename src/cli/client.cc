#include "cli/client.h"

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cli/config.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::cli {

std::optional<int64_t> ParseDurationSeconds(const std::string& text) {
  if (text == "0") return 0;
  if (text.size() < 2) return std::nullopt;
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return std::nullopt;
  const int64_t n = std::stoll(digits);
  const char unit = text.back();
  const int64_t scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 0;
  if (scale == 0) return std::nullopt;
  return n * scale;
}

void AddClientFlags(CLI::App* sub, ClientFlags* flags) {
  sub->add_option(
      "--server", flags->server,
      fmt::format("Server URL (default: $GPUGEEK_SERVER, the config's profile, else {})", kDefaultServerUrl));
  sub->add_option("--token", flags->token, "API token (default: $GPUGEEK_TOKEN, else the config's profile)");
  sub->add_option("--ca-file", flags->ca_file,
                  "CA certificate to verify an https server with (default: $GPUGEEK_CA_FILE, else the profile's)");
  sub->add_option("--profile", flags->profile,
                  "Config profile to use (default: $GPUGEEK_PROFILE, else the config's current one)");
  sub->add_flag("--json", flags->json, "Print the server's JSON instead of a table");
}

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// A token file holds the token on its first line (as `gpugeek server` writes admin.token).
constexpr uint64_t kMaxTokenFileBytes = 4096;

}  // namespace

absl::StatusOr<Endpoint> ResolveEndpoint(const ClientFlags& flags) {
  Endpoint e{flags.server, flags.token, flags.ca_file};
  if (e.server.empty()) e.server = Env("GPUGEEK_SERVER");
  if (e.token.empty()) e.token = Env("GPUGEEK_TOKEN");
  if (e.ca_file.empty()) e.ca_file = Env("GPUGEEK_CA_FILE");
  if (!e.server.empty() && !e.token.empty()) return e;
  const std::string path = ConfigPath();
  ASSIGN_OR_RETURN(CliConfig config, LoadConfig(path));
  std::string name = flags.profile.empty() ? Env("GPUGEEK_PROFILE") : flags.profile;
  if (name.empty()) name = config.current;
  const Profile* profile = nullptr;
  if (!name.empty()) {
    auto it = config.profiles.find(name);
    if (it == config.profiles.end()) {
      if (!flags.profile.empty() || !Env("GPUGEEK_PROFILE").empty()) {
        return absl::InvalidArgumentError(
            fmt::format("profile '{}' is not in {}; `gpugeek login SERVER --profile {}` adds it", name, path, name));
      }
    } else {
      profile = &it->second;
    }
  }
  // The profile's token and CA go with the profile's server only: a token must not be sent to
  // another server named by --server or $GPUGEEK_SERVER.
  const bool same_server = profile != nullptr && (e.server.empty() || e.server == profile->server);
  if (e.server.empty()) e.server = profile != nullptr && !profile->server.empty() ? profile->server : kDefaultServerUrl;
  if (same_server) {
    if (e.ca_file.empty()) e.ca_file = profile->ca_file;
    if (e.token.empty()) e.token = profile->token;
    if (e.token.empty() && !profile->token_file.empty()) {
      ASSIGN_OR_RETURN(std::string text, ReadFileBounded(profile->token_file, kMaxTokenFileBytes, "token file"));
      e.token = std::string(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))));
    }
  }
  return e;
}

std::string ResolveServerUrl(const ClientFlags& flags) {
  absl::StatusOr<Endpoint> e = ResolveEndpoint(flags);
  return e.ok() ? e->server : kDefaultServerUrl;
}

void Fail(const std::string& cmd, const std::string& message, int code) {
  std::cout.flush();
  std::cerr << "gpugeek " << cmd << ": " << message << "\n";
  throw CLI::RuntimeError(code);
}

std::unique_ptr<http::Client> Connect(const std::string& cmd, const ClientFlags& flags, Duration read_timeout) {
  absl::StatusOr<Endpoint> e = ResolveEndpoint(flags);
  if (!e.ok()) Fail(cmd, std::string(e.status().message()), kExitUsage);
  auto client = http::Client::Create(
      {.base_url = e->server, .read_timeout = read_timeout, .ca_file = e->ca_file, .bearer_token = e->token});
  if (!client.ok()) Fail(cmd, std::string(client.status().message()), kExitUsage);
  return std::move(*client);
}

nlohmann::json OrFail(const std::string& cmd, absl::StatusOr<nlohmann::json> reply) {
  if (!reply.ok()) Fail(cmd, std::string(reply.status().message()));
  return std::move(*reply);
}

nlohmann::json AllPages(const std::string& cmd, http::Client& client, const std::string& path, const std::string& field,
                        nlohmann::json* last_page) {
  nlohmann::json all = nlohmann::json::array();
  const std::string first = path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=1000";
  std::string after;
  for (;;) {
    nlohmann::json page = OrFail(cmd, client.Get(after.empty() ? first : first + "&after=" + UrlEncode(after)));
    for (nlohmann::json& item : page[field]) all.push_back(std::move(item));
    if (!page.contains("next_after") || page["next_after"].is_null()) {
      if (last_page != nullptr) *last_page = std::move(page);
      return all;
    }
    after = page["next_after"].get<std::string>();
  }
}

void PrintJson(const nlohmann::json& j) {
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

namespace {

bool ParseServerTime(const std::string& s, absl::Time* t) {
  std::string err;
  return !s.empty() && absl::ParseTime(absl::RFC3339_full, s, t, &err);
}

}  // namespace

std::string UtcTime(int64_t unix_s) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixSeconds(unix_s), absl::UTCTimeZone());
}

std::string LocalTime(const std::string& server_time) {
  if (server_time.empty()) return "-";
  absl::Time t;
  if (!ParseServerTime(server_time, &t)) return server_time;
  return absl::FormatTime("%Y-%m-%dT%H:%M:%S%Ez", t, absl::LocalTimeZone());
}

std::string Ago(const std::string& server_time, TimePoint now) {
  absl::Time t;
  if (!ParseServerTime(server_time, &t)) return "-";
  const int64_t s = absl::ToInt64Seconds(absl::FromUnixNanos(now.time_since_epoch().count()) - t);
  if (s < 0) return "just now";
  if (s < 120) return fmt::format("{}s ago", s);
  if (s < 7200) return fmt::format("{}m ago", s / 60);
  if (s < 172800) return fmt::format("{}h ago", s / 3600);
  return fmt::format("{}d ago", s / 86400);
}

std::string Text(const nlohmann::json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

std::string GpuSummary(const nlohmann::json& gpus, const std::string& none) {
  std::vector<std::pair<std::string, int>> models;
  if (gpus.is_array()) {
    for (const nlohmann::json& g : gpus) {
      std::string model = g.is_object() ? g.value("model_id", std::string()) : "";
      if (model.empty() && g.is_object()) model = g.value("name", std::string());
      if (model.empty()) model = "?";
      if (!models.empty() && models.back().first == model) {
        ++models.back().second;
      } else {
        models.emplace_back(model, 1);
      }
    }
  }
  std::string out;
  for (const auto& [model, n] : models) out += fmt::format("{}{} x {}", out.empty() ? "" : " + ", n, model);
  return out.empty() ? none : out;
}

std::string Gpus(int64_t milli) {
  if (milli % 1000 == 0) return fmt::format("{}", milli / 1000);
  std::string s = fmt::format("{:.3f}", static_cast<double>(milli) / 1000);
  while (s.back() == '0') s.pop_back();
  return s;
}

std::string DefaultDataDir() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/gpugeek";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.local/share/gpugeek";
}

absl::Status ParseListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  const auto bad = [&] {
    return absl::InvalidArgumentError(fmt::format(
        "--listen '{}' must be HOST:PORT with PORT 0..65535 (e.g. 127.0.0.1:8470; 0 = any free port)", listen));
  };
  if (colon == std::string::npos) return bad();
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &p) || p < 0 || p > 65535) return bad();
  *host = h.empty() ? "127.0.0.1" : h;
  *port = p;
  return absl::OkStatus();
}

std::string ReadFileOrFail(const std::string& cmd, const std::filesystem::path& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadFileBounded(path.string(), 16 << 20, what);
  if (!text.ok()) Fail(cmd, std::string(text.status().message()), kExitUsage);
  return *std::move(text);
}

std::unique_ptr<http::Client> ConnectToAgent(const std::string& cmd) {
  const char* url = std::getenv("GPUGEEK_AGENT_URL");
  const char* token = std::getenv("GPUGEEK_MEMBER_TOKEN");
  if (url == nullptr || *url == '\0' || token == nullptr || *token == '\0') {
    Fail(cmd,
         "GPUGEEK_AGENT_URL and GPUGEEK_MEMBER_TOKEN are not set: run it inside a job's member (its run "
         "command, or gpugeek exec), on an agent with a workload endpoint (--workload-listen)",
         kExitUsage);
  }
  auto client = http::Client::Create({.base_url = url,
                                      .connect_timeout = std::chrono::seconds(3),
                                      .read_timeout = std::chrono::seconds(10),
                                      .bearer_token = token});
  if (!client.ok()) Fail(cmd, fmt::format("GPUGEEK_AGENT_URL {}: {}", url, client.status().message()), kExitUsage);
  return *std::move(client);
}

}  // namespace gpugeek::cli
