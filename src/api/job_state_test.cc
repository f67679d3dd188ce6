#include "api/job_state.h"

#include <gtest/gtest.h>

namespace gpugeek::api {
namespace {

constexpr JobState kAll[] = {JobState::kPending,   JobState::kScheduled, JobState::kRunning,
                             JobState::kSucceeded, JobState::kFailed,    JobState::kCancelled};

TEST(JobState, HappyPathAndRecoveryEdges) {
  EXPECT_TRUE(CanTransition(JobState::kPending, JobState::kScheduled));
  EXPECT_TRUE(CanTransition(JobState::kScheduled, JobState::kRunning));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kSucceeded));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kFailed));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kPending));    // requeue after node loss
  EXPECT_TRUE(CanTransition(JobState::kScheduled, JobState::kPending));  // node lost before start
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kScheduled));  // an elastic gang re-formed
  EXPECT_FALSE(CanTransition(JobState::kPending, JobState::kRunning));   // must be placed first
  EXPECT_FALSE(CanTransition(JobState::kPending, JobState::kSucceeded));
}

TEST(JobState, TerminalStatesNeverChange) {
  int allowed = 0;
  for (JobState from : kAll) {
    for (JobState to : kAll) {
      if (IsTerminal(from)) {
        EXPECT_FALSE(CanTransition(from, to)) << JobStateName(from);
      }
      allowed += CanTransition(from, to);
    }
  }
  // PENDING: 2 (SCHEDULED, CANCELLED); SCHEDULED: 4; RUNNING: 5.
  EXPECT_EQ(allowed, 11);
}

TEST(JobState, NamesRoundTrip) {
  for (JobState s : kAll) EXPECT_EQ(ParseJobState(JobStateName(s)), s);
  EXPECT_EQ(ParseJobState("running"), JobState::kRunning);
  EXPECT_EQ(ParseJobState("sleeping"), std::nullopt);
}

}  // namespace
}  // namespace gpugeek::api
