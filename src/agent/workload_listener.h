#pragma once
// WorkloadListener: the node's endpoint for its own workloads (docs/checkpointing.md), on loopback only,
// plain HTTP (it never leaves the machine; members in containers share the host's network). Two routes:
//
//   POST /v1/checkpoint   Authorization: Bearer $GPUGEEK_MEMBER_TOKEN   {"step": 1200}
//     200 {"member": "j-00000007 rank 0 epoch 3", "step": 1200}: the checkpoint at step 1200 is complete;
//         the agent reports it with the member on its next heartbeat (at once), and the server keeps it as
//         what the job resumes from (`gpugeek job ID`)
//     400 a body that is not {"step": <integer 0..2^53>} (names the field); 401 no member has that token;
//     409 the member has ended; 413 a body over 1 KiB
//
//   POST /v1/report       Authorization: Bearer $GPUGEEK_MEMBER_TOKEN   {"step": 3, "value": 0.412}
//     200 {"member": "...", "step": 3, "seq": 2, "should_stop": false}: the value of the objective at
//         `step` (a trial's metric, docs/hpo.md) is held by the agent and sent with every heartbeat until
//         the server has stored it; should_stop: the server has asked this member to stop (a pruned trial:
//         checkpoint and exit). 400 as above or a value that is not a finite number; 429 while 1,024
//         reports wait to be stored.
//
// The agent gives each member the URL (GPUGEEK_AGENT_URL) and its own token; `gpugeek checkpoint --step
// N` and examples/gpt/gpugeek_checkpoint.py (Python standard library only) send the request.
//
//   auto listener = WorkloadListener::Start("127.0.0.1:0", agent.get());
//   agent->SetWorkloadUrl((*listener)->url());   // "http://127.0.0.1:40713"

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpugeek::http {
class Server;
}

namespace gpugeek::agent {

class Agent;

// Whether a --workload-listen value turns the endpoint off: "" or "off".
bool WorkloadListenDisabled(const std::string& listen);

class WorkloadListener {
 public:
  // Binds `listen` ("127.0.0.1:0", "[::1]:9472"; a loopback address only) and serves the route for
  // `agent` (borrowed; must outlive the listener). InvalidArgument for a malformed or non-loopback
  // address, Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<WorkloadListener>> Start(const std::string& listen, Agent* agent);
  ~WorkloadListener();  // stops

  // "http://127.0.0.1:PORT" ("http://[::1]:PORT"), for Agent::SetWorkloadUrl.
  const std::string& url() const { return url_; }
  void Stop();

 private:
  WorkloadListener(std::unique_ptr<http::Server> server, std::string url);
  std::unique_ptr<http::Server> server_;
  std::string url_;
};

}  // namespace gpugeek::agent
