#include "controlplane/log_routes.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "common/status_macros.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;

// The query parameter `name` as an integer in [lo, hi], or `fallback` when absent; InvalidArgument
// "<name>: must be <what>" for anything else (an empty value included).
absl::StatusOr<int64_t> IntParam(const Request& r, const std::string& name, int64_t fallback, int64_t lo, int64_t hi,
                                 const std::string& what) {
  auto it = r.query.find(name);
  if (it == r.query.end()) return fallback;
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || n < lo || n > hi || !(v[0] >= '0' && v[0] <= '9')) {
    return absl::InvalidArgumentError(fmt::format("{}: must be {} (got '{}')", name, what, v));
  }
  return static_cast<int64_t>(n);
}

nlohmann::json ToJson(const std::string& id, int rank, int64_t epoch, const LogRange& range, const LogJobInfo& info,
                      std::optional<int64_t> latest_epoch, const std::vector<LogAttempt>& attempts) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const LogAttempt& a : attempts) epochs.push_back({{"epoch", a.epoch}, {"size", a.size}});
  return {{"job", id},
          {"rank", rank},
          {"epoch", epoch},
          {"offset", range.offset},
          {"next_offset", range.next_offset},
          {"size", range.size},
          {"data_b64", absl::Base64Escape(range.data)},
          {"complete", info.logs_complete},
          {"state", info.state},
          {"exit_code", info.exit_code ? nlohmann::json(*info.exit_code) : nlohmann::json()},
          {"ranks", info.num_ranks},
          {"latest_epoch", latest_epoch ? nlohmann::json(*latest_epoch) : nlohmann::json()},
          {"epochs", std::move(epochs)}};
}

absl::StatusOr<LogRange> ReadRange(LogStore& logs, const std::string& tenant, const std::string& id, int rank,
                                   int64_t epoch, uint64_t offset, size_t limit) {
  absl::StatusOr<LogRange> range = logs.Read(tenant, id, rank, epoch, offset, limit);
  if (range.status().code() == absl::StatusCode::kOutOfRange) {
    ASSIGN_OR_RETURN(LogRange end, logs.Read(tenant, id, rank, epoch, 0, 0));
    return absl::InvalidArgumentError(
        fmt::format("offset: {} is past the end of the log ({} bytes)", offset, end.size));
  }
  return range;
}

}  // namespace

absl::StatusOr<Reply> ServeLogs(LogStore& logs, const LogJobInfoFn& job_info, const Request& r) {
  const std::string id = r.param("id");
  if (r.query.count("follow") != 0) {
    return absl::InvalidArgumentError(
        "follow: no longer supported: read from offset=next_offset with wait_ms until complete (gpugeek logs -f)");
  }
  if (!LogStore::ValidJobId(id)) return absl::NotFoundError(fmt::format("no job '{}'", id));
  ASSIGN_OR_RETURN(LogJobInfo info, job_info(id));
  ASSIGN_OR_RETURN(const int64_t rank64, IntParam(r, "rank", 0, 0, 1023, "an integer 0..1023"));
  const int rank = static_cast<int>(rank64);
  std::vector<LogAttempt> attempts = logs.Attempts(id, rank);
  if (info.num_ranks > 0 && rank >= info.num_ranks && attempts.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("rank: must be 0..{} (the job has {} ranks), got {}", info.num_ranks - 1, info.num_ranks, rank));
  }
  // The rank's latest placement: the job's word, else the newest stored log; none before a placement.
  const auto latest_of = [&](const LogJobInfo& i, const std::vector<LogAttempt>& stored) {
    std::optional<int64_t> latest;
    if (auto it = i.latest_epoch.find(rank); it != i.latest_epoch.end()) latest = it->second;
    if (!stored.empty() && (!latest || stored.back().epoch > *latest)) latest = stored.back().epoch;
    return latest;
  };
  std::optional<int64_t> latest = latest_of(info, attempts);
  ASSIGN_OR_RETURN(const int64_t epoch,
                   IntParam(r, "epoch", latest.value_or(0), 0, std::numeric_limits<int64_t>::max(), "an integer >= 0"));
  ASSIGN_OR_RETURN(const int64_t offset,
                   IntParam(r, "offset", 0, 0, std::numeric_limits<int64_t>::max(), "an integer >= 0"));
  ASSIGN_OR_RETURN(const int64_t limit,
                   IntParam(r, "limit", static_cast<int64_t>(kDefaultLogReadLimit), 1,
                            static_cast<int64_t>(kMaxLogReadBytes), fmt::format("an integer 1..{}", kMaxLogReadBytes)));
  ASSIGN_OR_RETURN(const int64_t wait_ms,
                   IntParam(r, "wait_ms", 0, 0, kMaxLogWaitMs, fmt::format("an integer 0..{}", kMaxLogWaitMs)));

  ASSIGN_OR_RETURN(LogRange range, ReadRange(logs, info.tenant, id, rank, epoch, static_cast<uint64_t>(offset),
                                             static_cast<size_t>(limit)));
  if (range.data.empty() && wait_ms > 0 && !info.logs_complete) {
    // At the end of a log that may grow: wait (bounded) on the store's notification, then answer with
    // the job as it is now. The info is read before the bytes, so complete=true covers them all.
    logs.WaitForBytes(id, rank, epoch, static_cast<uint64_t>(offset), std::chrono::milliseconds(wait_ms));
    ASSIGN_OR_RETURN(info, job_info(id));
    ASSIGN_OR_RETURN(range, ReadRange(logs, info.tenant, id, rank, epoch, static_cast<uint64_t>(offset),
                                      static_cast<size_t>(limit)));
  }
  attempts = logs.Attempts(id, rank);
  latest = latest_of(info, attempts);
  return Reply::Json(ToJson(id, rank, epoch, range, info, latest, attempts));
}

}  // namespace gpugeek::controlplane
