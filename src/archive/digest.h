#pragma once
// SHA-256 digests as gpugeek names content by them: 64 lower-case hex digits (a workdir archive's id).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::archive {

// Incremental SHA-256 (OpenSSL's EVP). Not thread-safe; one per stream.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view bytes);
  // The digest of everything Update saw, as 64 lower-case hex digits. Call once.
  std::string HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string Sha256Hex(std::string_view bytes);

// The SHA-256 of a file's bytes, read in 1 MiB pieces. NotFound / PermissionDenied naming the path.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// Whether `digest` is 64 lower-case hex digits.
bool IsSha256Hex(std::string_view digest);

}  // namespace gpugeek::archive
