#include "agent/reclaim_notice.h"

#include <algorithm>

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace gpugeek::agent {
namespace {

class InstanceAction final : public ReclaimNoticeSource {
 public:
  InstanceAction(std::string url, std::string host, int port, std::string path)
      : url_(std::move(url)), client_(host, port), path_(std::move(path)) {
    client_.set_connection_timeout(2, 0);
    client_.set_read_timeout(2, 0);
  }
  absl::StatusOr<std::optional<TimePoint>> Poll() override {
    httplib::Result r = client_.Get(path_);
    if (!r) return absl::UnavailableError(fmt::format("{}: {}", url_, httplib::to_string(r.error())));
    if (r->status == 404) return std::optional<TimePoint>();
    if (r->status != 200) return absl::UnavailableError(fmt::format("{}: HTTP {}", url_, r->status));
    if (r->body.size() > 4096) return absl::InvalidArgumentError(fmt::format("{}: a body over 4 KiB", url_));
    absl::StatusOr<TimePoint> at = ParseInstanceAction(r->body);
    if (!at.ok()) return at.status();
    return std::optional<TimePoint>(*at);
  }
  std::string Describe() const override { return "instance metadata " + url_; }

 private:
  std::string url_;
  httplib::Client client_;
  std::string path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReclaimNoticeSource>> InstanceActionNotice(const std::string& url) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        fmt::format("reclaim notice URL '{}' must be http://HOST[:PORT]/PATH, e.g. "
                    "http://169.254.169.254/latest/meta-data/spot/instance-action",
                    url));
  };
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return bad();
  const std::string rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0) return bad();
  std::string host = rest.substr(0, slash);
  int port = 80;
  if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    const std::string digits = host.substr(colon + 1);
    if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return bad();
    port = std::stoi(digits);
    host = host.substr(0, colon);
    if (port < 1 || port > 65535 || host.empty()) return bad();
  }
  return std::unique_ptr<ReclaimNoticeSource>(new InstanceAction(url, host, port, rest.substr(slash)));
}

absl::StatusOr<TimePoint> ParseInstanceAction(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("instance-action: not a JSON object such as {\"action\": \"terminate\", ...}");
  }
  if (!j.contains("time") || !j["time"].is_string()) {
    return absl::InvalidArgumentError("instance-action.time: required, an RFC 3339 time such as 2026-12-02T04:22:00Z");
  }
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, j["time"].get<std::string>(), &t, &err)) {
    return absl::InvalidArgumentError(fmt::format("instance-action.time: {}", err));
  }
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(absl::ToUnixNanos(t))));
}

int64_t NoticeSeconds(TimePoint at, TimePoint now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count();
  return std::clamp<int64_t>((ms + 999) / 1000, 1, 3600);
}

}  // namespace gpugeek::agent
