#include "cli/log_reader.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "absl/strings/escaping.h"
#include "common/status_macros.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// Bytes per request: the server's most (log_routes.h).
constexpr size_t kReadLimit = size_t{1} << 20;
// With --rank all, a follower waits on one rank at a time: the others' new lines show within this.
constexpr int kAllRanksWaitMs = 1000;
// A long-poll that came back this fast without bytes was not held (the server's waiters are all
// taken, or the job's state changed): pause before asking again.
constexpr auto kQuickAnswer = std::chrono::milliseconds(100);
constexpr auto kBackoff = std::chrono::milliseconds(500);
// A follower rides out a server restart: this many retries, one second apart.
constexpr int kRetries = 5;

// One Poll; while following, an unreachable server is retried kRetries times a second apart.
absl::StatusOr<bool> PollRetrying(MemberLogReader& reader, bool follow, int wait_ms, std::string* out) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<bool> progress = reader.Poll(wait_ms, out);
    if (progress.ok() || !follow || progress.status().code() != absl::StatusCode::kUnavailable || attempt >= kRetries) {
      return progress;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

int JobExitCode(const std::string& state, const json& exit_code) {
  if (state == "SUCCEEDED") return 0;
  if (state == "CANCELLED") return 130;
  if (state == "FAILED") {
    if (exit_code.is_number_integer()) {
      const int64_t code = exit_code.get<int64_t>();
      if (code >= 1 && code <= 255) return static_cast<int>(code);
    }
    return 1;
  }
  return 0;
}

std::string RankLinePrefixer::Add(int rank, std::string_view bytes) {
  std::string out;
  std::string& partial = partial_[rank];
  size_t start = 0;
  for (size_t nl = bytes.find('\n'); nl != std::string_view::npos; nl = bytes.find('\n', start)) {
    out += fmt::format("[rank {}] ", rank);
    out += partial;
    out.append(bytes.data() + start, nl + 1 - start);
    partial.clear();
    start = nl + 1;
  }
  partial.append(bytes.data() + start, bytes.size() - start);
  return out;
}

std::string RankLinePrefixer::Flush() {
  std::string out;
  for (auto& [rank, partial] : partial_) {
    if (partial.empty()) continue;
    out += fmt::format("[rank {}] {}\n", rank, partial);
    partial.clear();
  }
  return out;
}

MemberLogReader::MemberLogReader(http::Client& client, LogReadOptions options)
    : client_(client), options_(std::move(options)) {}

absl::StatusOr<json> MemberLogReader::Get(int64_t epoch, int wait_ms, bool with_epoch) {
  std::string path =
      fmt::format("/v1/jobs/{}/logs?rank={}&offset={}&limit={}&wait_ms={}", http::UrlEncode(options_.job_id),
                  options_.rank, with_epoch ? offset_ : 0, kReadLimit, wait_ms);
  if (with_epoch) path += fmt::format("&epoch={}", epoch);
  return client_.Get(path);
}

void MemberLogReader::Plan(const json& answer) {
  std::vector<int64_t> known;
  for (const json& a : answer.value("epochs", json::array())) known.push_back(a.value("epoch", int64_t{0}));
  // Following, the latest placement is shown even before it logged a byte.
  if (options_.follow && answer.value("latest_epoch", json()).is_number_integer()) {
    known.push_back(answer["latest_epoch"].get<int64_t>());
  }
  for (int64_t e : known) {
    if (epochs_.empty() || e > epochs_.back()) epochs_.push_back(e);
  }
  if (epochs_.size() > 1 && !headers_) headers_ = true;  // placements from the next one on get a header
}

void MemberLogReader::Header(std::string* out) {
  if (last_char_ != '\n') *out += '\n';
  *out += fmt::format("== attempt {} (epoch {}) ==\n", current_ + 1, epochs_[current_]);
  last_char_ = '\n';
  header_pending_ = false;
}

absl::StatusOr<bool> MemberLogReader::Poll(int wait_ms, std::string* out) {
  if (done_) return false;
  if (!started_ && options_.epoch) epochs_ = {*options_.epoch};
  json answer;
  bool have_answer = false;
  if (epochs_.empty()) {
    // Which placements are there? The answer is the latest one's from byte 0. Following a rank not
    // placed yet, this waits for its placement (the server wakes on the job's state change).
    ASSIGN_OR_RETURN(answer, Get(0, started_ && options_.follow ? wait_ms : 0, /*with_epoch=*/false));
    started_ = true;
    last_ = answer;
    Plan(answer);
    if (epochs_.empty()) {
      if (!options_.follow || answer.value("complete", false)) done_ = true;
      return false;
    }
    headers_ = epochs_.size() > 1;
    header_pending_ = headers_;
    have_answer = epochs_.front() == answer.value("epoch", int64_t{-1});
    if (!have_answer) return true;  // the first placement is read next
  }
  started_ = true;
  if (!have_answer) {
    const bool at_latest = current_ + 1 >= epochs_.size();
    ASSIGN_OR_RETURN(answer, Get(epochs_[current_], options_.follow && at_latest ? wait_ms : 0, true));
  }
  last_ = answer;
  std::string data;
  if (!absl::Base64Unescape(answer.value("data_b64", std::string()), &data)) {
    return absl::InternalError("the server's data_b64 is not base64");
  }
  bool progress = false;
  if (!data.empty()) {
    if (header_pending_) Header(out);
    *out += data;
    last_char_ = data.back();
    progress = true;
  }
  offset_ = answer.value("next_offset", uint64_t{0});
  if (!options_.epoch) Plan(answer);
  if (offset_ >= answer.value("size", uint64_t{0})) {
    if (current_ + 1 < epochs_.size()) {
      if (header_pending_) Header(out);  // an attempt that logged nothing still shows it happened
      ++current_;
      offset_ = 0;
      header_pending_ = headers_;
      progress = true;
    } else if (!options_.follow || answer.value("complete", false)) {
      if (header_pending_) Header(out);
      done_ = true;
    }
  }
  return progress;
}

absl::StatusOr<json> ReadJobLogs(http::Client& client, const JobLogsOptions& options,
                                 const std::function<void(std::string_view)>& write) {
  const auto poll = [&](MemberLogReader& reader, int wait_ms, std::string* out) -> absl::StatusOr<bool> {
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(bool progress, PollRetrying(reader, options.follow, wait_ms, out));
    if (options.follow && wait_ms > 0 && !progress && !reader.done() &&
        std::chrono::steady_clock::now() - start < kQuickAnswer) {
      std::this_thread::sleep_for(kBackoff);
    }
    return progress;
  };

  if (options.rank) {
    MemberLogReader reader(
        client, {.job_id = options.job_id, .rank = *options.rank, .epoch = options.epoch, .follow = options.follow});
    while (!reader.done()) {
      std::string out;
      ASSIGN_OR_RETURN(bool progress, poll(reader, options.wait_ms, &out));
      (void)progress;
      if (!out.empty()) write(out);
    }
    return reader.last();
  }

  // Every rank: sweep them without waiting; when none had anything new, wait on one, in turn.
  std::vector<std::unique_ptr<MemberLogReader>> readers;
  const auto add_reader = [&] {
    readers.push_back(std::make_unique<MemberLogReader>(client, LogReadOptions{.job_id = options.job_id,
                                                                               .rank = static_cast<int>(readers.size()),
                                                                               .epoch = options.epoch,
                                                                               .follow = options.follow}));
  };
  add_reader();
  RankLinePrefixer prefixer;
  json last;
  size_t turn = 0;
  const auto feed = [&](size_t i, int wait_ms) -> absl::StatusOr<bool> {
    std::string out;
    ASSIGN_OR_RETURN(bool progress, poll(*readers[i], wait_ms, &out));
    if (!out.empty()) write(prefixer.Add(static_cast<int>(i), out));
    last = readers[i]->last();
    // The gang's size is known once the job is placed.
    const int ranks = std::min(last.value("ranks", 0), 1024);
    while (readers.size() < static_cast<size_t>(ranks)) add_reader();
    return progress;
  };
  for (;;) {
    bool progress = false;
    for (size_t i = 0; i < readers.size(); ++i) {
      if (readers[i]->done()) continue;
      ASSIGN_OR_RETURN(bool p, feed(i, 0));
      progress = progress || p;
    }
    std::vector<size_t> open;
    for (size_t i = 0; i < readers.size(); ++i) {
      if (!readers[i]->done()) open.push_back(i);
    }
    if (open.empty()) break;
    if (!progress) {
      ASSIGN_OR_RETURN(bool p, feed(open[turn++ % open.size()], std::min(options.wait_ms, kAllRanksWaitMs)));
      (void)p;
    }
  }
  write(prefixer.Flush());
  return last;
}

}  // namespace gpugeek::cli
