// libFuzzer target over the parsers of a model signature file (signing.h), which verification reads from
// wherever the model came from. Any bytes are tried two ways:
//   - as a signature file: ParseSignatureBundle returns a bundle or InvalidArgument, never crashes; a parsed
//     bundle's payload goes through ParseStatement, and its signature never verifies with an unrelated key
//     (forging one would need that key);
//   - as a statement payload: ParseStatement returns a manifest or InvalidArgument; an accepted manifest
//     written back with StatementJson parses to the same manifest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "models/signing.h"

namespace {

using namespace gpugeek::models;  // NOLINT: a fuzz entry file

void CheckInvalidArgument(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) abort();
}

void FuzzBundle(std::string_view text) {
  static const VerifyingKey* key =
      new VerifyingKey(VerifyingKey::Of(SigningKey::Generate(KeyAlgorithm::kEd25519).value()));
  absl::StatusOr<SignatureBundle> bundle = ParseSignatureBundle(text);
  if (!bundle.ok()) return CheckInvalidArgument(bundle.status());
  if (key->Verify(DssePae(bundle->payload_type, bundle->payload), bundle->signature)) abort();
  absl::StatusOr<Manifest> m = ParseStatement(bundle->payload);
  if (!m.ok()) CheckInvalidArgument(m.status());
}

void FuzzStatement(std::string_view payload) {
  absl::StatusOr<Manifest> m = ParseStatement(payload);
  if (!m.ok()) return CheckInvalidArgument(m.status());
  absl::StatusOr<Manifest> again = ParseStatement(StatementJson(*m).dump());
  if (!again.ok() || again->files != m->files || again->ignore_paths != m->ignore_paths ||
      again->model_name != m->model_name) {
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  FuzzBundle(text);
  FuzzStatement(text);
  return 0;
}
