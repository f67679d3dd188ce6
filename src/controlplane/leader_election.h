#pragma once
// LeaderElection: this process's part in an active/standby control plane (`gpugeek server --ha`,
// docs/postgres.md "Active/standby"): two or more servers on one PostgreSQL database, one of which leads
// by holding the lease row (store::PostgresStore "Leadership").
//
// A standby campaigns: every `poll` it tries to take the lease, which succeeds once the leader's lease
// expired (the leader died, hung or lost the database) or was released (a graceful stop), and otherwise
// reports the live leader so the standby's listeners can send clients there (standby.h). The leader then
// renews every `renew_every`; it stops leading (on_lost) when a renewal finds the lease taken over or
// expired, or when renewals have failed (the database unreachable) for so long that the lease may have
// expired by this process's monotonic clock: a renewal's lease runs from PostgreSQL's clock at the
// renewal, after the moment this process counts from, so it stops first. Between losing the lease and
// noticing, its writes are refused by the store's fencing (PostgresStore::FenceWrites).
//
// Failover time after a leader dies: at most `lease` (its last renewal's lease running out) + `poll`,
// plus the new leader's start (loading the store). Thread-safe: Campaign on one thread; Resign from any.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "store/postgres_store.h"

namespace gpugeek::controlplane {

struct LeaderElectionOptions {
  std::string holder;     // unique per process (e.g. host:pid:random); required
  std::string api_url;    // where this process serves users once it leads, as standbys redirect to it
  std::string agent_url;  // where it serves agents once it leads
  Duration lease = std::chrono::seconds(4);        // the lease's length from each renewal
  Duration renew_every = std::chrono::seconds(1);  // under lease / 2
  Duration poll = std::chrono::milliseconds(500);  // how often a standby tries
  Clock* clock = nullptr;                          // monotonic time of renewals; nullptr = RealClock()
};

class LeaderElection {
 public:
  // `store` is borrowed and must outlive this object. InvalidArgument for an empty holder, a lease under
  // 1 s or renew_every not under lease / 2.
  static absl::StatusOr<std::unique_ptr<LeaderElection>> Create(store::PostgresStore& store,
                                                                const LeaderElectionOptions& options);
  ~LeaderElection();  // stops renewing (without releasing the lease: Resign does that)

  // Blocks until this process takes the lease, returning its fencing token, or until `stopping()` is true
  // (checked every poll), returning std::nullopt. `seen` gets the live leader at each poll that finds
  // one, or nullptr while none is (an election under way). Store errors are logged and tried again.
  std::optional<int64_t> Campaign(const std::function<bool()>& stopping,
                                  const std::function<void(const store::PostgresStore::Leadership*)>& seen);
  // After Campaign returned `token`: renews on a thread of its own and calls `on_lost` once (on that
  // thread or a watchdog's, with the reason) when the lease is lost as the file comment says, or when the
  // last renewal's lease may have run out while a renewal is still waiting on the database.
  void KeepLeading(int64_t token, std::function<void(const std::string& why)> on_lost);
  // Stops renewing and ends the lease now (a graceful stop: a standby takes over at its next poll).
  void Resign();

 private:
  LeaderElection(store::PostgresStore& store, const LeaderElectionOptions& options);
  void RenewLoop(int64_t token);
  // Calls on_lost_ once the last renewal's lease may have run out (last_renewal_ + lease - renew_every),
  // whether or not a renewal call is still blocked on the database.
  void WatchLoop(int64_t token);
  void Lost(const std::string& why);
  // Waits `d`, or less when Resign is called; false once it was.
  bool Wait(Duration d);

  store::PostgresStore& store_;
  const LeaderElectionOptions options_;
  Clock& clock_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool resigned_ = false;       // guarded by mu_
  int64_t token_ = 0;           // the lease held; guarded by mu_
  MonoTime acquire_started_{};  // before the TryAcquire that took the lease; Campaign's thread
  // Monotonic ns of the start of the last successful renewal (or of the taking); read by the watchdog.
  std::atomic<int64_t> last_renewal_ns_{0};
  std::atomic<bool> lost_{false};
  std::function<void(const std::string&)> on_lost_;  // set by KeepLeading before the threads start
  std::thread renewer_;
  std::thread watchdog_;
};

}  // namespace gpugeek::controlplane
