#pragma once
// ModelRegistry: who besides its owner may use a model of the registry, and the log of every pull.
//
// A model's versions are folders in its owner tenant's content-addressed version store (the datasets'
// store, data/version_store.h, under <data_dir>/models/<tenant>; model_routes.h serves them). This class
// holds what the store does not:
//   - grants: the owner tenant gives another tenant rights on one model: `pull` (download its files),
//     `deploy` (run a service or inference job on it), `finetune` (train a job from it). The owner
//     tenant has every right; any other tenant has only what it was granted, and a tenant with no right
//     on a model cannot learn that it exists (every answer about it is the one for an absent model).
//   - the pull log: one record per pull (who, from which tenant, which version, when), kept with the
//     owner's store and readable by the owner.
//   - pull tickets: another tenant's client may download a version's objects only after its pull was
//     logged (a ticket for (tenant, owner, commit) valid kPullTicketTtl), so no copy of a shared model
//     leaves without a record.
//
// Files: <dir>/<owner>/grants.json ({"format": 1, "models": {MODEL: {TENANT: [RIGHT...]}}}, replaced
// atomically) and <dir>/<owner>/pulls.jsonl (one JSON object per line, appended and fsynced before the
// pull is answered). Both are read once at Open; a damaged line of the log is skipped and counted.
// Thread-safety: every method may be called concurrently. mu_ guards the maps only; files are written
// under write_mu_, which no other path takes.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace gpugeek::controlplane {

// A right on a model, as a bit of ModelRights.
enum ModelRight : uint32_t { kModelPull = 1, kModelDeploy = 2, kModelFinetune = 4 };
using ModelRights = uint32_t;
inline constexpr ModelRights kAllModelRights = kModelPull | kModelDeploy | kModelFinetune;

// "pull,deploy" <-> bits. InvalidArgument naming an unknown right and the three known ones.
absl::StatusOr<ModelRights> ParseModelRights(const std::vector<std::string>& names);
std::vector<std::string> ModelRightNames(ModelRights rights);

struct ModelGrant {
  std::string owner;  // the tenant whose model it is
  std::string model;
  std::string grantee;  // the tenant granted
  ModelRights rights = 0;
};

struct PullRecord {
  int64_t seq = 0;          // 1, 2, ... within the owner's log
  int64_t time_unix_s = 0;  // wall clock
  std::string user;         // who pulled
  std::string tenant;       // their tenant
  std::string model;
  std::string commit;
};

class ModelRegistry {
 public:
  static constexpr std::chrono::seconds kPullTicketTtl{std::chrono::hours(24)};
  static constexpr size_t kMaxPullTickets = 100'000;  // oldest dropped first
  static constexpr size_t kMaxGrantsPerModel = 1000;

  // Reads every owner's grants and log counts under `dir` (created 0700). Unavailable when unreadable.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Open(const std::string& dir, const Clock& clock);

  // The rights of `tenant` on `owner`'s model: all for the owner, the grant's otherwise (0 = none).
  ModelRights RightsOf(const std::string& owner, const std::string& model, const std::string& tenant) const;

  // Sets (rights != 0) or removes (0) the grant of `grantee` on `owner`'s model; durable on return.
  // InvalidArgument for a grant to the owner itself; ResourceExhausted past kMaxGrantsPerModel.
  absl::Status SetGrant(const std::string& owner, const std::string& model, const std::string& grantee,
                        ModelRights rights);
  // Grants on one model of `owner`, by grantee.
  std::vector<ModelGrant> GrantsOn(const std::string& owner, const std::string& model) const;
  // Every grant given to `tenant` by other tenants, by (owner, model).
  std::vector<ModelGrant> GrantsTo(const std::string& tenant) const;

  // Appends a pull of `owner`'s model to its log (durable on return) and gives `record.tenant` a pull
  // ticket for the commit. Returns the record with seq and time set.
  absl::StatusOr<PullRecord> RecordPull(const std::string& owner, PullRecord record);
  // The owner's pull log of `model` ("" = every model): records with seq > after_seq, oldest first, at
  // most `limit`.
  absl::StatusOr<std::vector<PullRecord>> Pulls(const std::string& owner, const std::string& model, int64_t after_seq,
                                                size_t limit) const;
  // Whether `tenant` holds an unexpired pull ticket for `owner`'s commit.
  bool HasPullTicket(const std::string& tenant, const std::string& owner, const std::string& commit) const;

 private:
  ModelRegistry(std::string dir, const Clock& clock) : dir_(std::move(dir)), clock_(clock) {}
  absl::Status Load();
  absl::Status WriteGrants(const std::string& owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  std::string OwnerDir(const std::string& owner) const;

  const std::string dir_;
  const Clock& clock_;
  Mutex write_mu_;  // serialises file writes; taken before mu_, never the other way round
  mutable Mutex mu_;
  // (owner, model, grantee) -> rights.
  std::map<std::tuple<std::string, std::string, std::string>, ModelRights> grants_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> last_pull_seq_ ABSL_GUARDED_BY(mu_);  // owner -> last seq written
  // (tenant, owner, commit) -> when the ticket expires (monotonic).
  std::map<std::tuple<std::string, std::string, std::string>, MonoTime> tickets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpugeek::controlplane
