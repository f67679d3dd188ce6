#pragma once
// Model signing: a signed manifest of every file of a model folder, in the shape of the OpenSSF model-signing
// v1.0 format (github.com/sigstore/model-transparency), signed with a local Ed25519 or ECDSA P-256 key.
//
// The problem: a model is a folder of large files that travel through mirrors, caches and object stores, and
// what reaches a node should be byte for byte what its publisher released. A signature over one digest per
// file answers that, and when it does not hold, the user needs to know which file is wrong and how, not just
// "signature mismatch". Verification therefore fails closed and reports every problem, one per file.
//
// The signature file (default DIR/model.sig) is a Sigstore bundle v0.3 without transparency-log entries:
//   {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
//    "verificationMaterial": {"publicKey": {"hint": KEY_ID}, "tlogEntries": []},
//    "dsseEnvelope": {"payloadType": "application/vnd.in-toto+json", "payload": BASE64(STATEMENT),
//                     "signatures": [{"keyid": "", "sig": BASE64(SIG)}]}}
// SIG signs the DSSE pre-authentication encoding of the payload ("DSSEv1 <len type> <type> <len body> <body>",
// github.com/secure-systems-lab/dsse/blob/master/protocol.md): Ed25519 (RFC 8032) over it, or ECDSA P-256 with
// SHA-256 (DER-encoded signature). KEY_ID is the SHA-256 (hex) of the public key's PEM text
// (SubjectPublicKeyInfo), as model-transparency's key signer writes the hint. STATEMENT is an in-toto Statement v1:
//   {"_type": "https://in-toto.io/Statement/v1",
//    "subject": [{"name": MODEL_NAME, "digest": {"sha256": ROOT}}],
//    "predicateType": "https://model_signing/signature/v1.0",
//    "predicate": {"serialization": {"method": "files", "hash_type": "sha256", "allow_symlinks": false,
//                                    "ignore_paths": [...]},
//                  "resources": [{"name": "dir/file.bin", "algorithm": "sha256", "digest": HEX}, ...]}}
// resources are sorted by name (byte order); ROOT is the SHA-256 of the concatenated raw 32-byte digests of
// the resources in that order (model-transparency's `Payload`). MODEL_NAME is the folder's name.
//
// Paths are relative to the model folder, '/'-separated, normalised (common/file.h IsSafeRelativePath) and
// UTF-8. An ignore path P leaves out P itself and everything under P/, relative to the folder's root.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/signing_keys.h"

namespace gpugeek::models {

inline constexpr char kSignatureFileName[] = "model.sig";
inline constexpr char kBundleMediaType[] = "application/vnd.dev.sigstore.bundle.v0.3+json";
inline constexpr char kInTotoPayloadType[] = "application/vnd.in-toto+json";
inline constexpr char kStatementType[] = "https://in-toto.io/Statement/v1";
inline constexpr char kModelSigningPredicate[] = "https://model_signing/signature/v1.0";
// The ignore paths every signature records, as model-transparency's defaults: version-control metadata that
// changes with every clone and checkout (a stray .git is the common reason its verification breaks).
inline const std::vector<std::string>& DefaultIgnorePaths() {
  static const auto* paths = new std::vector<std::string>{".git", ".gitattributes", ".github", ".gitignore"};
  return *paths;
}
// Bounds on a signature file read from outside: 64 MiB holds a manifest of about 500,000 files.
inline constexpr uint64_t kMaxSignatureFileBytes = uint64_t{64} << 20;
inline constexpr int kMaxSignatureJsonDepth = 16;

// One signed file.
struct ManifestEntry {
  std::string path;    // relative, '/'-separated
  std::string sha256;  // 64 lower-case hex digits
  uint64_t size = 0;   // bytes at hashing time; 0 for entries read back from a signature (not signed)
  bool operator==(const ManifestEntry&) const = default;
};

struct Manifest {
  std::string model_name;
  std::vector<ManifestEntry> files;       // sorted by path, no duplicates (when built by BuildManifest)
  std::vector<std::string> ignore_paths;  // sorted, as recorded in the statement
};

struct ManifestOptions {
  // Paths to leave out besides DefaultIgnorePaths(), relative to the folder (e.g. "checkpoints/old").
  std::vector<std::string> ignore_paths;
  // The signature file (default DIR/model.sig), so it does not sign itself: left out and recorded when it lies
  // inside the folder. DIR/model.sig is always left out.
  std::string signature_path;
  int threads = 0;  // files hashed at once; 0 = std::thread::hardware_concurrency()
};

// Walks `dir` and hashes every regular file (streamed, several files in parallel, largest first), leaving out
// the ignore paths, which the manifest records. Symlinks are not followed.
// Errors: NotFound when `dir` does not exist, FailedPrecondition when it is not a folder; InvalidArgument for
// an ignore path that is absolute or has ".." ("--ignore ../x: give a path relative to the model folder,
// without '..', e.g. checkpoints/old"), and for a model with no files left ("no files to sign in DIR
// (ignored: .git, ...); an empty model cannot be signed"). Files that cannot be signed are reported as
// "cannot sign DIR: <the Problem line VerifyModel would print> (and N more)": FailedPrecondition for a symlink
// ("symlink: link.bin (symbolic links are not signed; replace it with the file it points to, or ignore it)")
// or a special file, InvalidArgument for a name that is not UTF-8, PermissionDenied for an unreadable
// folder; a file that cannot be read gives Sha256OfFile's error naming its path.
absl::StatusOr<Manifest> BuildManifest(const std::string& dir, const ManifestOptions& options = {});

// ROOT of the header comment, as 64 hex digits. Entries must hold valid hex digests.
std::string SubjectDigest(const std::vector<ManifestEntry>& files);
// The in-toto statement of the header comment.
nlohmann::json StatementJson(const Manifest& manifest);
// The signature file's text (pretty JSON, 2-space indent, trailing newline) for `manifest` under `key`.
// InvalidArgument when the manifest has no files; Internal when OpenSSL fails.
absl::StatusOr<std::string> SignManifest(const Manifest& manifest, const SigningKey& key);
// Writes the signature file atomically (temporary file beside it, then rename), mode 0644. The errno text
// naming the path on failure.
absl::Status WriteSignatureFile(const std::string& path, std::string_view text);

// A signature file's parts, parsed but not verified.
struct SignatureBundle {
  std::string key_hint;      // verificationMaterial.publicKey.hint; "" when absent
  std::string payload_type;  // dsseEnvelope.payloadType
  std::string payload;       // decoded bytes of dsseEnvelope.payload
  std::string signature;     // decoded bytes of dsseEnvelope.signatures[0].sig
};

// Parses a signature file's text, bounded (kMaxSignatureFileBytes, kMaxSignatureJsonDepth). InvalidArgument
// naming the field and the fix: "dsseEnvelope.payload: not base64; the file is damaged, sign the model
// again". Exactly one DSSE signature is accepted. Never throws; any bytes are safe.
absl::StatusOr<SignatureBundle> ParseSignatureBundle(std::string_view text);

// The DSSE pre-authentication encoding of (type, body): what the signature covers.
std::string DssePae(std::string_view payload_type, std::string_view payload);

// Parses a statement payload into a manifest, checking its types and values and that the subject digest
// matches the resources. Paths are returned as written (VerifyModel checks them). InvalidArgument naming
// the field: "predicate.resources[3].digest: not 64 lower-case hex digits". Never throws.
absl::StatusOr<Manifest> ParseStatement(std::string_view payload);

enum class ProblemKind {
  kSignature,   // the signature file is unreadable, malformed, or does not verify with the key
  kManifest,    // the signed statement is malformed or inconsistent, or lists no files
  kUnsafePath,  // a manifest path is absolute, has "..", is empty or not normalised
  kDuplicate,   // a manifest path listed twice
  kMissing,     // signed, not on disk
  kExtra,       // on disk, not signed
  kChanged,     // on disk with another digest
  kNotRegular,  // a symlink or special file on disk
  kUnreadable,  // a file or folder on disk that cannot be read
};
std::string_view ProblemKindName(ProblemKind kind);  // "signature", "manifest", "unsafe-path", ... "unreadable"

// One reason verification failed. `message` is a whole line naming the file and what to do, e.g.
//   missing: a.bin (in the signed manifest, not on disk; renamed or deleted?)
//   extra: b.bin (on disk, not in the signed manifest; remove it or sign again)
//   changed: model.safetensors: sha256 is 1f..., signed 9a...
struct Problem {
  ProblemKind kind;
  std::string path;  // the model file's relative path; the signature file's path for kSignature / kManifest
  std::string message;
};

struct VerifyResult {
  // OK only when `problems` is empty. Otherwise, by the first problem's kind: Unauthenticated (kSignature),
  // InvalidArgument (kManifest, kUnsafePath, kDuplicate), DataLoss (the rest); the message counts them and
  // quotes the first.
  absl::Status status;
  std::vector<Problem> problems;  // signature first, then manifest paths, then files by path
  size_t files = 0;               // files in the signed manifest
  uint64_t bytes = 0;             // their bytes on disk (files verified unchanged)
  std::string model_name;         // the statement's subject name, once the signature verified
  std::string key_id;             // the verifying key's id
};

// Verifies the model in `dir` against the signature file at `signature_path` (DIR/model.sig when empty)
// with `key`. Fails closed, in stages, each reporting all its problems before the next is skipped:
//   1. the signature file must parse and verify with `key` (nothing in an unverified payload is trusted
//      enough to compare files against);
//   2. the statement must be well formed, list at least one file, and every path must be safe and listed
//      once: an unsafe path is refused before the filesystem is touched;
//   3. the folder is walked (ignoring the signed ignore paths and the signature file) and compared: every
//      missing, extra, changed, unreadable, symlinked or special file is one problem. A renamed file is one
//      missing + one extra. Files are hashed in parallel as BuildManifest does.
VerifyResult VerifyModel(const std::string& dir, const VerifyingKey& key, const std::string& signature_path = "");

}  // namespace gpugeek::models
