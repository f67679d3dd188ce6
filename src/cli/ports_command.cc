// `gpugeek ports JOB`: the TCP ports each member of a running job listens on (GET /v1/jobs/{id}/ports).
// `gpugeek port-forward JOB [--rank R] [--address A] [LOCAL:]REMOTE...`: listens on A (127.0.0.1) at each
// LOCAL port and carries every connection made there to the member's REMOTE port, through the server
// (POST /v1/jobs/{id}/port-forward, an HTTP Upgrade to gpugeek-tcp; controlplane/port_relay.h). One
// upgraded request per connection, as kubectl port-forward opens one stream per connection. Prints
// "Forwarding from A:LOCAL -> job J rank R port REMOTE" per port once it listens, then runs until
// SIGINT/SIGTERM (exit 0) or the job ends (exit 0, saying so); a connection the server refuses (the
// member does not listen on the port, the job stopped) is closed and its reason printed on stderr.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/port_spec.h"
#include "common/absl_fmt.h"
#include "common/table.h"
#include "http/byte_stream.h"
#include "http/upgrade_client.h"

namespace gpugeek::cli {
namespace {

constexpr char kProtocol[] = "gpugeek-tcp";  // controlplane/port_relay.h
constexpr int kMaxConnections = 256;
constexpr auto kJobCheckEvery = std::chrono::seconds(5);

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// The forwarded connections open now: closed and waited for when the command stops.
class Connections {
 public:
  // Takes a slot for a new connection; false when kMaxConnections are open.
  bool Reserve() {
    std::lock_guard<std::mutex> lock(mu_);
    if (reserved_ >= kMaxConnections) return false;
    ++reserved_;
    return true;
  }
  // Registers an open stream so CloseAllAndWait can end it; false (the caller ends at once) once closing.
  bool Add(http::ByteStream* s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return false;
    open_.insert(s);
    return true;
  }
  // Gives the slot back (and forgets `s` when given).
  void Done(http::ByteStream* s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s != nullptr) open_.erase(s);
    --reserved_;
    cv_.notify_all();
  }
  void CloseAllAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    for (http::ByteStream* s : open_) s->Close();
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return reserved_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int reserved_ = 0;
  bool closing_ = false;
  std::set<http::ByteStream*> open_;
};

// A listening socket on `address`:`port` (0: any); the bound port, or the command fails.
int Listen(const std::string& cmd, const std::string& address, int port, int* bound) {
  absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> parsed = http::SocketAddress(address, port);
  if (!parsed.ok()) {
    Fail(cmd, fmt::format("--address: '{}' is not a numeric IP address (e.g. 127.0.0.1)", address), kExitUsage);
  }
  auto& [addr, len] = *parsed;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 64) != 0) {
    Fail(cmd, fmt::format("cannot listen on {}:{}: {}", address, port, std::strerror(errno)));
  }
  len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound = ntohs(addr.ss_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
  return fd;
}

void RegisterPortsList(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string id;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("ports", "List the TCP ports each member of a running job listens on");
  sub->add_option("id", o->id, "Job id")->required();
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "ports";
    nlohmann::json reply = OrFail(cmd, Connect(cmd, o->flags)->Get("/v1/jobs/" + UrlEncode(o->id) + "/ports"));
    if (o->flags.json) {
      PrintJson(reply);
      return;
    }
    TextTable table({"RANK", "NODE", "PORT", "ADDRESS"});
    for (const nlohmann::json& m : reply["members"]) {
      if (m.contains("error")) {
        table.AddRow({Text(m["rank"]), Text(m["node"]), "-", "error: " + Text(m["error"])});
        continue;
      }
      if (m["ports"].empty()) table.AddRow({Text(m["rank"]), Text(m["node"]), "-", "(listens on no TCP port)"});
      for (const nlohmann::json& p : m["ports"]) {
        table.AddRow({Text(m["rank"]), Text(m["node"]), Text(p["port"]), Text(p["address"])});
      }
    }
    std::cout << table.Render();
  });
}

void RegisterPortForward(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string id;
    std::vector<std::string> ports;
    int rank = 0;
    std::string address = "127.0.0.1";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("port-forward", "Forward local ports to a running job member's ports: JOB [LOCAL:]REMOTE...");
  sub->add_option("id", o->id, "Job id")->required();
  sub->add_option("ports", o->ports, "REMOTE, LOCAL:REMOTE or :REMOTE (a free local port)")->required();
  sub->add_option("--rank", o->rank, "Node rank of the member")->capture_default_str()->check(CLI::Range(0, 1023));
  sub->add_option("--address", o->address, "Local address to listen on")->capture_default_str();
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    const std::string cmd = "port-forward";
    std::vector<PortSpec> specs;
    for (const std::string& p : o->ports) {
      absl::StatusOr<PortSpec> spec = ParsePortSpec(p);
      if (!spec.ok()) Fail(cmd, std::string(spec.status().message()), kExitUsage);
      specs.push_back(*spec);
    }
    absl::StatusOr<Endpoint> endpoint = ResolveEndpoint(o->flags);
    if (!endpoint.ok()) Fail(cmd, std::string(endpoint.status().message()), kExitUsage);
    const std::string job_path = "/v1/jobs/" + UrlEncode(o->id);
    // The job must run now; a port it does not listen on yet is only a note (a server may start later).
    std::unique_ptr<http::Client> client = Connect(cmd, o->flags);
    nlohmann::json listed = OrFail(cmd, client->Get(job_path + "/ports"));
    // Tunnels go to the server that answered (the leader, of a list of servers): an upgrade does not fail over.
    const http::ClientOptions options{.base_url = client->current_base_url(),
                                      .read_timeout = std::chrono::seconds(30),
                                      .ca_file = endpoint->ca_file,
                                      .bearer_token = endpoint->token};
    std::set<int> listening;
    for (const nlohmann::json& m : listed["members"]) {
      if (m.value("rank", -1) != o->rank || !m.contains("ports")) continue;
      for (const nlohmann::json& p : m["ports"]) listening.insert(p.value("port", 0));
    }

    struct Listener {
      int fd = -1;
      PortSpec spec;
    };
    std::vector<Listener> listeners;
    for (const PortSpec& spec : specs) {
      int bound = 0;
      listeners.push_back({Listen(cmd, o->address, spec.local, &bound), {bound, spec.remote}});
      std::cout << fmt::format("Forwarding from {}:{} -> job {} rank {} port {}\n", o->address, bound, o->id, o->rank,
                               spec.remote)
                << std::flush;
      if (listening.count(spec.remote) == 0) {
        std::cerr << fmt::format(
            "gpugeek port-forward: note: job {} rank {} does not listen on port {} yet; connections are refused "
            "until it does\n",
            o->id, o->rank, spec.remote);
      }
    }

    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);

    Connections connections;
    struct Worker {
      std::thread thread;
      std::shared_ptr<std::atomic<bool>> done;
    };
    std::list<Worker> threads;
    auto next_check = std::chrono::steady_clock::now() + kJobCheckEvery;
    std::string ended;
    while (!g_stop && ended.empty()) {
      std::vector<pollfd> fds;
      for (const Listener& l : listeners) fds.push_back({.fd = l.fd, .events = POLLIN, .revents = 0});
      const int r = ::poll(fds.data(), fds.size(), 500);
      for (size_t i = 0; r > 0 && i < fds.size(); ++i) {
        if ((fds[i].revents & POLLIN) == 0) continue;
        const int c = ::accept4(listeners[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        const int remote = listeners[i].spec.remote;
        if (!connections.Reserve()) {  // before a thread exists for it
          ::close(c);
          std::cerr << fmt::format("gpugeek port-forward: {} connections open already; closed a new one\n",
                                   kMaxConnections);
          continue;
        }
        auto done = std::make_shared<std::atomic<bool>>(false);
        threads.push_back(
            {std::thread([&connections, &options, o, job_path, remote, c, done] {
               auto local = std::make_unique<http::TcpByteStream>(c);
               absl::StatusOr<std::unique_ptr<http::ByteStream>> tunnel =
                   absl::CancelledError("port-forward is stopping");
               if (connections.Add(local.get())) {
                 tunnel = http::OpenUpgrade(options, "POST",
                                            fmt::format("{}/port-forward?port={}&rank={}", job_path, remote, o->rank),
                                            kProtocol);
               }
               if (!tunnel.ok()) {
                 std::cerr << fmt::format("gpugeek port-forward: port {}: {}\n", remote, tunnel.status().message());
               } else {
                 http::Splice(*local, **tunnel);
               }
               connections.Done(local.get());
               *done = true;
             }),
             done});
      }
      // Connections that ended: their threads are joined now, not at exit.
      for (auto it = threads.begin(); it != threads.end();) {
        if (*it->done) {
          it->thread.join();
          it = threads.erase(it);
        } else {
          ++it;
        }
      }
      if (std::chrono::steady_clock::now() >= next_check) {
        next_check = std::chrono::steady_clock::now() + kJobCheckEvery;
        absl::StatusOr<nlohmann::json> job = Connect(cmd, o->flags)->Get(job_path);
        if (job.ok() && job->value("state", "") != "RUNNING" && job->value("state", "") != "PENDING") {
          ended = job->value("state", "");
        }
      }
    }
    for (const Listener& l : listeners) ::close(l.fd);
    connections.CloseAllAndWait();
    for (Worker& w : threads) w.thread.join();
    if (!ended.empty()) std::cout << fmt::format("job {} is {}: port-forward stops\n", o->id, ended);
  });
}

}  // namespace

void RegisterPortCommands(CLI::App& app) {
  RegisterPortsList(app);
  RegisterPortForward(app);
}

}  // namespace gpugeek::cli
