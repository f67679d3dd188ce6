// The ports a member listens on, from a /proc tree of the test's own and from the real /proc.
#include "agent/listening_ports.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

namespace gpugeek::agent {
namespace {

namespace fs = std::filesystem;

}  // namespace

void PrintTo(const ListeningPort& p, std::ostream* os) { *os << p.address << " port " << p.port; }

namespace {

class FakeProcPorts : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("gpugeek_ports_test_{}", getpid());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Process(int pid, int ppid, const std::vector<uint64_t>& sockets) {
    const fs::path dir = root_ / std::to_string(pid);
    fs::create_directories(dir / "fd");
    std::ofstream(dir / "stat") << fmt::format("{} (py (thon)) S {} {} {} 0 0\n", pid, ppid, pid, pid);
    int fd = 3;
    for (uint64_t inode : sockets)
      fs::create_symlink(fmt::format("socket:[{}]", inode), dir / "fd" / std::to_string(fd++));
    fs::create_symlink("/dev/null", dir / "fd" / "0");
  }
  void Table(int pid, const std::string& name, const std::vector<std::string>& rows) {
    fs::create_directories(root_ / std::to_string(pid) / "net");
    std::ofstream out(root_ / std::to_string(pid) / "net" / name);
    out << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    for (const std::string& r : rows) out << r << "\n";
  }

  fs::path root_;
};

// Only the loopback is ever dialled: a member can bind an address that is not the node's (IP_FREEBIND).
TEST(ListeningPort, OnlyLoopbackAndWildcardBindsAreReached) {
  EXPECT_EQ((ListeningPort{8000, "0.0.0.0"}).ConnectAddress(), "127.0.0.1");
  EXPECT_EQ((ListeningPort{8000, "::"}).ConnectAddress(), "::1");
  EXPECT_EQ((ListeningPort{8000, "127.0.0.1"}).ConnectAddress(), "127.0.0.1");
  EXPECT_EQ((ListeningPort{8000, "127.1.2.3"}).ConnectAddress(), "127.1.2.3");
  EXPECT_EQ((ListeningPort{8000, "::1"}).ConnectAddress(), "::1");
  EXPECT_EQ((ListeningPort{80, "169.254.169.254"}).ConnectAddress(), std::nullopt);
  EXPECT_EQ((ListeningPort{5432, "10.0.0.7"}).ConnectAddress(), std::nullopt);
  EXPECT_EQ((ListeningPort{5432, "fd00::7"}).ConnectAddress(), std::nullopt);
}

TEST_F(FakeProcPorts, OnlyListenersOfTheRootAndItsDescendantsCount) {
  Process(100, 1, {});        // the member's shim
  Process(101, 100, {5001});  // its rank: listens on 127.0.0.1:8000
  Process(102, 101, {5002});  // a grandchild: listens on [::]:6006
  Process(200, 1, {5003});    // someone else's process: listens on 0.0.0.0:9000
  Process(103, 100, {5004});  // a connected (not listening) socket of the member
  // Rows as the kernel prints them (x86, little-endian words): 0100007F = 127.0.0.1, 1F40 = 8000.
  Table(100, "tcp",
        {"   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5001 1 0",
         "   1: 00000000:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5003 1 0",
         "   2: 0100007F:A5D2 0100007F:1F40 01 00000000:00000000 00:00000000 00000000  1000        0 5004 1 0",
         "   3: garbage"});
  Table(100, "tcp6",
        {"   0: 00000000000000000000000000000000:1776 00000000000000000000000000000000:0000 0A 00000000:00000000 "
         "00:00000000 00000000  1000        0 5002 1 0"});
  const std::vector<ListeningPort> want = {{.port = 6006, .address = "::"}, {.port = 8000, .address = "127.0.0.1"}};
  EXPECT_EQ(ListeningPorts(100, root_.string()), want);
  EXPECT_EQ(ListeningPorts(100, root_.string())[0].ConnectAddress(), "::1");
  EXPECT_EQ(ListeningPorts(100, root_.string())[1].ConnectAddress(), "127.0.0.1");
  // A socket the excluded process (the agent) holds too is not the member's.
  Process(300, 1, {5001});
  EXPECT_EQ(ListeningPorts(100, root_.string(), 300), (std::vector<ListeningPort>{{.port = 6006, .address = "::"}}));
  // From the rank down only its own subtree: the shim's other child's socket is not listening anyway.
  EXPECT_EQ(ListeningPorts(101, root_.string()).size(), 0u);  // 101 has no net/ tables of its own view
  EXPECT_TRUE(ListeningPorts(999, root_.string()).empty());   // gone
  EXPECT_TRUE(ListeningPorts(0, root_.string()).empty());
}

// On the real /proc: a child that listens on an ephemeral loopback port is found under its parent.
TEST(ListeningPortsTest, AChildsListenerIsFoundOnTheRealProc) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd, 1);
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const int port = ntohs(addr.sin_port);
    (void)!write(ready[1], &port, sizeof(port));
    pause();
    _exit(0);
  }
  int port = 0;
  ASSERT_EQ(read(ready[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  const std::vector<ListeningPort> found = ListeningPorts(getpid());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_NE(std::find(found.begin(), found.end(), ListeningPort{.port = port, .address = "127.0.0.1"}), found.end())
      << "port " << port << " not among " << found.size();
}

}  // namespace
}  // namespace gpugeek::agent
