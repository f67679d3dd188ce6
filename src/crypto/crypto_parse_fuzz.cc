// libFuzzer target over every parser of bytes that crypto/ reads back from disk. The first input byte
// picks the parser, the rest is its input:
//   0: a sealed blob, opened by a real keyring: InvalidArgument or DataLoss, never a crash or plaintext;
//   1: a keyring file: an accepted file formats to text that parses back equal;
//   2: a master key file: likewise, with the same ids and keys;
//   3: sealed log frames: the frames found lie inside the input, in order, each a valid size.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "crypto/sealed_file.h"
#include "crypto/test_util.h"

namespace {

using namespace gpugeek::crypto;  // NOLINT: a fuzz entry file

struct Env {
  Env() {
    if (!CreateMasterKeyFile(dir.Path("master.key")).ok()) abort();
    provider = FileKeyProvider::Open(dir.Path("master.key")).value();
    keyring = Keyring::Open(dir.Path("keyring.json"), *provider).value();
    if (!keyring->Seal("acme", "known", "fuzz").ok()) abort();  // acme has data key 1
  }
  testing::TempDir dir;
  std::unique_ptr<FileKeyProvider> provider;
  std::unique_ptr<Keyring> keyring;
};

void FuzzBlob(std::string_view blob) {
  static Env* env = new Env();
  auto opened = env->keyring->Open("acme", blob, "fuzz");
  if (opened.ok()) abort();  // forging a blob would need the data key
  const auto code = opened.status().code();
  if (code != absl::StatusCode::kInvalidArgument && code != absl::StatusCode::kDataLoss) abort();
}

void FuzzKeyringFile(std::string_view text) {
  auto keys = ParseKeyringFile(text, "fuzz.json");
  if (!keys.ok()) {
    if (keys.status().code() != absl::StatusCode::kInvalidArgument) abort();
    return;
  }
  auto again = ParseKeyringFile(FormatKeyringFile(*keys), "fuzz.json");
  if (!again.ok() || again->size() != keys->size()) abort();
  for (size_t i = 0; i < keys->size(); ++i) {
    const WrappedDataKey& a = (*keys)[i];
    const WrappedDataKey& b = (*again)[i];
    if (a.tenant != b.tenant || a.id != b.id || a.master_key != b.master_key || a.wrapped != b.wrapped) abort();
  }
}

void FuzzMasterKeyFile(std::string_view text) {
  auto keys = ParseMasterKeyFile(text, "fuzz.key");
  if (!keys.ok()) {
    if (keys.status().code() != absl::StatusCode::kInvalidArgument) abort();
    return;
  }
  auto again = ParseMasterKeyFile(FormatMasterKeyFile(*keys), "fuzz.key");
  if (!again.ok() || again->keys.size() != keys->keys.size()) abort();
  for (size_t i = 0; i < keys->keys.size(); ++i) {
    if (again->keys[i].first != keys->keys[i].first || !(again->keys[i].second == keys->keys[i].second)) abort();
  }
}

void FuzzFrames(std::string_view bytes) {
  constexpr uint64_t kBase = 1000;
  auto scan = ScanRecordFrames(bytes, kBase);
  if (!scan.ok()) {
    if (scan.status().code() != absl::StatusCode::kDataLoss) abort();
    return;
  }
  uint64_t at = kBase;
  for (const RecordFrame& f : scan->frames) {
    if (f.offset != at || f.blob_bytes < kSealOverhead || f.plaintext_bytes() > kMaxRecordPlaintextBytes) abort();
    at = f.next_offset();
  }
  if (scan->end != at || scan->end > kBase + bytes.size()) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      FuzzBlob(input);
      break;
    case 1:
      FuzzKeyringFile(input);
      break;
    case 2:
      FuzzMasterKeyFile(input);
      break;
    default:
      FuzzFrames(input);
      break;
  }
  return 0;
}
