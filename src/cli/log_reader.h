#pragma once
// Reading job logs from the server for `gpugeek logs` and `gpugeek submit --follow`: ranged reads of
// GET /v1/jobs/{id}/logs (controlplane/log_routes.h), byte-exact, with the server's bounded long-poll
// (wait_ms) when following. Several placements (epochs) of a member are shown in order, each preceded
// by "== attempt K (epoch E) ==" when there is more than one; `--rank all` interleaves the ranks line
// by line with a "[rank N] " prefix (RankLinePrefixer).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "http/client.h"

namespace gpugeek::cli {

// The exit code `gpugeek logs` ends with for a job in `state` with `exit_code` (a number or null):
// SUCCEEDED 0; FAILED its exit code when that is 1..255, else 1; CANCELLED 130 (as a shell reports a
// command ended by SIGINT); any state that has not ended 0.
int JobExitCode(const std::string& state, const nlohmann::json& exit_code);

// Interleaves the output of several ranks line by line: each complete line comes out as
// "[rank N] <line>\n"; a rank's partial last line waits for its end (or Flush).
class RankLinePrefixer {
 public:
  // The complete lines of `bytes` (after what `rank` left partial), prefixed.
  std::string Add(int rank, std::string_view bytes);
  // Each rank's partial line, prefixed and ended with "\n"; nothing is left buffered.
  std::string Flush();

 private:
  std::map<int, std::string> partial_;  // by rank
};

struct LogReadOptions {
  std::string job_id;
  int rank = 0;
  std::optional<int64_t> epoch;  // only this placement; nullopt: every placement in order
  bool follow = false;           // read until the job ends and its log is complete
};

// Reads one member's log from `client`, in ranged requests of up to 1 MiB. Poll makes one request;
// call it until done(). Not thread-safe.
class MemberLogReader {
 public:
  MemberLogReader(http::Client& client, LogReadOptions options);

  // One request, waiting up to `wait_ms` (when following and at the end of the latest placement).
  // Appends the bytes read, and any "== attempt" header, to `*out`. True when it read bytes or moved
  // to the next placement. The server's error otherwise (NotFound for an unknown job, Unavailable when
  // it cannot be reached: the caller may retry).
  absl::StatusOr<bool> Poll(int wait_ms, std::string* out);
  // True once everything was read: without follow, up to the log's end when read; with follow, up to
  // the end of the latest placement once the job's log is complete.
  bool done() const { return done_; }
  // The latest answer of the server ("state", "exit_code", "ranks", ...); null before the first Poll.
  const nlohmann::json& last() const { return last_; }

 private:
  absl::StatusOr<nlohmann::json> Get(int64_t epoch, int wait_ms, bool with_epoch);
  void Plan(const nlohmann::json& answer);  // adds the placements the answer knows of
  void Header(std::string* out);

  http::Client& client_;
  const LogReadOptions options_;
  bool started_ = false;
  bool done_ = false;
  std::vector<int64_t> epochs_;  // placements to show, in order
  size_t current_ = 0;           // index into epochs_
  uint64_t offset_ = 0;          // next byte of epochs_[current_]
  bool headers_ = false;         // more than one placement: each gets a header
  bool header_pending_ = false;  // the current placement's header is not out yet
  char last_char_ = '\n';        // the last byte handed out
  nlohmann::json last_;
};

struct JobLogsOptions {
  std::string job_id;
  std::optional<int> rank = 0;   // nullopt: every rank, interleaved line by line with "[rank N] "
  std::optional<int64_t> epoch;  // only this placement; nullopt: every placement in order
  bool follow = false;           // until the job ends and its logs are complete
  int wait_ms = 10000;           // the server's long-poll per request when following (0..10000)
};

// Reads a job's logs and hands the output to `write` as it arrives: raw bytes for one rank (byte-exact,
// plus "== attempt" headers between placements), prefixed lines for all ranks (a last partial line is
// flushed with a "\n" at the end). Following, an unreachable server is retried 5 times a second apart.
// Returns the server's last answer: its "state" and "exit_code" say how the job stands (JobExitCode).
// Errors: the server's (NotFound for an unknown job, InvalidArgument for a bad rank or epoch).
absl::StatusOr<nlohmann::json> ReadJobLogs(http::Client& client, const JobLogsOptions& options,
                                           const std::function<void(std::string_view)>& write);

}  // namespace gpugeek::cli
