#include "controlplane/leader_election.h"

#include <fmt/format.h>

#include "common/absl_fmt.h"
#include "spdlog/spdlog.h"

namespace gpugeek::controlplane {

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Create(store::PostgresStore& store,
                                                                       const LeaderElectionOptions& options) {
  if (options.holder.empty()) return absl::InvalidArgumentError("leader election: the holder id is empty");
  if (options.lease < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("leader election: the leader lease must last at least 1 s");
  }
  if (options.renew_every <= Duration::zero() || options.renew_every * 2 >= options.lease) {
    return absl::InvalidArgumentError("leader election: renew more often than every half lease");
  }
  if (options.poll <= Duration::zero()) return absl::InvalidArgumentError("leader election: poll must be above 0");
  return std::unique_ptr<LeaderElection>(new LeaderElection(store, options));
}

LeaderElection::LeaderElection(store::PostgresStore& store, const LeaderElectionOptions& options)
    : store_(store), options_(options), clock_(options.clock != nullptr ? *options.clock : RealClock()) {}

LeaderElection::~LeaderElection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    resigned_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

bool LeaderElection::Wait(Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !wake_.wait_for(lock, d, [this] { return resigned_; });
}

std::optional<int64_t> LeaderElection::Campaign(
    const std::function<bool()>& stopping, const std::function<void(const store::PostgresStore::Leadership*)>& seen) {
  std::string last_error;
  while (!stopping()) {
    acquire_started_ = clock_.Monotonic();
    absl::StatusOr<std::optional<int64_t>> taken =
        store_.TryAcquireLeadership(options_.holder, options_.api_url, options_.agent_url, options_.lease);
    if (taken.ok() && taken->has_value()) {
      std::lock_guard<std::mutex> lock(mu_);
      token_ = **taken;
      return token_;
    }
    absl::StatusOr<store::PostgresStore::Leadership> leader =
        taken.ok() ? store_.Leader() : absl::StatusOr<store::PostgresStore::Leadership>(taken.status());
    if (leader.ok()) {
      last_error.clear();
      const bool live = leader->remaining > Duration::zero() && leader->holder != options_.holder;
      seen(live ? &*leader : nullptr);
    } else {
      seen(nullptr);
      const std::string error(leader.status().message());
      if (error != last_error) spdlog::warn("leader election: {} (trying again every poll)", error);
      last_error = error;
    }
    if (!Wait(options_.poll)) break;
  }
  return std::nullopt;
}

void LeaderElection::KeepLeading(int64_t token, std::function<void(const std::string& why)> on_lost) {
  // The lease runs from PostgreSQL's clock at the taking, after this moment.
  last_renewal_ns_.store(acquire_started_.time_since_epoch().count());
  on_lost_ = std::move(on_lost);
  renewer_ = std::thread([this, token] { RenewLoop(token); });
  watchdog_ = std::thread([this, token] { WatchLoop(token); });
}

void LeaderElection::Lost(const std::string& why) {
  if (lost_.exchange(true)) return;
  on_lost_(why);
}

void LeaderElection::RenewLoop(int64_t token) {
  while (Wait(options_.renew_every)) {
    const MonoTime attempt = clock_.Monotonic();
    absl::Status st = store_.RenewLeadership(token, options_.lease);
    if (st.ok()) {
      last_renewal_ns_.store(attempt.time_since_epoch().count());
      continue;
    }
    if (st.code() == absl::StatusCode::kFailedPrecondition) {
      Lost(std::string(st.message()));
      return;
    }
    // Not renewed (the database unreachable, say): the watchdog ends the leadership in time.
    spdlog::warn("leader election: renewing the lease (token {}) failed: {}", token, st);
  }
}

void LeaderElection::WatchLoop(int64_t token) {
  while (Wait(options_.renew_every / 4)) {
    const MonoTime last{Duration(last_renewal_ns_.load())};
    // Lead on only while the lease surely still holds: a renewal's margin before it may have expired.
    if (clock_.Monotonic() >= last + options_.lease - options_.renew_every) {
      Lost(fmt::format("the lease (token {}) was not renewed for {} ms and may expire", token,
                       std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Monotonic() - last).count()));
      return;
    }
  }
}

void LeaderElection::Resign() {
  int64_t token = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    resigned_ = true;
    token = std::exchange(token_, 0);
  }
  wake_.notify_all();
  for (std::thread* t : {&renewer_, &watchdog_}) {
    if (t->joinable() && t->get_id() != std::this_thread::get_id()) t->join();
  }
  if (token == 0) return;
  if (absl::Status st = store_.ReleaseLeadership(token); !st.ok()) {
    spdlog::warn("leader election: releasing the lease (token {}): {}", token, st);
  }
}

}  // namespace gpugeek::controlplane
