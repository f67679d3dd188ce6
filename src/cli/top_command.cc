// `gpugeek top [--server URL] [--interval SECONDS] [--once] [--json]`: the pool at a glance, refreshed,
// like nvtop across the cluster. Reads GET /v1/nodes, /v1/pool and /v1/jobs every interval; the screen
// itself is top_view.h's RenderTop.
//
//   on a terminal          full screen (ncurses, alternate screen), redrawn every interval and on resize;
//                          q or Ctrl-C quits and restores the terminal; a server that cannot be reached
//                          shows an error line and is retried every interval
//   --once                 one screen as plain text, then exit; on a terminal it fits the terminal, else
//                          nothing is cut; a server that cannot be reached fails the command (exit 1)
//   stdout not a terminal  batch mode, like `top -b`: a plain-text screen every interval, nothing cut,
//                          separated by a blank line, until killed (use --once for one)
//   --json                 the data behind one screen ({"nodes", "pool", "jobs"}) as JSON; implies --once

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "absl/time/time.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/top_view.h"
#include "common/absl_fmt.h"

// Last, and without its macros (erase(), refresh(), timeout(), ... would clash with the headers above).
#define NCURSES_NOMACROS
#include <curses.h>

namespace gpugeek::cli {
namespace {

using nlohmann::json;

constexpr char kCmd[] = "top";
constexpr double kMaxIntervalSeconds = 86400;
// Three API calls a refresh: faster than 10 a second would load the server for nothing a human sees.
constexpr double kMinIntervalSeconds = 0.1;
constexpr int kJobsPage = 1000;  // the server's largest page

// The jobs to show: every job when they fit in one page, else the active ones (a page per state).
absl::StatusOr<json> FetchJobs(http::Client& client) {
  absl::StatusOr<json> all = client.Get(fmt::format("/v1/jobs?limit={}", kJobsPage));
  if (!all.ok()) return all.status();
  if (!(*all)["next_after"].is_string()) return (*all)["jobs"];
  json jobs = json::array();
  for (const char* state : {"RUNNING", "SCHEDULED", "PENDING"}) {
    absl::StatusOr<json> page = client.Get(fmt::format("/v1/jobs?limit={}&state={}", kJobsPage, state));
    if (!page.ok()) return page.status();
    for (json& j : (*page)["jobs"]) jobs.push_back(std::move(j));
  }
  return jobs;
}

// {"nodes": [...], "pool": {...}, "jobs": [...]}.
absl::StatusOr<json> Fetch(http::Client& client) {
  absl::StatusOr<json> nodes = client.Get("/v1/nodes");
  if (!nodes.ok()) return nodes.status();
  absl::StatusOr<json> pool = client.Get("/v1/pool");
  if (!pool.ok()) return pool.status();
  absl::StatusOr<json> jobs = FetchJobs(client);
  if (!jobs.ok()) return jobs.status();
  // Model services (first page: the ones a screen can show): versions, weights and the split observed.
  absl::StatusOr<json> services = client.Get("/v1/services?limit=50");
  json data = {{"nodes", (*nodes)["nodes"]}, {"pool", std::move(*pool)}, {"jobs", std::move(*jobs)}};
  if (services.ok() && (*services)["services"].is_array()) data["services"] = (*services)["services"];
  return data;
}

// Sets the screen's time to now.
void Stamp(TopScreen* screen) {
  const TimePoint now = RealClock().Now();
  screen->now = now;
  screen->clock =
      absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixNanos(now.time_since_epoch().count()), absl::LocalTimeZone());
}

// One refresh: the data, or the last data with the error.
void Refresh(http::Client& client, double interval, TopScreen* screen) {
  Stamp(screen);
  absl::StatusOr<json> data = Fetch(client);
  if (data.ok()) {
    screen->data = std::move(*data);
    screen->error.clear();
  } else {
    screen->error = fmt::format("{} (retrying every {}s)", data.status().message(), interval);
  }
}

Duration Seconds(double s) { return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s)); }

void PrintLines(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) std::cout << line << "\n";
  std::cout << std::flush;
}

volatile sig_atomic_t g_quit = 0;
extern "C" void OnQuitSignal(int) { g_quit = 1; }

// Refreshes on its own thread, so keys and resizes are answered while a request waits on the server.
class Refresher {
 public:
  Refresher(std::unique_ptr<http::Client> client, std::string server, double interval)
      : client_(std::move(client)), interval_(interval) {
    screen_.server = std::move(server);
    screen_.hint = "q: quit";
    thread_ = std::thread([this] { Run(); });
  }
  ~Refresher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Bumped by every refresh.
  uint64_t Generation() {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }
  // The latest screen and its generation.
  TopScreen Screen(uint64_t* generation) {
    std::lock_guard<std::mutex> lock(mu_);
    *generation = generation_;
    return screen_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      TopScreen next = screen_;
      lock.unlock();
      Refresh(*client_, interval_, &next);
      lock.lock();
      screen_ = std::move(next);
      ++generation_;
      cv_.wait_for(lock, Seconds(interval_), [this] { return stop_; });
    }
  }

  std::unique_ptr<http::Client> client_;  // used by the thread only
  const double interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  TopScreen screen_;
  uint64_t generation_ = 0;
  std::thread thread_;
};

// Draws `lines` on the whole screen: the title line in reverse video, error lines in red.
void Draw(const std::vector<std::string>& lines, bool color) {
  erase();
  const int rows = LINES, cols = COLS;
  for (int i = 0; i < rows && i < static_cast<int>(lines.size()); ++i) {
    const std::string& line = lines[static_cast<size_t>(i)];
    attr_t attr = A_NORMAL;
    if (i == 0) attr = A_REVERSE | A_BOLD;
    if (line.rfind("! ", 0) == 0) attr = color ? (COLOR_PAIR(1) | A_BOLD) : A_BOLD;
    attron(attr);
    // The title bar spans the width; the bottom-right cell stays empty (writing it would scroll).
    std::string text =
        i == 0 ? line + std::string(static_cast<size_t>(std::max(0, cols - static_cast<int>(line.size()))), ' ') : line;
    const int n = std::min<int>(static_cast<int>(text.size()), i == rows - 1 ? cols - 1 : cols);
    mvaddnstr(i, 0, text.c_str(), n);
    attroff(attr);
  }
  refresh();
}

void RunInteractive(std::unique_ptr<http::Client> client, const std::string& server, double interval) {
  // Installed before ncurses starts, so it keeps them (it only takes over signals left at their default).
  struct sigaction sa = {};
  sa.sa_handler = OnQuitSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int = {}, old_term = {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  SCREEN* term = newterm(nullptr, stdout, stdin);
  if (term == nullptr) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    const char* name = std::getenv("TERM");
    Fail(kCmd, fmt::format("cannot drive this terminal (TERM={}); use --once", name != nullptr ? name : "unset"));
  }
  cbreak();  // keys one at a time; Ctrl-C still raises SIGINT
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  timeout(100);  // getch waits at most 100 ms, so the loop sees new data and signals
  bool color = false;
  if (has_colors()) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_RED, -1);
    color = true;
  }
  {
    Refresher refresher(std::move(client), server, interval);
    uint64_t drawn = UINT64_MAX;
    bool resized = true;
    while (g_quit == 0) {
      if (refresher.Generation() != drawn || resized) {
        const TopScreen screen = refresher.Screen(&drawn);
        Draw(RenderTop(screen, COLS, LINES), color);
        resized = false;
      }
      const int key = getch();
      if (key == 'q' || key == 'Q') break;
      if (key == KEY_RESIZE) resized = true;
    }
    endwin();  // the terminal is back before waiting for a request in flight
  }
  delscreen(term);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
}

// The terminal's size, or 0 x 0 when stdout is not one.
void TerminalSize(int* width, int* height) {
  struct winsize ws = {};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
    *width = ws.ws_col;
    *height = ws.ws_row;
  } else {
    *width = *height = 0;
  }
}

}  // namespace

void RegisterTopCommand(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    double interval = 1;
    bool once = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "top", "The pool at a glance, refreshed (like nvtop across the cluster): nodes, GPU telemetry, jobs");
  sub->add_option("--interval", o->interval, "Seconds between refreshes (> 0; fractions allowed)")
      ->capture_default_str();
  sub->add_flag("--once", o->once,
                "Print one screen as plain text and exit (without a terminal and without --once, a screen is "
                "printed every interval)");
  AddClientFlags(sub, &o->flags);
  sub->callback([o] {
    if (!(o->interval >= kMinIntervalSeconds) || o->interval > kMaxIntervalSeconds) {
      Fail(kCmd,
           fmt::format("--interval must be a number of seconds from {} to {}, got {}", kMinIntervalSeconds,
                       kMaxIntervalSeconds, o->interval),
           kExitUsage);
    }
    const std::string server = ResolveServerUrl(o->flags);
    auto client = Connect(kCmd, o->flags, std::chrono::seconds(5));
    if (o->once || o->flags.json) {
      TopScreen screen{.server = server};
      Stamp(&screen);
      screen.data = OrFail(kCmd, Fetch(*client));
      if (o->flags.json) {
        PrintJson(screen.data);
        return;
      }
      int width = 0, height = 0;
      TerminalSize(&width, &height);
      PrintLines(RenderTop(screen, width, height));
      return;
    }
    if (!isatty(STDOUT_FILENO)) {
      TopScreen screen{.server = server};
      for (bool first = true;; first = false) {
        Refresh(*client, o->interval, &screen);
        if (!first) std::cout << "\n";
        PrintLines(RenderTop(screen, 0, 0));
        std::this_thread::sleep_for(Seconds(o->interval));
      }
    }
    RunInteractive(std::move(client), server, o->interval);
  });
}

}  // namespace gpugeek::cli
