#pragma once
// The TCP ports a member listens on: what `gpugeek ports JOB` lists and the only ports `gpugeek
// port-forward` may reach on a node (any other port on the node's loopback belongs to someone else: the
// agent, another tenant's job). Read from /proc, no tool run:
//
//   processes   the member's root process and every descendant (/proc/PID/stat field 4, ppid)
//   sockets     the inodes of their open sockets (/proc/PID/fd/N -> "socket:[INODE]")
//   listeners   /proc/ROOT/net/tcp and tcp6 rows in state 0A (LISTEN) with one of those inodes; ROOT's
//               own view, so a container's network namespace is read from inside
//
// Reading another user's fd folder needs the agent to be root or the member's user, as it is.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpugeek::agent {

struct ListeningPort {
  int port = 0;         // 1..65535
  std::string address;  // the bound address: "0.0.0.0", "127.0.0.1", "::", "::1", ...

  // Where the agent connects to reach it: the loopback, always. A wildcard bind ("0.0.0.0", "::") is
  // reached at "127.0.0.1" / "::1", a loopback bind (127.0.0.0/8, ::1) at its own address; nullopt for
  // any other address: a member may bind a socket to an address that is not the node's (IP_FREEBIND),
  // and connecting there would make the agent dial whatever that address is (another host, a metadata
  // service) from the node's network.
  std::optional<std::string> ConnectAddress() const;
  bool operator==(const ListeningPort&) const = default;
};

// The listening TCP sockets of `root` and its descendants under `proc_root`, sorted by port then
// address, without duplicates; sockets that process `exclude` (the agent itself, when > 0) also holds are
// left out (a descriptor leaked into the member is still the agent's). Empty when `root` is gone or nothing
// listens.
std::vector<ListeningPort> ListeningPorts(pid_t root, const std::string& proc_root = "/proc", pid_t exclude = 0);

}  // namespace gpugeek::agent
