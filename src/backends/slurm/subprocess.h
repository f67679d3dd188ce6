#pragma once
// Runs a Slurm command-line tool (sbatch) as a child process: its stdin from a string, stdout and stderr
// apart, a deadline, and an environment of our choosing (so nothing of the caller's environment, such
// as a database password, reaches a job through sbatch's --export=ALL).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpugeek::backends::slurm {

struct Finished {
  int exit_code = -1;  // the exit status, or 128 + the signal that ended it
  std::string out;     // stdout, at most 64 KiB kept
  std::string err;     // stderr, at most 64 KiB kept
};

// Runs argv (argv[0] looked up in env's PATH) with `input` on stdin and exactly `env` ("NAME=value") as
// its environment. DeadlineExceeded (the child killed and reaped) when it runs longer than `timeout`;
// Unavailable when it cannot start. SIGPIPE from a child that exits without reading its stdin is
// absorbed (the calling thread blocks it while writing). Thread-safe.
absl::StatusOr<Finished> RunChild(const std::vector<std::string>& argv, const std::string& input,
                                  const std::vector<std::string>& env, Duration timeout);

}  // namespace gpugeek::backends::slurm
