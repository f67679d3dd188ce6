#pragma once
// The log route of the REST API: ranged, byte-exact reads of a job member's log with a bounded
// long-poll, over a LogStore.
//
//   GET /v1/jobs/{id}/logs?rank=R&epoch=E&offset=O&limit=L&wait_ms=W
//
// rank: gang rank, default 0. epoch: placement, default the rank's latest. offset: first byte, default
// 0. limit: at most this many bytes, default 256 KiB, 1..1 MiB. wait_ms: 0..10000, default 0; when the
// read is at the end of the log (offset == size) and the job's logs are not complete, the request waits
// up to wait_ms for new bytes (or a state change) and then answers what it has. The answer:
//
//   {"job": "j-00000001", "rank": 0, "epoch": 2, "offset": 0, "next_offset": 12, "size": 12,
//    "data_b64": "<base64 of the raw bytes>", "complete": false, "state": "RUNNING", "exit_code": null,
//    "ranks": 2, "latest_epoch": 2, "epochs": [{"epoch": 1, "size": 40}, {"epoch": 2, "size": 12}]}
//
// `complete` is the job's (read before the bytes): true means no byte will be added to any of its logs,
// so a follower stops once next_offset == size. `epochs` lists the rank's stored placements, oldest
// first; `latest_epoch` is the job's current placement of the rank (it may have no bytes yet), null
// before the rank was first placed (then the default epoch is 0 and the log reads empty).
// Errors: 400 naming the parameter (e.g. "offset: must be an integer >= 0"), 404 for an unknown job.
// A client follows with offset = next_offset and wait_ms > 0 until complete and next_offset == size.

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "controlplane/log_store.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// What the route needs to know of a job, from its owner (the control plane).
struct LogJobInfo {
  std::string tenant;  // the job's owner
  std::string state;   // "PENDING" ... "CANCELLED"
  bool terminal = false;
  // The job is terminal and every member's exit was reported: no more bytes will come.
  bool logs_complete = false;
  std::optional<int> exit_code;  // set once the job ended with one
  int num_ranks = 0;             // gang size (0 while unknown)
  // The latest epoch of each rank that was placed; a rank absent here has not been placed.
  std::map<int, int64_t> latest_epoch;
};

// Returns a job's LogJobInfo, NotFound for an unknown job (the route answers 404). Called on a server
// thread, once per request and once more after a long-poll; it must be thread-safe and not block long.
using LogJobInfoFn = std::function<absl::StatusOr<LogJobInfo>(const std::string& job_id)>;

// Limits of the route's query parameters.
inline constexpr size_t kDefaultLogReadLimit = size_t{256} << 10;
inline constexpr int kMaxLogWaitMs = 10000;

inline constexpr char kLogRoutePattern[] = "/v1/jobs/{id}/logs";

// Serves one GET of kLogRoutePattern from `logs`, asking `job_info` about the job; the caller registers
// it (behind its access rule: a `job_info` that answers NotFound for a job the caller may not see hides
// it as an unknown one). Whoever changes a job's state should call logs.Wake(job) so long-polls return
// at once.
absl::StatusOr<http::Reply> ServeLogs(LogStore& logs, const LogJobInfoFn& job_info, const http::Request& r);

}  // namespace gpugeek::controlplane
