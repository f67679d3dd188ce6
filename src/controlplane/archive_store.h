#pragma once
// ArchiveStore: the workdir archives tenants upload (`gpugeek submit` with `workdir:`), content-addressed
// by SHA-256, per tenant, sealed at rest with the tenant's data key.
//
// The problem: a job's code reaches its nodes through the server, once per distinct tree. An archive is
// named by the SHA-256 of its bytes, so a client asks whether the server has it (Has, HEAD) and uploads
// only when not; the same tree submitted again costs no upload. Archives are a tenant's data: a tenant
// sees only its own (another tenant's digest reads as absent), and they are sealed like secrets
// (crypto::SealedLogWriter records of at most 4 MiB under the tenant's data key, so a 1 GiB archive is
// written and read in bounded pieces). Layout: <dir>/<tenant>/<digest> (sealed, complete and verified),
// <dir>/<tenant>/<digest>.upload while an upload is in progress (removed at Open: an upload does not
// survive a restart).
//
// Uploads come in pieces (Put with offset and total), each one request body within the listener's body
// limit, appended in order. When the last piece arrives the bytes' SHA-256 must equal the digest and the
// archive must pass archive::CheckWorkdirArchiveStream (a readable tar, entry limit, no entry that would
// land outside a working folder); otherwise nothing is kept.
//
// Thread-safe. No lock is held across I/O: an upload in progress is marked busy while its piece is
// written, and a concurrent piece of the same upload is refused (Aborted).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "crypto/keyring.h"

namespace gpugeek::controlplane {

struct ArchiveStoreOptions {
  std::string dir;                                 // required: <data_dir>/archives
  crypto::Keyring* keyring = nullptr;              // required, borrowed; must outlive the store
  uint64_t max_archive_bytes = uint64_t{1} << 30;  // one archive, compressed bytes (`--max-archive-bytes`)
  uint64_t max_entries = 100'000;                  // files + folders + links in one archive (`--max-archive-files`)
  int max_uploads_in_progress = 64;                // across tenants; beyond, ResourceExhausted
};

class ArchiveStore {
 public:
  // Creates `dir` (0700) and removes uploads a previous run left unfinished. InvalidArgument without a
  // dir or keyring; Unavailable when the folder cannot be made.
  static absl::StatusOr<std::unique_ptr<ArchiveStore>> Open(const ArchiveStoreOptions& options);
  ~ArchiveStore();

  // Whether `tenant` ("" = default) has the complete archive `digest`.
  bool Has(const std::string& tenant, const std::string& digest) const;

  struct PutResult {
    uint64_t received = 0;  // bytes of the archive the server holds now
    bool complete = false;  // verified and stored (also when it was already)
    uint64_t entries = 0;   // when completed by this call: the archive's entries
  };
  // Appends `piece` at `offset` of the upload of archive `digest` (`total` bytes in all) for `tenant`.
  // Errors (each names the field and the fix): InvalidArgument for a digest that is not 64 hex digits,
  // a piece past `total`, a `total` differing from the upload's, bytes whose SHA-256 is not `digest`, or
  // an archive that fails the checks (nothing is kept); ResourceExhausted when `total` is over
  // max_archive_bytes or the archive over max_entries (the message names the limit; the route answers
  // 413), or too many uploads are in progress; FailedPrecondition when `offset` is not where the upload
  // stands (the message says where to continue); Aborted while another piece of it is being written;
  // Unavailable / DataLoss on I/O errors. An archive the tenant already has is complete at once.
  absl::StatusOr<PutResult> Put(const std::string& tenant, const std::string& digest, uint64_t offset, uint64_t total,
                                std::string_view piece);

  // Calls `sink` with the archive's bytes in order, in pieces of at most 4 MiB, until the end or until it
  // returns false. NotFound when the tenant has no such archive (as for another tenant's); DataLoss when
  // the sealed file does not open.
  absl::Status Read(const std::string& tenant, const std::string& digest,
                    const std::function<bool(std::string_view)>& sink) const;

  // Put calls that reached an upload (accepted or refused after validation), since Open: what tests count.
  uint64_t put_calls() const;
  const ArchiveStoreOptions& options() const { return options_; }

 private:
  struct Upload;
  explicit ArchiveStore(const ArchiveStoreOptions& options);
  std::string TenantDir(const std::string& tenant) const;
  std::string PathOf(const std::string& tenant, const std::string& digest) const;
  absl::Status Finish(const std::string& tenant, const std::string& digest, Upload& up, uint64_t& entries);

  const ArchiveStoreOptions options_;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Upload>> uploads_ ABSL_GUARDED_BY(mu_);  // by "<tenant>/<digest>"
  uint64_t put_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpugeek::controlplane
