#pragma once
// RetryPolicy: whether a job whose placement ended early is placed again, and after how long.
//
// The job spec's `retry:` (api::RetrySpec) gives each cause its own budget, as dstack and SkyPilot's
// managed jobs separate a job's own failures from the infrastructure's: a job error does not use up
// the node-failure budget. The n-th retry of a cause waits min(backoff_min x 2^(n-1), backoff_max)
// (exponential backoff, as Kubernetes' Job backoffLimit and restart backoff). Without `retry:` the
// default holds: a node failure is retried at once and without limit, an error ends the job FAILED.
// Pure: no clock, no state; the controllers count the retries used (store::JobRecord::retries).

#include <map>
#include <string>
#include <string_view>

#include "api/job_spec.h"
#include "common/clock.h"

namespace gpugeek::controlplane {

struct RetryDecision {
  bool retry = false;
  int attempt = 0;     // this retry's number for its cause, 1-based (when retry)
  Duration backoff{};  // the wait before the job may be placed again (when retry)
  // The reason the event records, e.g. "error: rank 0 on node-a: exit code 1; retry 2 of 3 in 20s",
  // "node-failure: node b lost; retries exhausted (3 of 3)", or `what` itself under the default policy.
  std::string reason;
};

// Decides for a placement of `spec`'s job that ended for `cause`, described by `what`, when the job has
// used `used` retries of that cause so far.
RetryDecision DecideRetry(const api::JobSpec& spec, api::RetryCause cause, int used, std::string_view what);

// The retries of `cause` a job has used, from its record's per-cause counts.
int RetriesUsed(const std::map<std::string, int>& retries, api::RetryCause cause);

}  // namespace gpugeek::controlplane
