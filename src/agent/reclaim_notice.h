#pragma once
// Where a spot node learns that its provider takes it back, behind one interface: the agent polls its
// source (AgentOptions::reclaim_notice, every reclaim_poll) and, on the first notice, tells the server
// (POST /v1/agents/{node}/reclaim {"deadline_s": N}, authenticated by the node credential), which then
// checkpoints and moves the node's jobs before the deadline (docs/capacity.md).
//
// InstanceActionNotice reads the format of AWS EC2's instance metadata, which other providers' shims
// and local test servers can serve as well:
//   GET <url>   (e.g. http://169.254.169.254/latest/meta-data/spot/instance-action)
//     404                                  no notice
//     200 {"action": "terminate", "time": "2026-12-02T04:22:00Z"}   the node goes at `time`
// (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html). Plain
// http:// only, no IMDSv2 session token: instances that require IMDSv2 need a local proxy for now.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpugeek::agent {

class ReclaimNoticeSource {
 public:
  virtual ~ReclaimNoticeSource() = default;
  // The time the node goes away (wall clock) once a notice is out; nullopt while there is none. An
  // error (the source unreachable, a malformed answer) is logged by the caller and polled again.
  virtual absl::StatusOr<std::optional<TimePoint>> Poll() = 0;
  virtual std::string Describe() const = 0;  // for log lines: "instance metadata http://..."
};

// The instance-action document above, from `url` ("http://HOST:PORT/PATH"). InvalidArgument for a URL
// that is not http://host:port/path (port optional: 80).
absl::StatusOr<std::unique_ptr<ReclaimNoticeSource>> InstanceActionNotice(const std::string& url);

// Parses the instance-action body: the time of {"action": ..., "time": RFC 3339}. InvalidArgument
// naming the field otherwise.
absl::StatusOr<TimePoint> ParseInstanceAction(const std::string& body);

// Seconds from `now` to `at`, rounded up, clamped to 1..3600: what the server's reclaim takes.
int64_t NoticeSeconds(TimePoint at, TimePoint now);

}  // namespace gpugeek::agent
