#pragma once
// Test support: plays agents against a ControlPlaneServer's agents' listener as real agents do. A node
// joins on its first registration with a one-use join token (NodeAuthority::LocalJoinToken) and keeps
// the credential it receives; every later call for that node ("/v1/agents/<node>/...", or a
// registration naming it) presents that credential. Same Post/Get shape as http::Client.

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "controlplane/server.h"
#include "http/client.h"

namespace gpugeek::controlplane::testing {

class AgentCaller {
 public:
  explicit AgentCaller(ControlPlaneServer& server) : server_(server) {}

  absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) {
    std::string node;
    if (path == "/v1/agents/register") {
      node = body.value("node", std::string());
      if (!credentials_.contains(node)) {
        absl::StatusOr<std::string> join = server_.nodes().LocalJoinToken();
        if (auto given = join_tokens_.find(node); given != join_tokens_.end()) join = given->second;
        if (!join.ok()) return join.status();
        absl::StatusOr<nlohmann::json> reply = Client(*join).Post(path, body);
        if (reply.ok() && reply->contains("node_credential")) credentials_[node] = (*reply)["node_credential"];
        return reply;
      }
    } else if (path.rfind("/v1/agents/", 0) == 0) {
      node = path.substr(11, path.find('/', 11) - 11);
    }
    auto it = credentials_.find(node);
    return Client(it == credentials_.end() ? std::string() : it->second).Post(path, body);
  }
  absl::StatusOr<nlohmann::json> Get(const std::string& path) { return Client("").Get(path); }
  // `node` joins with this join token (e.g. one bound to a provider) instead of a fresh local one.
  void JoinWith(const std::string& node, const std::string& join_token) { join_tokens_[node] = join_token; }
  // Drops `node`'s credential: its next registration joins again with a new join token.
  void Forget(const std::string& node) { credentials_.erase(node); }
  // The credential `node` received when it joined ("" before).
  std::string credential(const std::string& node) const {
    auto it = credentials_.find(node);
    return it == credentials_.end() ? std::string() : it->second;
  }

 private:
  http::Client& Client(const std::string& bearer) {
    std::unique_ptr<http::Client>& c = clients_[bearer];
    if (c == nullptr) {
      c = *http::Client::Create(
          {.base_url = server_.agent_url(), .ca_file = server_.ca_file(), .bearer_token = bearer});
    }
    return *c;
  }

  ControlPlaneServer& server_;
  std::map<std::string, std::string> credentials_;                // node -> credential
  std::map<std::string, std::string> join_tokens_;                // node -> the join token to join with
  std::map<std::string, std::unique_ptr<http::Client>> clients_;  // by bearer: keep-alive connections
};

}  // namespace gpugeek::controlplane::testing
