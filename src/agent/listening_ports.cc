#include "agent/listening_ports.h"

#include "common/file.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace gpugeek::agent {
namespace {

namespace fs = std::filesystem;

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Field 4 (ppid) of /proc/PID/stat, counted after the command name's last ')'.
bool ReadParent(const fs::path& stat, pid_t* ppid) {
  const std::optional<std::string> read = ReadProcFile(stat.string());  // the process may exit meanwhile
  if (!read) return false;
  const std::string& text = *read;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string state;
  long long parent = 0;
  if (!(fields >> state >> parent)) return false;
  *ppid = static_cast<pid_t>(parent);
  return true;
}

std::set<pid_t> Descendants(pid_t root, const fs::path& proc) {
  std::multimap<pid_t, pid_t> children;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(proc, ec)) {
    const std::string name = entry.path().filename().string();
    if (!AllDigits(name)) continue;
    pid_t ppid = 0;
    if (ReadParent(entry.path() / "stat", &ppid)) children.emplace(ppid, static_cast<pid_t>(std::stol(name)));
  }
  std::set<pid_t> out;
  if (!fs::exists(proc / std::to_string(root))) return out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (!out.insert(p).second) continue;
    auto [begin, end] = children.equal_range(p);
    for (auto it = begin; it != end; ++it) todo.push_back(it->second);
  }
  return out;
}

std::set<uint64_t> SocketInodes(const std::set<pid_t>& pids, const fs::path& proc) {
  std::set<uint64_t> out;
  for (pid_t p : pids) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(proc / std::to_string(p) / "fd", ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(entry.path(), link_ec).string();
      if (link_ec || !target.starts_with("socket:[") || target.back() != ']') continue;
      uint64_t inode = 0;
      const char* first = target.data() + 8;
      const char* last = target.data() + target.size() - 1;
      if (std::from_chars(first, last, inode).ptr == last) out.insert(inode);
    }
  }
  return out;
}

// "0100007F:1F90" (tcp) or 32 hex digits ":PORT" (tcp6): the kernel prints each 32-bit word of the
// address as the integer it holds in memory, so the words are read back into memory as they are.
bool ParseAddress(const std::string& field, bool v6, ListeningPort* out) {
  const size_t colon = field.find(':');
  const size_t digits = v6 ? 32 : 8;
  if (colon != digits) return false;
  unsigned port = 0;
  if (std::from_chars(field.data() + colon + 1, field.data() + field.size(), port, 16).ec != std::errc() || port == 0 ||
      port > 65535) {
    return false;
  }
  uint32_t words[4] = {};
  for (size_t w = 0; w < digits / 8; ++w) {
    if (std::from_chars(field.data() + w * 8, field.data() + w * 8 + 8, words[w], 16).ec != std::errc()) return false;
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (v6) {
    in6_addr a{};
    std::memcpy(&a, words, sizeof(a));
    if (inet_ntop(AF_INET6, &a, text, sizeof(text)) == nullptr) return false;
  } else {
    in_addr a{};
    std::memcpy(&a, words, sizeof(a));
    if (inet_ntop(AF_INET, &a, text, sizeof(text)) == nullptr) return false;
  }
  out->port = static_cast<int>(port);
  out->address = text;
  return true;
}

void ReadListeners(const fs::path& table, bool v6, const std::set<uint64_t>& inodes, std::vector<ListeningPort>& out) {
  const std::optional<std::string> text = ReadProcFile(table.string());
  if (!text) return;
  std::istringstream in(*text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode_text;
    if (!(fields >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode_text)) {
      continue;
    }
    if (state != "0A") continue;  // TCP_LISTEN
    uint64_t inode = 0;
    if (std::from_chars(inode_text.data(), inode_text.data() + inode_text.size(), inode).ec != std::errc()) continue;
    if (inodes.count(inode) == 0) continue;
    ListeningPort p;
    if (ParseAddress(local, v6, &p)) out.push_back(std::move(p));
  }
}

}  // namespace

std::optional<std::string> ListeningPort::ConnectAddress() const {
  if (address == "0.0.0.0") return "127.0.0.1";
  if (address == "::") return "::1";
  if (address == "::1") return address;
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) return address;
  return std::nullopt;
}

std::vector<ListeningPort> ListeningPorts(pid_t root, const std::string& proc_root, pid_t exclude) {
  const fs::path proc(proc_root);
  std::vector<ListeningPort> out;
  if (root <= 0) return out;
  const std::set<pid_t> pids = Descendants(root, proc);
  if (pids.empty()) return out;
  std::set<uint64_t> inodes = SocketInodes(pids, proc);
  if (exclude > 0) {
    for (uint64_t held : SocketInodes({exclude}, proc)) inodes.erase(held);
  }
  if (inodes.empty()) return out;
  ReadListeners(proc / std::to_string(root) / "net" / "tcp", false, inodes, out);
  ReadListeners(proc / std::to_string(root) / "net" / "tcp6", true, inodes, out);
  std::sort(out.begin(), out.end(), [](const ListeningPort& a, const ListeningPort& b) {
    return std::tie(a.port, a.address) < std::tie(b.port, b.address);
  });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace gpugeek::agent
