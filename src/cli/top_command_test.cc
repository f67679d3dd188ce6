// End to end tests of `gpugeek top`: a real `gpugeek server` and two `gpugeek agent`s with emulated GPUs on
// loopback, one job running on them, and the built binary run as a client: under a pseudo-terminal
// (ncurses: first screen, resize, q and Ctrl-C), with --once (plain text), and in batch mode (no terminal).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/testing/process.h"
#include "http/client.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using subprocess::Process;
using subprocess::ReadFile;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `env gpugeek args` through the shell (stdout a pipe, not a terminal), capturing stdout and stderr.
Result RunGpugeek(const std::string& args, const std::string& prefix = "") {
  static int calls = 0;
  const std::string err_path = fmt::format("{}gpugeek_top_stderr_{}_{}", ::testing::TempDir(), getpid(), calls++);
  const std::string cmd = fmt::format("{} {} {} 2>{}", prefix, GPUGEEK_BINARY, args, err_path);
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadFile(err_path);
  std::remove(err_path.c_str());
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The first line matching `re`, or "" (and a test failure naming what was looked for).
std::string LineMatching(const std::string& text, const std::string& re) {
  for (const std::string& line : Lines(text)) {
    if (std::regex_match(line, std::regex(re))) return line;
  }
  ADD_FAILURE() << "no line matches /" << re << "/ in:\n" << text;
  return "";
}

// `gpugeek args` on the slave side of a pseudo-terminal of cols x rows with TERM=xterm.
class PtyProcess {
 public:
  PtyProcess(std::vector<std::string> args, int cols, int rows) {
    args.insert(args.begin(), GPUGEEK_BINARY);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The environment is built before fork: the child only execs.
    env_.push_back("TERM=xterm");
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TERM=", 5) != 0 && std::strncmp(*e, "LINES=", 6) != 0 &&
          std::strncmp(*e, "COLUMNS=", 8) != 0) {
        env_.push_back(*e);
      }
    }
    std::vector<char*> envp;
    for (auto& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    struct winsize ws = {};
    ws.ws_col = static_cast<unsigned short>(cols);
    ws.ws_row = static_cast<unsigned short>(rows);
    pid_ = forkpty(&master_, nullptr, nullptr, &ws);
    if (pid_ == 0) {
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }
  bool started() const { return pid_ > 0 && master_ >= 0; }

  // Reads what the program draws until `done(all output so far)` or `timeout`; true when done.
  bool ReadUntil(const std::function<bool(const std::string&)>& done, std::chrono::steady_clock::duration timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!done(output_)) {
      if (std::chrono::steady_clock::now() >= end || !ReadSome(100)) return done(output_);
    }
    return true;
  }
  void Send(const std::string& keys) { ASSERT_EQ(write(master_, keys.data(), keys.size()), ssize_t(keys.size())); }
  void Resize(int cols, int rows) {
    struct winsize ws = {};
    ws.ws_col = static_cast<unsigned short>(cols);
    ws.ws_row = static_cast<unsigned short>(rows);
    ASSERT_EQ(ioctl(master_, TIOCSWINSZ, &ws), 0);  // the kernel sends the program SIGWINCH
  }
  // Waits (draining its output) up to `timeout` for the program to exit; its wait status, or -1.
  int Wait(std::chrono::steady_clock::duration timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        while (ReadSome(0)) {
        }
        return status;
      }
      ReadSome(50);
    }
    return -1;
  }
  const std::string& output() const { return output_; }

 private:
  // Appends what is readable within `wait_ms`; false at end of file (the program exited) or on error.
  bool ReadSome(int wait_ms) {
    struct pollfd p = {.fd = master_, .events = POLLIN, .revents = 0};
    const int ready = poll(&p, 1, wait_ms);
    if (ready <= 0) return ready == 0;
    char buf[4096];
    const ssize_t n = read(master_, buf, sizeof(buf));
    if (n <= 0) return false;  // EIO once the slave side is closed
    output_.append(buf, static_cast<size_t>(n));
    return true;
  }

  std::vector<std::string> env_;
  int master_ = -1;
  pid_t pid_ = -1;
  std::string output_;
};

constexpr char kEnterAltScreen[] = "\x1b[?1049h";  // xterm's smcup
constexpr char kLeaveAltScreen[] = "\x1b[?1049l";  // xterm's rmcup

class TopCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("gpugeek_top_test_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    server_ = new Process({GPUGEEK_BINARY, "server", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
                           "--data-dir", (*dir_ / "server").string()},
                          *dir_ / "server.log");
    const std::regex listening(
        "listening on (https://127\\.0\\.0\\.1:[0-9]+), agents on (https://127\\.0\\.0\\.1:[0-9]+)");
    std::string agent_url;
    for (int i = 0; i < 200 && url_->empty(); ++i) {
      std::smatch m;
      const std::string out = server_->output();
      if (std::regex_search(out, m, listening)) {
        *url_ = m[1];
        agent_url = m[2];
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_FALSE(url_->empty()) << "server did not start: " << server_->output();
    *admin_token_ = subprocess::UseAdminToken(*dir_ / "server");
    *ca_file_ = subprocess::UseServerCa(*dir_ / "server");
    {
      auto join = Client().Post("/v1/join-tokens", {{"uses", 100}});
      ASSERT_TRUE(join.ok()) << join.status();
      subprocess::UseJoinToken((*join)["token"]);
    }
    // Node names carry the pid: test processes running side by side share this host's cgroups.
    *node_a_ = "top-a-" + std::to_string(::getpid());
    *node_b_ = "top-b-" + std::to_string(::getpid());
    for (const auto& [name, spec] : {std::pair(*node_a_, "4xA100-SXM-80GB"), std::pair(*node_b_, "2xL4")}) {
      agents_->push_back(std::make_unique<Process>(
          std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", *ca_file_, "--name",
                                   name, "--emulate", spec, "--data-dir", (*dir_ / name).string()},
          *dir_ / (name + ".log")));
    }
    // Both registered, each with a telemetry sample per GPU.
    bool ready = false;
    for (int i = 0; i < 400 && !ready; ++i) {
      auto nodes = Client().Get("/v1/nodes");
      ready = nodes.ok() && (*nodes)["nodes"].size() == 2;
      for (const json& n : ready ? (*nodes)["nodes"] : json::array()) {
        ready = ready && n["samples"].size() == n["inventory"]["gpus"].size();
      }
      if (!ready) std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_TRUE(ready) << "agents did not register and report samples";
    ASSERT_TRUE(Client().Post("/v1/tenants", {{"name", "team-top"}}).ok());
    auto job = Client().Post(
        "/v1/jobs", {{"spec_yaml", "name: toptest\nresources: {accelerators: A100-SXM-80GB:2}\nrun: sleep 300\n"},
                     {"tenant", "team-top"}});
    ASSERT_TRUE(job.ok()) << job.status();
    *job_id_ = (*job)["id"];
    ASSERT_TRUE(WaitFor("RUNNING")) << "job did not start";
  }
  static void TearDownTestSuite() {
    if (!job_id_->empty()) {
      (void)Client().Post("/v1/jobs/" + *job_id_ + "/cancel", json::object());
      WaitFor("CANCELLED");
    }
    agents_->clear();
    delete server_;
    server_ = nullptr;
    fs::remove_all(*dir_);
  }
  static http::Client& Client() {
    static std::unique_ptr<http::Client> c;
    c = *http::Client::Create({.base_url = *url_, .ca_file = *ca_file_, .bearer_token = *admin_token_});
    return *c;
  }
  static bool WaitFor(const std::string& state) {
    for (int i = 0; i < 600; ++i) {
      auto job = Client().Get("/v1/jobs/" + *job_id_);
      if (job.ok() && (*job)["state"] == state) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  static inline fs::path* dir_ = nullptr;
  static inline std::string* url_ = new std::string();
  static inline std::string* admin_token_ = new std::string();
  static inline std::string* ca_file_ = new std::string();
  static inline std::string* node_a_ = new std::string();
  static inline std::string* node_b_ = new std::string();
  static inline std::string* job_id_ = new std::string();
  static inline Process* server_ = nullptr;
  static inline std::vector<std::unique_ptr<Process>>* agents_ = new std::vector<std::unique_ptr<Process>>();
};

TEST_F(TopCommandTest, InteractiveShowsThePoolUnderAPseudoTerminalAndQuitsOnQ) {
  PtyProcess top({"top", "--server", *url_, "--interval", "0.5"}, 160, 50);
  ASSERT_TRUE(top.started());
  const auto first_screen = [&](const std::string& out) {
    return Contains(out, *node_a_) && Contains(out, *node_b_) && Contains(out, "toptest") && Contains(out, "RUNNING");
  };
  ASSERT_TRUE(top.ReadUntil(first_screen, seconds(20))) << top.output();
  EXPECT_TRUE(Contains(top.output(), kEnterAltScreen)) << top.output();
  EXPECT_TRUE(Contains(top.output(), "A100-SXM-80GB")) << top.output();
  EXPECT_TRUE(Contains(top.output(), "team-top")) << top.output();
  EXPECT_TRUE(Contains(top.output(), *url_)) << top.output();
  top.Send("q");
  const int status = top.Wait(seconds(10));
  ASSERT_TRUE(WIFEXITED(status)) << status << "\n" << top.output();
  EXPECT_EQ(WEXITSTATUS(status), 0) << top.output();
  // The terminal is restored: the alternate screen is left after it was entered.
  EXPECT_GT(top.output().rfind(kLeaveAltScreen), top.output().rfind(kEnterAltScreen)) << top.output();
}

TEST_F(TopCommandTest, InteractiveRedrawsWhenTheTerminalIsResized) {
  // A long interval: what is drawn after the resize is the redraw, not the next refresh.
  PtyProcess top({"top", "--server", *url_, "--interval", "60"}, 160, 50);
  ASSERT_TRUE(top.started());
  ASSERT_TRUE(top.ReadUntil([&](const std::string& out) { return Contains(out, *node_b_); }, seconds(20)))
      << top.output();
  std::this_thread::sleep_for(milliseconds(300));
  top.ReadUntil([](const std::string&) { return false; }, milliseconds(200));  // the first screen, drained
  const size_t mark = top.output().size();
  top.Resize(100, 30);
  EXPECT_TRUE(
      top.ReadUntil([&](const std::string& out) { return out.find(*node_a_, mark) != std::string::npos; }, seconds(10)))
      << top.output().substr(mark);
  top.Send("q");
  const int status = top.Wait(seconds(10));
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(TopCommandTest, InteractiveKeepsRetryingAnUnreachableServerAndQuitsOnCtrlC) {
  PtyProcess top({"top", "--server", "http://127.0.0.1:1", "--interval", "0.2"}, 120, 30);
  ASSERT_TRUE(top.started());
  ASSERT_TRUE(top.ReadUntil([](const std::string& out) { return Contains(out, "! cannot reach"); }, seconds(20)))
      << top.output();
  EXPECT_TRUE(Contains(top.output(), "retrying every 0.2s")) << top.output();
  // Still running a second later, and still refreshing: each refresh redraws the clock of the title line.
  const size_t mark = top.output().size();
  EXPECT_EQ(top.Wait(seconds(1)), -1) << "exited on an unreachable server:\n" << top.output();
  // ncurses sends only what changed: the clock's next second (bounded, for a loaded machine).
  EXPECT_TRUE(top.ReadUntil([mark](const std::string& out) { return out.size() > mark; }, seconds(10)));
  top.Send("\x03");  // Ctrl-C: SIGINT from the terminal
  const int status = top.Wait(seconds(10));
  ASSERT_TRUE(WIFEXITED(status)) << status << "\n" << top.output();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_GT(top.output().rfind(kLeaveAltScreen), top.output().rfind(kEnterAltScreen)) << top.output();
}

TEST_F(TopCommandTest, OncePrintsOnePlainScreenWithTheLiveValues) {
  auto nodes = Client().Get("/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  Result r = RunGpugeek("top --once --server " + *url_);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(Contains(r.out, "\x1b")) << "escape sequences in plain text:\n" << r.out;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0].rfind("gpugeek top  " + *url_ + "  ", 0), 0u) << lines[0];
  EXPECT_TRUE(std::regex_match(lines[1], std::regex("nodes 2/2 up  GPUs 2/6 allocated  milli-GPU 2000/6000  "
                                                    "FGD frag [0-9]+\\.[0-9]% \\(policy FGDFit\\)  pending 0")))
      << lines[1];
  LineMatching(r.out, *node_a_ + " +ready +on-demand +4 x A100-SXM-80GB +2000/4000");
  LineMatching(r.out, *node_b_ + " +ready +on-demand +2 x L4 +0/2000");
  LineMatching(r.out, " +GPU  UTIL +MEMORY +TEMP  POWER  HEALTH +JOBS");
  LineMatching(r.out, *node_a_ + "  4 x A100-SXM-80GB");
  // The emulated GPUs idle at 0 %, nothing used, 30 C and a tenth of their TDP: the values the agent
  // reported, as the API returns them.
  for (const json& n : (*nodes)["nodes"]) {
    const std::string total = n["name"] == *node_a_ ? "80\\.0 GiB" : "2[0-9]\\.[0-9] GiB";
    for (const json& s : n["samples"]) {
      EXPECT_EQ(s["telemetry"]["temperature_celsius"], 30);
      const int watts = static_cast<int>((s["telemetry"]["power_milliwatts"].get<int>() + 500) / 1000);
      LineMatching(r.out,
                   fmt::format(" +[0-9]  \\[ {{10}}\\]   0%  \\[ {{10}}\\] 0 B/{} +30C +{}W  ok.*", total, watts));
    }
  }
  // The job's two GPUs name it.
  size_t on_gpus = 0;
  const std::regex on_gpu(".*W  ok +" + *job_id_);
  for (const std::string& line : Lines(r.out)) on_gpus += std::regex_match(line, on_gpu) ? 1 : 0;
  EXPECT_EQ(on_gpus, 2u) << r.out;
  LineMatching(r.out, "ID +NAME +STATE +TENANT +GPUS +NODES +AGE");
  LineMatching(r.out, *job_id_ + "  toptest  RUNNING  team-top +2  " + *node_a_ + " +[0-9]+[sm]");
}

TEST_F(TopCommandTest, WithoutATerminalPrintsAScreenEveryInterval) {
  // Batch mode runs until killed: 2.5 s at 0.5 s intervals is several screens.
  Result r = RunGpugeek("top --interval 0.5 --server " + *url_, "timeout -s TERM 2.5");
  EXPECT_EQ(r.exit_code, 124) << r.err;  // timeout's "killed it"
  size_t screens = 0;
  for (const std::string& line : Lines(r.out)) screens += line.rfind("gpugeek top  " + *url_, 0) == 0 ? 1 : 0;
  EXPECT_GE(screens, 3u) << r.out;
  EXPECT_FALSE(Contains(r.out, "\x1b")) << r.out;
}

TEST(TopCommandFlagsTest, OnceFailsWhenTheServerCannotBeReached) {
  Result r = RunGpugeek("top --once --server http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err.rfind("gpugeek top: ", 0), 0u) << r.err;
  EXPECT_TRUE(Contains(r.err, "127.0.0.1:1")) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(TopCommandFlagsTest, IntervalMustBePositive) {
  for (const std::string bad : {"0", "-1", "100000", "1e-09", "0.05"}) {
    Result r = RunGpugeek("top --once --server http://127.0.0.1:1 --interval=" + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(r.err,
              fmt::format("gpugeek top: --interval must be a number of seconds from 0.1 to 86400, got {}\n", bad))
        << bad;
  }
}

}  // namespace
}  // namespace gpugeek::cli
