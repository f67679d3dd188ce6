#include "controlplane/exec_relay.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/exec_stream.h"
#include "api/job_state.h"
#include "api/json_reader.h"
#include "auth/api_token.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "http/client.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;

constexpr char kAgentExecPath[] = "/v1/exec";  // agent/exec_route.h (an L3 sibling: not included)
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxQueuedBytes = 4 << 20;  // relayed bytes waiting for a slow user, at most
constexpr auto kHeadWait = std::chrono::seconds(15);

// The agent's answer, handed from the relay thread (reading the agent) to the worker writing to the user.
struct Pipe {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<int> head;         // the agent's HTTP status, once its head arrived
  std::deque<std::string> chunks;  // 2xx body pieces not yet written to the user
  size_t queued = 0;               // bytes in chunks
  bool ended = false;              // the agent's request is over
  absl::Status result;             // how it ended (its error status for a non-2xx answer)
  bool cancelled = false;          // the user went away, or the reply was dropped: stop reading the agent
};

// Owns the relay thread: dropping the last reference (the streamed reply is done, or was never streamed)
// stops reading from the agent and joins it.
struct Relay {
  std::shared_ptr<Pipe> pipe = std::make_shared<Pipe>();
  std::shared_ptr<http::Client> client;  // to the agent; Cancel() closes its connection at once
  std::thread thread;
  ~Relay() {
    {
      std::lock_guard<std::mutex> lock(pipe->mu);
      pipe->cancelled = true;
    }
    pipe->cv.notify_all();
    // The agent sees its connection closed at its next write (at most its 2 s keep-alive) and kills the
    // command; without this the relay would only notice at the next chunk the agent sends.
    if (client != nullptr) client->Cancel();
    if (thread.joinable()) thread.join();
  }
};

absl::Status NoJob(const std::string& id) { return absl::NotFoundError(fmt::format("store: no job '{}'", id)); }

struct ExecBody {
  nlohmann::json argv;
  int rank = 0;
  int64_t timeout_ms = 3'600'000;
};

absl::StatusOr<ExecBody> ParseBody(const Request& r) {
  ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
  api::JsonReader reader(body, "exec");
  RETURN_IF_ERROR(reader.CheckObject({"argv", "rank", "timeout_ms"}));
  ExecBody out;
  ASSIGN_OR_RETURN(int64_t rank, reader.Int("rank", 0, 0, 1023));
  out.rank = static_cast<int>(rank);
  ASSIGN_OR_RETURN(out.timeout_ms, reader.Int("timeout_ms", 3'600'000, 1, 86'400'000));
  const auto argv = body.find("argv");
  if (argv == body.end() || !argv->is_array() || argv->empty() || argv->size() > kMaxArgs) {
    return absl::InvalidArgumentError(fmt::format("exec.argv: must be an array of 1..{} strings", kMaxArgs));
  }
  for (const nlohmann::json& a : *argv) {
    if (!a.is_string()) return absl::InvalidArgumentError("exec.argv: every element must be a string");
  }
  if (argv->at(0).get_ref<const std::string&>().empty()) {
    return absl::InvalidArgumentError("exec.argv: the command (argv[0]) is empty");
  }
  out.argv = *argv;
  return out;
}

absl::StatusOr<Reply> Exec(ControlPlane& cp, ExecTokens& tokens, const ExecRelayOptions& options, const Principal& who,
                           const Request& r) {
  const std::string id = r.param("id");
  ASSIGN_OR_RETURN(JobView job, cp.GetJob(id));
  if (!who.CanSee(job.record.tenant)) return NoJob(id);
  ASSIGN_OR_RETURN(ExecBody body, ParseBody(r));
  ASSIGN_OR_RETURN(MemberNodeApi api, NodeApiOfMember(cp, tokens, options, job, body.rank, "exec"));
  const http::ClientOptions& client_options = api.client;
  const std::string& node = api.node;
  ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client, http::Client::Create(client_options));
  const nlohmann::json agent_body = {
      {"job_id", id}, {"node_rank", body.rank}, {"argv", body.argv}, {"timeout_ms", body.timeout_ms}};
  spdlog::info("exec: {} (tenant {}) runs {} in job {} rank {} on node {}", who.user, who.tenant,
               body.argv.at(0).get<std::string>(), id, body.rank, node);

  // The agent is read on a thread of its own, so this worker can answer with the agent's status first
  // and then write its stream; no control-plane lock is held by either.
  auto relay = std::make_shared<Relay>();
  relay->client = std::move(client);
  relay->thread = std::thread([pipe = relay->pipe, client = relay->client, agent_body] {
    absl::Status st = client->PostStream(
        kAgentExecPath, agent_body,
        [&pipe](int status) {
          std::lock_guard<std::mutex> lock(pipe->mu);
          pipe->head = status;
          pipe->cv.notify_all();
        },
        [&pipe](const std::string& chunk) {
          std::unique_lock<std::mutex> lock(pipe->mu);
          pipe->cv.wait(lock, [&] { return pipe->cancelled || pipe->queued < kMaxQueuedBytes; });
          if (pipe->cancelled) return false;
          pipe->queued += chunk.size();
          pipe->chunks.push_back(chunk);
          pipe->cv.notify_all();
          return true;
        });
    std::lock_guard<std::mutex> lock(pipe->mu);
    pipe->ended = true;
    pipe->result = std::move(st);
    pipe->cv.notify_all();
  });

  std::shared_ptr<Pipe> pipe = relay->pipe;
  {
    std::unique_lock<std::mutex> lock(pipe->mu);
    pipe->cv.wait_for(lock, options.connect_timeout + kHeadWait, [&] { return pipe->head.has_value() || pipe->ended; });
    const bool ok_head = pipe->head.has_value() && *pipe->head >= 200 && *pipe->head < 300;
    if (!ok_head) {
      // An error answer: wait for its body (the agent's message) and pass the status on as the user's.
      pipe->cv.wait_for(lock, options.read_timeout, [&] { return pipe->ended; });
      absl::Status st = pipe->ended ? pipe->result : absl::UnavailableError("no answer");
      if (st.ok()) st = absl::UnavailableError(fmt::format("node {}'s agent gave no answer", node));
      if (st.code() == absl::StatusCode::kUnauthenticated) {
        // The agent does not hold our token (it registered elsewhere since): a server-side problem.
        return absl::UnavailableError(
            fmt::format("node {}'s agent refused this server's exec token; retry once it registered again", node));
      }
      if (st.code() == absl::StatusCode::kUnavailable) {
        return absl::UnavailableError(fmt::format("node {}: {}", node, st.message()));
      }
      return st;
    }
  }
  Reply reply;
  reply.content_type = api::kExecStreamContentType;
  reply.stream = [relay](const http::ChunkWriter& write) {
    Pipe* const p = relay->pipe.get();
    while (true) {
      std::string chunk;
      {
        std::unique_lock<std::mutex> lock(p->mu);
        p->cv.wait(lock, [&] { return !p->chunks.empty() || p->ended; });
        if (p->chunks.empty()) break;  // ended and drained
        chunk = std::move(p->chunks.front());
        p->chunks.pop_front();
        p->queued -= chunk.size();
        p->cv.notify_all();
      }
      if (!write(chunk)) break;  // the user went away: ~Relay stops reading, so the agent kills the command
    }
  };
  return reply;
}

}  // namespace

absl::StatusOr<MemberNodeApi> NodeApiOfMember(ControlPlane& cp, const ExecTokens& tokens,
                                              const ExecRelayOptions& options, const JobView& job, int rank,
                                              std::string_view what) {
  const std::string& id = job.record.id;
  if (job.record.state != api::JobState::kRunning || !job.allocation.has_value()) {
    return absl::FailedPreconditionError(
        fmt::format("job {} is {}: {} needs a RUNNING job", id, api::JobStateName(job.record.state), what));
  }
  const std::vector<AllocationMember>& members = job.allocation->members;
  auto member = std::find_if(members.begin(), members.end(), [&](const AllocationMember& m) { return m.rank == rank; });
  if (member == members.end()) {
    return absl::InvalidArgumentError(
        fmt::format("rank: must be 0..{} (job {} has {} ranks), got {}", members.size() - 1, id, members.size(), rank));
  }
  ASSIGN_OR_RETURN(NodeView node, cp.Node(member->node));
  const api::Registration& reg = node.registration;
  if (reg.metrics_address.empty()) {
    return absl::UnavailableError(fmt::format(
        "node {} serves no node API, so {} cannot reach job {} rank {}: start its agent with --metrics-listen "
        "HOST:PORT (not off)",
        member->node, what, id, rank));
  }
  std::optional<std::string> token = tokens.Get(member->node);
  if (!token) {
    return absl::UnavailableError(fmt::format(
        "node {} has not registered with this server since it started (no exec token yet); retry in a few seconds",
        member->node));
  }
  return MemberNodeApi{
      .node = member->node,
      .client = {.base_url = fmt::format("{}://{}", reg.metrics_tls ? "https" : "http", reg.metrics_address),
                 .connect_timeout = options.connect_timeout,
                 .read_timeout = options.read_timeout,
                 .ca_file = options.ca_file,
                 .bearer_token = *token}};
}

std::string ExecTokens::Issue(const std::string& node) {
  std::string token = auth::RandomHex(32);
  std::lock_guard<std::mutex> lock(mu_);
  tokens_[node] = token;
  return token;
}

std::optional<std::string> ExecTokens::Get(const std::string& node) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tokens_.find(node);
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

void RegisterExecRoute(http::Server& server, ControlPlane& control_plane, Accounts& accounts, ExecTokens& tokens,
                       ExecRelayOptions options) {
  GuardedRoute(server, accounts, "POST", kExecRoutePattern,
               [&control_plane, &tokens, options](const Principal& who, const Request& r) {
                 return Exec(control_plane, tokens, options, who, r);
               });
}

}  // namespace gpugeek::controlplane
