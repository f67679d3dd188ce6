#pragma once
// The job state machine (ARCHITECTURE.md, control plane):
//
//   PENDING -> SCHEDULED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
//
// plus the edges recovery needs: SCHEDULED or RUNNING -> PENDING (requeue after a node failure or a
// spot reclaim, from the last checkpoint), RUNNING -> SCHEDULED (an elastic gang re-formed around its
// survivors: every member restarts at the next epoch), and CANCELLED from any non-terminal state. Terminal
// states never change again.

#include <optional>
#include <string_view>

namespace gpugeek::api {

enum class JobState { kPending, kScheduled, kRunning, kSucceeded, kFailed, kCancelled };

std::string_view JobStateName(JobState s);  // "PENDING", "SCHEDULED", ...
// Parses a name as JobStateName prints it (case-insensitive); nullopt when unknown.
std::optional<JobState> ParseJobState(std::string_view name);
bool IsTerminal(JobState s);
// True when the state machine above allows from -> to.
bool CanTransition(JobState from, JobState to);

}  // namespace gpugeek::api
