#include "backends/slurm/rest_client.h"

#include <cstdlib>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "backends/slurm/subprocess.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::backends::slurm {
namespace {

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

SlurmJob JobFromJson(const nlohmann::json& j) {
  SlurmJob job;
  job.id = Number(j, "job_id");
  job.name = Text(j, "name");
  job.state = Text(j, "job_state");
  job.reason = Text(j, "state_reason");
  job.nodes = Text(j, "nodes");
  job.comment = Text(j, "comment");
  job.exit_code = Number(j, "exit_code");
  return job;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlurmRest>> SlurmRest::Create(const RestOptions& options) {
  auto rest = std::unique_ptr<SlurmRest>(new SlurmRest(options));
  RETURN_IF_ERROR(rest->Connect());
  return rest;
}

std::string SlurmRest::Path(const std::string& rest) const { return fmt::format("/slurm/{}/{}", options_.api, rest); }

absl::Status SlurmRest::Connect() {
  if (!options_.token_file.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadFileBounded(options_.token_file, 64 * 1024, "slurmrestd token file"));
    options_.token = std::string(absl::StripAsciiWhitespace(text));
  }
  if (options_.user.empty() || options_.token.empty()) {
    return absl::InvalidArgumentError("slurmrestd needs a user and a JWT (scontrol token username=USER)");
  }
  http::ClientOptions o;
  o.base_url = options_.url;
  o.read_timeout = options_.timeout;
  o.headers = {{"X-SLURM-USER-NAME", options_.user}, {"X-SLURM-USER-TOKEN", options_.token}};
  ASSIGN_OR_RETURN(http_, http::Client::Create(o));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> SlurmRest::Call(const std::string& method, const std::string& rest) {
  ASSIGN_OR_RETURN(http::Client::Reply reply, http_->Send(method, Path(rest)));
  if ((reply.status == 401 || reply.status == 403) && !options_.token_file.empty()) {
    RETURN_IF_ERROR(Connect());  // the JWT may have been refreshed in its file
    ASSIGN_OR_RETURN(reply, http_->Send(method, Path(rest)));
  }
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
    // 22.05 answers an unknown id with HTTP 500 and error 2017 "Invalid job id specified"; any other reply
    // without the job (a proxy's error page, another job) says nothing about it.
    const absl::Status error = SlurmErrors(reply);
    if (!error.ok() && error.message().find("Invalid job id") != std::string_view::npos) {
      return absl::NotFoundError(fmt::format("Slurm job {} is not known", id));
    }
    return error.ok() ? absl::UnavailableError(fmt::format("slurmrestd answered GET job/{} without it", id)) : error;
  }
  return JobFromJson((*jobs)[0]);
}

absl::StatusOr<std::vector<SlurmJob>> SlurmRest::Jobs() {
  ASSIGN_OR_RETURN(const nlohmann::json reply, Call("GET", "jobs"));
  RETURN_IF_ERROR(SlurmErrors(reply));
  const auto jobs = reply.find("jobs");
  if (jobs == reply.end() || !jobs->is_array())
    return absl::UnavailableError("slurmrestd answered GET jobs without a list");
  std::vector<SlurmJob> out;
  for (const nlohmann::json& j : *jobs) {
    if (j.is_object() && Number(j, "job_id") > 0) out.push_back(JobFromJson(j));
  }
  return out;
}

absl::Status SlurmRest::Cancel(int64_t id) {
  ASSIGN_OR_RETURN(const nlohmann::json reply, Call("DELETE", fmt::format("job/{}", id)));
  return SlurmErrors(reply);
}

absl::Status SlurmRest::Terminate(int64_t id) {
  ASSIGN_OR_RETURN(const nlohmann::json reply, Call("DELETE", fmt::format("job/{}?signal=SIGTERM", id)));
  return SlurmErrors(reply);
}

absl::StatusOr<int64_t> SlurmRest::Submit(const GangJob& job) {
  RETURN_IF_ERROR(Validate(job));
  std::vector<std::string> argv = SbatchArgv(job);
  argv[0] = options_.sbatch;
  // sbatch's --export=ALL hands its own environment to the job: only this, never the server's.
  std::vector<std::string> env = {"PATH=" + options_.path, "HOME=" + job.workdir, "LANG=C.UTF-8"};
  const std::string conf = options_.slurm_conf.empty() && std::getenv("SLURM_CONF") != nullptr
                               ? std::string(std::getenv("SLURM_CONF"))
                               : options_.slurm_conf;
  if (!conf.empty()) env.push_back("SLURM_CONF=" + conf);
  ASSIGN_OR_RETURN(const Finished ran, RunChild(argv, BatchScript(job), env, options_.sbatch_timeout));
  const std::string err(absl::StripAsciiWhitespace(ran.err));
  if (ran.exit_code != 0) {
    return absl::FailedPreconditionError(fmt::format("sbatch refused {}: {}", SlurmJobName(job), err));
  }
  // --parsable prints "JOBID" or "JOBID;CLUSTER" as the last line of stdout (site plugins may print more
  // before it; warnings go to stderr).
  std::string out(absl::StripAsciiWhitespace(ran.out));
  out = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  int64_t id = 0;
  if (!absl::SimpleAtoi(out.substr(0, out.find(';')), &id) || id <= 0) {
    return absl::InternalError(fmt::format(
        "sbatch printed no job id for {} (stdout '{}', stderr '{}'): find it by its name before placing it again",
        SlurmJobName(job), out, err));
  }
  return id;
}

}  // namespace gpugeek::backends::slurm
