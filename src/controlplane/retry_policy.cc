#include "controlplane/retry_policy.h"

#include <algorithm>

#include <fmt/format.h>

#include "api/quantity.h"

namespace gpugeek::controlplane {

RetryDecision DecideRetry(const api::JobSpec& spec, api::RetryCause cause, int used, std::string_view what) {
  RetryDecision d;
  const std::string_view name = api::RetryCauseName(cause);
  if (!spec.retry) {
    // The default: the infrastructure's failures are retried at once, the job's own are final.
    d.retry = cause == api::RetryCause::kNodeFailure;
    d.attempt = used + 1;
    d.reason = d.retry ? std::string(what) + "; requeued" : std::string(what);
    return d;
  }
  const api::RetrySpec& r = *spec.retry;
  if (std::find(r.on.begin(), r.on.end(), cause) == r.on.end()) {
    d.reason = fmt::format("{}: {}; retry.on does not list {}", name, what, name);
    return d;
  }
  if (used >= r.limit) {
    d.reason = fmt::format("{}: {}; retries exhausted ({} of {})", name, what, used, r.limit);
    return d;
  }
  d.retry = true;
  d.attempt = used + 1;
  // backoff_min x 2^(attempt-1), capped: doubling stops once the cap is reached (no overflow).
  Duration wait = r.backoff_min;
  for (int i = 1; i < d.attempt && wait < r.backoff_max; ++i) wait *= 2;
  d.backoff = std::min(wait, r.backoff_max);
  d.reason = fmt::format("{}: {}; retry {} of {} {}", name, what, d.attempt, r.limit,
                         d.backoff == Duration::zero() ? "at once" : "in " + api::FormatDuration(d.backoff));
  return d;
}

int RetriesUsed(const std::map<std::string, int>& retries, api::RetryCause cause) {
  auto it = retries.find(std::string(api::RetryCauseName(cause)));
  return it == retries.end() ? 0 : it->second;
}

}  // namespace gpugeek::controlplane
