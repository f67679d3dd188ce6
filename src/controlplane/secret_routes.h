#pragma once
// The routes of tenants' secrets and of the master key (access.h says who may call each):
//
//   PUT    /v1/secrets/{name}  {value}      -> the secret, without its value     member
//   GET    /v1/secrets?after=&limit=        -> {secrets, next_after}             viewer
//   GET    /v1/secrets/{name}               -> the secret, without its value     viewer
//   DELETE /v1/secrets/{name}               -> the deleted secret                member
//   POST   /v1/keys/rotate  {retire?}       -> {new_key_id, rewrapped, retired}  admin
//
// Secrets are the caller's tenant's (an admin's too: its own tenant): another tenant's secret answers
// 404 exactly like an absent one. No reply ever carries a value (secrets.h says where values go).
// Key rotation (crypto::RotateMasterKeyAndRewrap) appends a new master key to the key file and re-wraps
// every data key under it, rewriting no sealed data; `retire: true` also removes the master keys no
// data key uses any more (only when no other keyring shares the key file).

#include <functional>

#include "absl/status/statusor.h"
#include "controlplane/accounts.h"
#include "controlplane/secrets.h"
#include "crypto/keyring.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// What POST /v1/keys/rotate runs: the rotation of the server's key file. nullptr when the server's
// master keys are not in a file it may rotate (a KMS): the route answers FailedPrecondition.
using RotateKeysFn = std::function<absl::StatusOr<crypto::MasterKeyRotation>(bool retire_unused)>;

// Registers the routes above on `server` behind their rules; everything borrowed must outlive it.
void RegisterSecretRoutes(http::Server& server, Accounts& accounts, Secrets& secrets, RotateKeysFn rotate);

}  // namespace gpugeek::controlplane
