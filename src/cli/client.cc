#include "cli/client.h"

#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "common/absl_fmt.h"

namespace gpugeek::cli {

void AddClientFlags(CLI::App* sub, ClientFlags* flags) {
  sub->add_option("--server", flags->server,
                  fmt::format("Server URL (default: $GPUGEEK_SERVER, else {})", kDefaultServerUrl));
  sub->add_flag("--json", flags->json, "Print the server's JSON instead of a table");
}

std::string ResolveServerUrl(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GPUGEEK_SERVER"); env != nullptr && *env != '\0') return env;
  return kDefaultServerUrl;
}

void Fail(const std::string& cmd, const std::string& message, int code) {
  std::cout.flush();
  std::cerr << "gpugeek " << cmd << ": " << message << "\n";
  throw CLI::RuntimeError(code);
}

std::unique_ptr<http::Client> Connect(const std::string& cmd, const ClientFlags& flags, Duration read_timeout) {
  auto client = http::Client::Create({.base_url = ResolveServerUrl(flags.server), .read_timeout = read_timeout});
  if (!client.ok()) Fail(cmd, std::string(client.status().message()), kExitUsage);
  return std::move(*client);
}

nlohmann::json OrFail(const std::string& cmd, absl::StatusOr<nlohmann::json> reply) {
  if (!reply.ok()) Fail(cmd, std::string(reply.status().message()));
  return std::move(*reply);
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

}  // namespace gpugeek::cli
