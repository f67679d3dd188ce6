#include "backends/slurm/rest_client.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

extern char** environ;

namespace gpugeek::backends::slurm {
namespace {

// Runs argv with `input` on stdin; stdout and stderr (merged, at most 64 KiB kept) and the exit status.
struct Ran {
  int status = -1;
  std::string output;
};
absl::StatusOr<Ran> Run(const std::vector<std::string>& argv, const std::string& input) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return absl::UnavailableError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    return absl::UnavailableError(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  // The script is small (well under a pipe's 64 KiB), so writing it all before reading cannot deadlock.
  size_t off = 0;
  while (off < input.size()) {
    const ssize_t n = write(in[1], input.data() + off, input.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(in[1]);
  Ran r;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (r.output.size() < 65536) r.output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

absl::Status SlurmErrors(const nlohmann::json& reply) {
  const auto errors = reply.find("errors");
  if (errors == reply.end() || !errors->is_array() || errors->empty()) return absl::OkStatus();
  const nlohmann::json& e = (*errors)[0];
  std::string what =
      e.is_object() && e.contains("error") && e["error"].is_string() ? e["error"].get<std::string>() : e.dump();
  if (e.is_object() && e.contains("description") && e["description"].is_string()) {
    what += ": " + e["description"].get<std::string>();
  }
  return absl::FailedPreconditionError(fmt::format("slurmrestd: {}", what));
}

// A field of a slurmrestd object: its value when it has the expected type, else the default.
std::string Text(const nlohmann::json& j, const char* field) {
  const auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
int64_t Number(const nlohmann::json& j, const char* field) {
  const auto it = j.find(field);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlurmRest>> SlurmRest::Create(const RestOptions& options) {
  if (options.user.empty() || options.token.empty()) {
    return absl::InvalidArgumentError("slurmrestd needs a user and a JWT (scontrol token username=USER)");
  }
  auto rest = std::unique_ptr<SlurmRest>(new SlurmRest(options));
  http::ClientOptions o;
  o.base_url = options.url;
  o.read_timeout = options.timeout;
  o.headers = {{"X-SLURM-USER-NAME", options.user}, {"X-SLURM-USER-TOKEN", options.token}};
  ASSIGN_OR_RETURN(rest->http_, http::Client::Create(o));
  return rest;
}

std::string SlurmRest::Path(const std::string& rest) const { return fmt::format("/slurm/{}/{}", options_.api, rest); }

absl::StatusOr<nlohmann::json> SlurmRest::Call(const std::string& method, const std::string& rest) {
  ASSIGN_OR_RETURN(const http::Client::Reply reply, http_->Send(method, Path(rest)));
  nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (reply.status == 401 || reply.status == 403) {
    return absl::PermissionDeniedError(
        fmt::format("slurmrestd refused the JWT of '{}' (HTTP {}): make a new one with scontrol token", options_.user,
                    reply.status));
  }
  if (!body.is_object()) {
    return absl::UnavailableError(
        fmt::format("slurmrestd {} {}: HTTP {}, not a JSON object", method, rest, reply.status));
  }
  return body;
}

absl::StatusOr<std::vector<SlurmNode>> SlurmRest::Nodes() {
  ASSIGN_OR_RETURN(const nlohmann::json reply, Call("GET", "nodes"));
  return ParseNodes(reply);
}

absl::StatusOr<SlurmJob> SlurmRest::Job(int64_t id) {
  ASSIGN_OR_RETURN(const nlohmann::json reply, Call("GET", fmt::format("job/{}", id)));
  const auto jobs = reply.find("jobs");
  const bool found = jobs != reply.end() && jobs->is_array() && !jobs->empty() && (*jobs)[0].is_object() &&
                     Number((*jobs)[0], "job_id") == id;
  if (!found) {
    // 22.05 answers an unknown id with HTTP 500 and error 2017 "Invalid job id specified".
    const absl::Status error = SlurmErrors(reply);
    if (error.ok() || error.message().find("Invalid job id") != std::string_view::npos) {
      return absl::NotFoundError(fmt::format("Slurm job {} is not known", id));
    }
    return error;
  }
  const nlohmann::json& j = (*jobs)[0];
  SlurmJob job;
  job.id = id;
  job.name = Text(j, "name");
  job.state = Text(j, "job_state");
  job.reason = Text(j, "state_reason");
  job.nodes = Text(j, "nodes");
  job.comment = Text(j, "comment");
  job.exit_code = Number(j, "exit_code");
  return job;
}

absl::Status SlurmRest::Cancel(int64_t id) {
  ASSIGN_OR_RETURN(const nlohmann::json reply, Call("DELETE", fmt::format("job/{}", id)));
  return SlurmErrors(reply);
}

absl::StatusOr<int64_t> SlurmRest::Submit(const GangJob& job) {
  RETURN_IF_ERROR(Validate(job));
  std::vector<std::string> argv = SbatchArgv(job);
  argv[0] = options_.sbatch;
  ASSIGN_OR_RETURN(const Ran ran, Run(argv, BatchScript(job)));
  const std::string out(absl::StripAsciiWhitespace(ran.output));
  if (ran.status != 0) {
    return absl::FailedPreconditionError(fmt::format("sbatch refused {}: {}", SlurmJobName(job), out));
  }
  // --parsable prints "JOBID" or "JOBID;CLUSTER".
  int64_t id = 0;
  if (!absl::SimpleAtoi(out.substr(0, out.find(';')), &id) || id <= 0) {
    return absl::FailedPreconditionError(fmt::format("sbatch printed no job id: {}", out));
  }
  return id;
}

}  // namespace gpugeek::backends::slurm
