#pragma once
// slurmrestd client (OpenAPI v0.0.38, Slurm 22.05; JWT: X-SLURM-USER-NAME / X-SLURM-USER-TOKEN headers)
// for a Slurm cluster's inventory, job state and cancellation, and the pinned submission through sbatch
// (batch.h says why). Thread-safety: one thread at a time.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/slurm/batch.h"
#include "backends/slurm/nodes.h"
#include "common/clock.h"
#include "http/client.h"

namespace gpugeek::backends::slurm {

struct RestOptions {
  std::string url;  // slurmrestd base URL, "http://127.0.0.1:6820"
  std::string api = "v0.0.38";
  std::string user;        // X-SLURM-USER-NAME
  std::string token;       // X-SLURM-USER-TOKEN (a JWT from `scontrol token`)
  std::string token_file;  // when set, the token is read from it, and read again when slurmrestd refuses it
                           // (JWTs expire: a cron job can refresh the file)
  Duration timeout = std::chrono::seconds(10);
  std::string sbatch = "sbatch";                      // sbatch binary, looked up in `path`
  std::string path = "/usr/local/bin:/usr/bin:/bin";  // PATH of sbatch (and so of the job)
  std::string slurm_conf;  // SLURM_CONF for sbatch; empty: this process's $SLURM_CONF, else Slurm's default
  Duration sbatch_timeout = std::chrono::seconds(30);
};

struct SlurmJob {
  // Decodes `exit_code` (a wait status, as slurmrestd v0.0.38 reports it: "3:0" is 768): the exit status,
  // or -1 when a signal ended it.
  int ExitStatus() const { return (exit_code & 0x7f) != 0 ? -1 : static_cast<int>((exit_code >> 8) & 0xff); }
  int TermSignal() const { return static_cast<int>(exit_code & 0x7f); }

  int64_t id = 0;
  std::string name;
  std::string state;   // PENDING RUNNING COMPLETED FAILED CANCELLED NODE_FAIL TIMEOUT ...
  std::string reason;  // state_reason ("None", "Resources", "ReqNodeNotAvail", ...)
  std::string nodes;   // Slurm host list ("n[1-2]")
  std::string comment;
  int64_t exit_code = 0;  // the raw wait status Slurm keeps
};

class SlurmRest {
 public:
  // InvalidArgument for an empty user or token or a malformed URL.
  static absl::StatusOr<std::unique_ptr<SlurmRest>> Create(const RestOptions& options);

  // GET nodes. Unavailable when slurmrestd cannot be reached; its error replies as their Status.
  absl::StatusOr<std::vector<SlurmNode>> Nodes();
  // GET job/{id}. NotFound only when Slurm says it does not know the id (error 2017); other refusals
  // FailedPrecondition with Slurm's message; a reply without the job Unavailable. A field missing or of
  // another type reads as empty / 0.
  absl::StatusOr<SlurmJob> Job(int64_t id);
  // DELETE job/{id} (SIGKILL to every step, as scancel).
  absl::Status Cancel(int64_t id);
  // DELETE job/{id}?signal=SIGTERM: the signal to every step; the job ends as its processes do.
  absl::Status Terminate(int64_t id);
  // GET jobs: every job Slurm still knows (running, pending, and ended within MinJobAge).
  absl::StatusOr<std::vector<SlurmJob>> Jobs();
  // Submits `job` with sbatch, pinned to its nodes; the Slurm job id. sbatch gets only PATH, HOME (the
  // job's workdir), LANG and SLURM_CONF, which --export=ALL passes on to the job with the script's own.
  // InvalidArgument from Validate; FailedPrecondition with sbatch's stderr when Slurm refuses it (e.g. a node
  // that does not exist, more GRES than a node has); DeadlineExceeded when sbatch runs over sbatch_timeout
  // and Internal when it succeeds without printing an id (the job may exist: look it up by SlurmJobName);
  // Unavailable when sbatch cannot run.
  absl::StatusOr<int64_t> Submit(const GangJob& job);

 private:
  explicit SlurmRest(const RestOptions& options) : options_(options) {}
  std::string Path(const std::string& rest) const;
  // (Re)makes the HTTP client with the current token (read from token_file when set).
  absl::Status Connect();
  // GET or DELETE `rest` under the API; the reply's JSON object whatever its HTTP status (slurmrestd puts its
  // errors in it). PermissionDenied for a refused JWT; Unavailable when unreachable or not JSON.
  absl::StatusOr<nlohmann::json> Call(const std::string& method, const std::string& rest);

  RestOptions options_;
  std::unique_ptr<http::Client> http_;
};

}  // namespace gpugeek::backends::slurm
