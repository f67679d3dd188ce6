#include "crypto/key_provider.h"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <set>

#include <fmt/format.h>

#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "crypto/durable_file.h"

namespace gpugeek::crypto {
namespace {

// A key file is a few lines per key; anything bigger is the wrong file.
constexpr uint64_t kMaxKeyFileBytes = 1 << 20;

constexpr std::string_view kHeader =
    "# gpugeek master key file: one \"<key id> <64 hex digits>\" per line, oldest first; the LAST key is\n"
    "# active (it wraps new data keys), older ones only unwrap until a rewrap moves every data key off them.\n"
    "# Keep it mode 0600 and back it up apart from the data: without it nothing sealed under it can be read.\n";

// Holds a file's text and zeroes it when done: the text is key material.
struct Cleansed {
  std::string text;
  ~Cleansed() { OPENSSL_cleanse(text.data(), text.size()); }
};

// "mk-YYYYMMDD-<8 hex digits>": sorts by creation day for an operator, unique by the random part.
absl::StatusOr<std::string> NewKeyId() {
  ASSIGN_OR_RETURN(const std::string random, RandomBytes(4));
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  return fmt::format("mk-{:04d}{:02d}{:02d}-{}", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, HexEncode(random));
}

absl::StatusOr<std::pair<std::string, SecretKey>> NewKey(const MasterKeys& existing) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    ASSIGN_OR_RETURN(std::string id, NewKeyId());
    bool taken = false;
    for (const auto& [old_id, key] : existing.keys) taken = taken || old_id == id;
    if (taken) continue;
    ASSIGN_OR_RETURN(SecretKey key, SecretKey::Generate());
    return std::make_pair(std::move(id), std::move(key));
  }
  return absl::InternalError("could not draw an unused master key id in 16 attempts");
}

std::string LockPath(const std::string& path) { return path + ".lock"; }

}  // namespace

absl::Status ValidateKeyId(std::string_view id) {
  const auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  };
  bool ok = !id.empty() && id.size() <= 64;
  for (char c : id) ok = ok && allowed(c);
  if (!ok) {
    return absl::InvalidArgumentError(
        fmt::format("key id {} is not 1-64 letters, digits, '.', '_' or '-'", QuoteForMessage(id)));
  }
  return absl::OkStatus();
}

absl::StatusOr<MasterKeys> ParseMasterKeyFile(std::string_view text, const std::string& path) {
  MasterKeys out;
  std::set<std::string, std::less<>> seen;
  int line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    size_t gap = 0;
    while (gap < line.size() && !is_space(line[gap])) ++gap;
    const std::string_view id = line.substr(0, gap);
    std::string_view hex = line.substr(gap);
    while (!hex.empty() && is_space(hex.front())) hex.remove_prefix(1);
    const auto bad_line = [&](std::string_view why) {
      return absl::InvalidArgumentError(fmt::format(
          "master key file {} line {}: {}; each key line is \"<key id> <64 hex digits>\"", path, line_no, why));
    };
    if (hex.empty()) return bad_line("no key after the id");
    if (absl::Status s = ValidateKeyId(id); !s.ok()) return bad_line("the key id is not 1-64 of [A-Za-z0-9._-]");
    absl::StatusOr<SecretKey> key = SecretKey::FromHex(hex);
    if (!key.ok()) return bad_line(std::string(key.status().message()));
    if (!seen.emplace(id).second) return bad_line(fmt::format("key id {} appears twice", id));
    out.keys.emplace_back(std::string(id), *std::move(key));
  }
  if (out.keys.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("master key file {} holds no key; each key line is \"<key id> <64 hex digits>\"", path));
  }
  return out;
}

std::string FormatMasterKeyFile(const MasterKeys& keys) {
  std::string text(kHeader);
  for (const auto& [id, key] : keys.keys) text += fmt::format("{} {}\n", id, key.ToHex());
  return text;
}

absl::StatusOr<MasterKeys> ReadMasterKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(fmt::format(
          "master key file {} does not exist; create one with `gpugeek keys init --key-file {}` and back it up "
          "apart from the data. If data was already sealed, restore the original file from backup instead: a new "
          "key cannot read it",
          path, path));
    }
    return ErrnoStatus(err, "stat master key file", path);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(fmt::format("master key file {} is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(fmt::format(
        "master key file {} has mode {:04o}: group or others may access it, so its keys may have leaked; restrict "
        "it with `chmod 600 {}` (and rotate the key if others could read it)",
        path, st.st_mode & 07777, path));
  }
  Cleansed file;
  ASSIGN_OR_RETURN(file.text, ReadFileBounded(path, kMaxKeyFileBytes, "master key file"));
  return ParseMasterKeyFile(file.text, path);
}

absl::StatusOr<std::unique_ptr<FileKeyProvider>> FileKeyProvider::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MasterKeys keys, ReadMasterKeyFile(path));
  return std::unique_ptr<FileKeyProvider>(new FileKeyProvider(path, std::move(keys)));
}

absl::Status FileKeyProvider::Reload() {
  ASSIGN_OR_RETURN(MasterKeys keys, ReadMasterKeyFile(path_));
  MutexLock lock(&mu_);
  keys_ = std::move(keys);
  return absl::OkStatus();
}

std::vector<std::string> FileKeyProvider::key_ids() const {
  MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, key] : keys_.keys) ids.push_back(id);
  return ids;
}

std::string FileKeyProvider::active_key_id() const {
  MutexLock lock(&mu_);
  // Open and Reload refuse a file without keys, so there is always a last one.
  return keys_.keys.back().first;
}

absl::StatusOr<SecretKey> FileKeyProvider::Find(std::string_view key_id) const {
  MutexLock lock(&mu_);
  for (const auto& [id, key] : keys_.keys) {
    if (id == key_id) return key;
  }
  return absl::NotFoundError(fmt::format("master key file {} holds no key {}", path_, QuoteForMessage(key_id)));
}

absl::StatusOr<std::string> FileKeyProvider::Wrap(std::string_view key_id, const SecretKey& data_key,
                                                  std::string_view aad) const {
  ASSIGN_OR_RETURN(const SecretKey master, Find(key_id));
  ASSIGN_OR_RETURN(std::string nonce, RandomBytes(kNonceBytes));
  ASSIGN_OR_RETURN(std::string sealed, GcmSeal(master, nonce, data_key.view(), aad));
  return nonce + sealed;
}

absl::StatusOr<SecretKey> FileKeyProvider::Unwrap(std::string_view key_id, std::string_view wrapped,
                                                  std::string_view aad) const {
  ASSIGN_OR_RETURN(const SecretKey master, Find(key_id));
  if (wrapped.size() != kNonceBytes + kKeyBytes + kTagBytes) {
    return absl::DataLossError(
        fmt::format("a wrapped data key is {} bytes, not {}", kNonceBytes + kKeyBytes + kTagBytes, wrapped.size()));
  }
  absl::StatusOr<std::string> raw = GcmOpen(master, wrapped.substr(0, kNonceBytes), wrapped.substr(kNonceBytes), aad);
  if (!raw.ok()) return raw.status();
  Cleansed plain{*std::move(raw)};
  return SecretKey::FromBytes(plain.text);
}

std::string FileKeyProvider::Describe() const { return "master key file " + path_; }

absl::StatusOr<std::string> CreateMasterKeyFile(const std::string& path) {
  MasterKeys keys;
  ASSIGN_OR_RETURN(auto key, NewKey(keys));
  const std::string id = key.first;
  keys.keys.push_back(std::move(key));
  Cleansed text{FormatMasterKeyFile(keys)};
  absl::Status s = CreateFileDurably(path, text.text, 0600);
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(fmt::format(
        "master key file {} already exists and was left unchanged; to add a key use `gpugeek keys rotate`", path));
  }
  RETURN_IF_ERROR(s);
  return id;
}

absl::StatusOr<std::string> RotateMasterKey(const std::string& path) {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(LockPath(path)));
  RemoveStaleTempFiles(path);
  ASSIGN_OR_RETURN(MasterKeys keys, ReadMasterKeyFile(path));
  ASSIGN_OR_RETURN(auto key, NewKey(keys));
  const std::string id = key.first;
  keys.keys.push_back(std::move(key));
  Cleansed text{FormatMasterKeyFile(keys)};
  RETURN_IF_ERROR(WriteFileDurably(path, text.text, 0600));
  return id;
}

absl::Status RetireMasterKey(const std::string& path, std::string_view key_id) {
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(LockPath(path)));
  RemoveStaleTempFiles(path);
  ASSIGN_OR_RETURN(MasterKeys keys, ReadMasterKeyFile(path));
  if (keys.keys.back().first == key_id) {
    return absl::FailedPreconditionError(fmt::format(
        "key {} is the active key of master key file {}; rotate first (`gpugeek keys rotate`), then retire it",
        QuoteForMessage(key_id), path));
  }
  MasterKeys kept;
  for (auto& entry : keys.keys) {
    if (entry.first != key_id) kept.keys.push_back(std::move(entry));
  }
  if (kept.keys.size() == keys.keys.size()) {
    return absl::NotFoundError(fmt::format("master key file {} holds no key {}", path, QuoteForMessage(key_id)));
  }
  Cleansed text{FormatMasterKeyFile(kept)};
  return WriteFileDurably(path, text.text, 0600);
}

}  // namespace gpugeek::crypto
