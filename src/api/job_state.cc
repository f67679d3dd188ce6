#include "api/job_state.h"

#include <cctype>

namespace gpugeek::api {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "PENDING";
    case JobState::kScheduled:
      return "SCHEDULED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "PENDING";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelled}) {
    const std::string_view want = JobStateName(s);
    if (want.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < want.size(); ++i) {
      same = same && std::toupper(static_cast<unsigned char>(name[i])) == want[i];
    }
    if (same) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled; }

bool CanTransition(JobState from, JobState to) {
  if (IsTerminal(from)) return false;
  if (to == JobState::kCancelled) return true;
  switch (from) {
    case JobState::kPending:
      return to == JobState::kScheduled;
    case JobState::kScheduled:
      return to == JobState::kRunning || to == JobState::kPending || to == JobState::kFailed;
    case JobState::kRunning:
      return to == JobState::kSucceeded || to == JobState::kFailed || to == JobState::kPending ||
             to == JobState::kScheduled;
    default:
      return false;
  }
}

}  // namespace gpugeek::api
