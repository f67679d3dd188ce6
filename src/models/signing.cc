#include "models/signing.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "archive/digest.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/json_parse.h"
#include "common/status_macros.h"

namespace gpugeek::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Folders deeper than this are refused: real models nest a few levels, and the bound keeps the recursive walk's
// stack small whatever the tree.
constexpr int kMaxWalkDepth = 128;
constexpr char kPredicateCompat[] = "https://model_signing/Digests/v0.1";

// ---- text helpers -----------------------------------------------------------------------------------------

// Length of the UTF-8 sequence starting at s[i] (RFC 3629: no overlongs, no surrogates, <= U+10FFFF); 0 if invalid.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) > 0x9F)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if ((c == 0xF0 && b(i + 1) < 0x90) || (c == 0xF4 && b(i + 1) > 0x8F)) return 0;
    return 4;
  }
  return 0;
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// `s` fit for one line of output and for JSON: control bytes and bytes that are not UTF-8 become \xNN.
std::string Printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Length(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string ShortId(std::string_view key_id) { return std::string(key_id.substr(0, 16)); }

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// Standard base64 with padding (RFC 4648 section 4), nothing else: EVP_DecodeBlock alone skips whitespace and
// ignores padding, so the alphabet and the shape are checked first.
std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0 || text.size() > (size_t{1} << 30)) return std::nullopt;
  size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    const char c = text[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/')) {
      return std::nullopt;
    }
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0 || static_cast<size_t>(n) < pad) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string HexToBytes(std::string_view hex) {  // callers pass archive::IsSha256Hex text
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return out;
}

// A JSON value as a short, printable quote for an error message.
std::string Quote(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return Printable(s);
}

std::string JsonText(const json& v, int indent = -1) {
  return v.dump(indent, ' ', false, json::error_handler_t::replace);
}

// ---- OpenSSL keys -----------------------------------------------------------------------------------------

// ---- walking a model folder -------------------------------------------------------------------------------

struct WalkedFile {
  std::string path;
  uint64_t size = 0;
};

struct Refusal {
  absl::StatusCode code;
  Problem problem;
};

struct WalkResult {
  std::vector<WalkedFile> files;
  std::vector<Refusal> refused;
};

bool IsIgnored(std::string_view path, const std::vector<std::string>& ignore) {
  for (const std::string& p : ignore) {
    if (path == p || (path.size() > p.size() && path.starts_with(p) && path[p.size()] == '/')) return true;
  }
  return false;
}

void Refuse(WalkResult& out, absl::StatusCode code, ProblemKind kind, const std::string& path, std::string message) {
  out.refused.push_back({code, Problem{kind, Printable(path), std::move(message)}});
}

void WalkFolder(const fs::path& root, const std::string& rel_dir, const std::vector<std::string>& ignore, int depth,
                WalkResult& out);

void WalkEntry(const fs::path& root, const fs::directory_entry& entry, const std::string& rel,
               const std::vector<std::string>& ignore, int depth, WalkResult& out) {
  const std::string p = Printable(rel);
  if (!IsUtf8(rel)) {
    return Refuse(out, absl::StatusCode::kInvalidArgument, ProblemKind::kUnreadable, rel,
                  fmt::format("bad name: {} (file names must be UTF-8 to be signed; rename it)", p));
  }
  std::error_code ec;
  const fs::file_status st = entry.symlink_status(ec);
  if (ec) {
    return Refuse(out, absl::StatusCode::kPermissionDenied, ProblemKind::kUnreadable, rel,
                  fmt::format("unreadable: {}: {}", p, ec.message()));
  }
  if (fs::is_symlink(st)) {
    return Refuse(out, absl::StatusCode::kFailedPrecondition, ProblemKind::kNotRegular, rel,
                  fmt::format("symlink: {} (symbolic links are not signed; replace it with the file it points to, "
                              "or ignore it)",
                              p));
  }
  if (fs::is_directory(st)) return WalkFolder(root, rel, ignore, depth + 1, out);
  if (!fs::is_regular_file(st)) {
    return Refuse(out, absl::StatusCode::kFailedPrecondition, ProblemKind::kNotRegular, rel,
                  fmt::format("not a regular file: {} (only regular files are signed; remove it or ignore it)", p));
  }
  const uint64_t size = entry.file_size(ec);
  if (ec) {
    return Refuse(out, absl::StatusCode::kPermissionDenied, ProblemKind::kUnreadable, rel,
                  fmt::format("unreadable: {}: {}", p, ec.message()));
  }
  out.files.push_back({rel, size});
}

void WalkFolder(const fs::path& root, const std::string& rel_dir, const std::vector<std::string>& ignore, int depth,
                WalkResult& out) {
  const std::string shown = rel_dir.empty() ? "." : Printable(rel_dir);
  if (depth > kMaxWalkDepth) {
    return Refuse(out, absl::StatusCode::kFailedPrecondition, ProblemKind::kUnreadable, rel_dir,
                  fmt::format("unreadable: {}: folders nest deeper than {} levels", shown, kMaxWalkDepth));
  }
  std::error_code ec;
  fs::directory_iterator it(rel_dir.empty() ? root : root / rel_dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
    if (!IsIgnored(rel, ignore)) WalkEntry(root, *it, rel, ignore, depth, out);
  }
  if (ec) {
    Refuse(out, absl::StatusCode::kPermissionDenied, ProblemKind::kUnreadable, rel_dir,
           fmt::format("unreadable: {}: {}", shown, ec.message()));
  }
}

WalkResult Walk(const fs::path& root, const std::vector<std::string>& ignore) {
  WalkResult out;
  WalkFolder(root, "", ignore, 0, out);
  std::sort(out.files.begin(), out.files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  std::sort(out.refused.begin(), out.refused.end(),
            [](const auto& a, const auto& b) { return a.problem.path < b.problem.path; });
  return out;
}

// ---- hashing in parallel ----------------------------------------------------------------------------------

// The SHA-256 of each file, one result per input in input order. A pool of threads takes files largest
// first, so one big file started last does not leave the other threads idle at the end. Files are opened by
// path: the walk, not this read, is what refuses symlinks.
std::vector<absl::StatusOr<std::string>> HashFiles(const fs::path& root, const std::vector<WalkedFile>& files,
                                                   int threads) {
  std::vector<absl::StatusOr<std::string>> out(files.size(), absl::UnknownError("not hashed"));
  std::vector<size_t> order(files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return files[a].size > files[b].size; });
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      out[order[k]] = archive::Sha256OfFile((root / files[order[k]].path).string());
    }
  };
  size_t n = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  n = std::clamp<size_t>(std::min(n, files.size()), 1, 64);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

// The signature file's path relative to `dir` when it lies inside it.
std::optional<std::string> PathInside(const std::string& dir, const std::string& file) {
  std::error_code ec1, ec2;
  const fs::path d = fs::weakly_canonical(dir, ec1);
  const fs::path f = fs::weakly_canonical(file, ec2);
  if (ec1 || ec2) return std::nullopt;
  const std::string rel = f.lexically_relative(d).generic_string();
  if (rel.empty() || rel == "." || rel == ".." || rel.starts_with("../")) return std::nullopt;
  return rel;
}

absl::StatusOr<std::vector<std::string>> SignIgnorePaths(const std::string& dir, const ManifestOptions& options) {
  std::set<std::string> ignore(DefaultIgnorePaths().begin(), DefaultIgnorePaths().end());
  for (std::string p : options.ignore_paths) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (!IsSafeRelativePath(p) || !IsUtf8(p)) {
      return absl::InvalidArgumentError(fmt::format(
          "--ignore {}: give a path relative to the model folder, without '..', e.g. checkpoints/old", Printable(p)));
    }
    ignore.insert(p);
  }
  // DIR/model.sig is left out even when this signature goes elsewhere: an older signature there must not be
  // signed as part of the model (model-transparency ignores its signature path the same way).
  ignore.insert(kSignatureFileName);
  if (!options.signature_path.empty()) {
    if (std::optional<std::string> rel = PathInside(dir, options.signature_path)) ignore.insert(*rel);
  }
  return std::vector<std::string>(ignore.begin(), ignore.end());
}

absl::Status CheckFolder(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(
        fmt::format("{}: no such folder ({}); pass the model's folder", dir, ec ? ec.message() : "it does not exist"));
  }
  if (!fs::is_directory(st)) {
    return absl::FailedPreconditionError(
        fmt::format("{} is not a folder; pass the folder that holds the model's files", dir));
  }
  return absl::OkStatus();
}

std::string ModelName(const std::string& dir) {
  std::error_code ec;
  std::string name = fs::weakly_canonical(dir, ec).filename().string();
  return ec || name.empty() ? "model" : name;
}

// ---- reading JSON without exceptions ----------------------------------------------------------------------

// obj[name] when obj is an object holding `name` of type `type`; else InvalidArgument naming `where`.
absl::StatusOr<const json*> Field(const json& obj, const std::string& name, json::value_t type,
                                  const std::string& where) {
  const std::string path = where.empty() ? name : where + "." + name;
  if (!obj.is_object()) return absl::InvalidArgumentError(fmt::format("{}: not a JSON object", where));
  const auto it = obj.find(name);
  if (it == obj.end()) return absl::InvalidArgumentError(fmt::format("{}: missing", path));
  const bool ok = type == json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
  if (!ok) {
    static const auto* names = new std::map<json::value_t, std::string>{{json::value_t::object, "an object"},
                                                                        {json::value_t::array, "an array"},
                                                                        {json::value_t::string, "a string"},
                                                                        {json::value_t::boolean, "true or false"}};
    const auto n = names->find(type);
    return absl::InvalidArgumentError(
        fmt::format("{}: is {}, expected {}", path, Quote(*it), n == names->end() ? "another type" : n->second));
  }
  return &*it;
}

absl::StatusOr<std::string> StringField(const json& obj, const std::string& name, const std::string& where) {
  ASSIGN_OR_RETURN(const json* v, Field(obj, name, json::value_t::string, where));
  return v->get_ref<const std::string&>();
}

absl::Status Expect(const json& obj, const std::string& name, const std::string& where, std::string_view want) {
  ASSIGN_OR_RETURN(std::string got, StringField(obj, name, where));
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}{}{}: is {}, expected \"{}\"", where, where.empty() ? "" : ".", name, Quote(got), want));
}

absl::StatusOr<std::string> DigestField(const json& obj, const std::string& name, const std::string& where) {
  ASSIGN_OR_RETURN(std::string hex, StringField(obj, name, where));
  if (!archive::IsSha256Hex(hex)) {
    return absl::InvalidArgumentError(
        fmt::format("{}.{}: {} is not 64 lower-case hex digits", where, name, Quote(hex)));
  }
  return hex;
}

absl::StatusOr<std::string> Base64Field(const json& obj, const std::string& name, const std::string& where) {
  ASSIGN_OR_RETURN(std::string text, StringField(obj, name, where));
  std::optional<std::string> bytes = Base64Decode(text);
  if (!bytes) {
    return absl::InvalidArgumentError(
        fmt::format("{}.{}: not base64; the file is damaged, sign the model again", where, name));
  }
  return std::move(*bytes);
}

absl::Status ParseSerialization(const json& predicate, Manifest& m) {
  ASSIGN_OR_RETURN(const json* s, Field(predicate, "serialization", json::value_t::object, "predicate"));
  const std::string where = "predicate.serialization";
  RETURN_IF_ERROR(Expect(*s, "method", where, "files"));
  RETURN_IF_ERROR(Expect(*s, "hash_type", where, "sha256"));
  ASSIGN_OR_RETURN(const json* links, Field(*s, "allow_symlinks", json::value_t::boolean, where));
  if (links->get<bool>()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}.allow_symlinks: is true; gpugeek verifies regular files only, sign the model without symlinks", where));
  }
  if (!s->contains("ignore_paths")) return absl::OkStatus();
  ASSIGN_OR_RETURN(const json* ignore, Field(*s, "ignore_paths", json::value_t::array, where));
  for (size_t i = 0; i < ignore->size(); ++i) {
    if (!(*ignore)[i].is_string()) {
      return absl::InvalidArgumentError(
          fmt::format("{}.ignore_paths[{}]: is {}, expected a string", where, i, Quote((*ignore)[i])));
    }
    m.ignore_paths.push_back((*ignore)[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseResources(const json& predicate, Manifest& m) {
  ASSIGN_OR_RETURN(const json* resources, Field(predicate, "resources", json::value_t::array, "predicate"));
  m.files.reserve(resources->size());
  for (size_t i = 0; i < resources->size(); ++i) {
    const std::string where = fmt::format("predicate.resources[{}]", i);
    const json& r = (*resources)[i];
    ASSIGN_OR_RETURN(std::string name, StringField(r, "name", where));
    RETURN_IF_ERROR(Expect(r, "algorithm", where, "sha256"));
    ASSIGN_OR_RETURN(std::string digest, DigestField(r, "digest", where));
    m.files.push_back({std::move(name), std::move(digest), 0});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseSubject(const json& statement, Manifest& m) {
  ASSIGN_OR_RETURN(const json* subjects, Field(statement, "subject", json::value_t::array, ""));
  if (subjects->size() != 1) {
    return absl::InvalidArgumentError(fmt::format("subject: has {} entries, expected 1", subjects->size()));
  }
  ASSIGN_OR_RETURN(m.model_name, StringField((*subjects)[0], "name", "subject[0]"));
  ASSIGN_OR_RETURN(const json* digest, Field((*subjects)[0], "digest", json::value_t::object, "subject[0]"));
  return DigestField(*digest, "sha256", "subject[0].digest");
}

// ---- verification stages ----------------------------------------------------------------------------------

void Add(VerifyResult& r, ProblemKind kind, std::string path, std::string message) {
  r.problems.push_back({kind, std::move(path), std::move(message)});
}

// Stage 1: the payload, once it verified with `key`; nullopt after recording why not.
std::optional<std::string> VerifiedPayload(const std::string& sig_path, const VerifyingKey& key, VerifyResult& r) {
  const std::string shown = Printable(sig_path);
  absl::StatusOr<std::string> text = ReadFileBounded(sig_path, kMaxSignatureFileBytes, "signature file");
  if (!text.ok()) {
    Add(r, ProblemKind::kSignature, shown, fmt::format("signature: {}", text.status().message()));
    return std::nullopt;
  }
  absl::StatusOr<SignatureBundle> bundle = ParseSignatureBundle(*text);
  if (!bundle.ok()) {
    Add(r, ProblemKind::kSignature, shown, fmt::format("signature: {}: {}", shown, bundle.status().message()));
    return std::nullopt;
  }
  if (!bundle->key_hint.empty() && bundle->key_hint != key.KeyId()) {
    Add(r, ProblemKind::kSignature, shown,
        fmt::format("signature: {} was signed by key {}, not by the given key {}; pass the public key that matches "
                    "it",
                    shown, Printable(ShortId(bundle->key_hint)), ShortId(key.KeyId())));
    return std::nullopt;
  }
  if (!key.Verify(DssePae(bundle->payload_type, bundle->payload), bundle->signature)) {
    Add(r, ProblemKind::kSignature, shown,
        fmt::format("signature: {} does not verify with key {}: the signed manifest was altered after signing, or "
                    "another key signed it",
                    shown, ShortId(key.KeyId())));
    return std::nullopt;
  }
  return std::move(bundle->payload);
}

// Stage 2: every manifest path safe and listed once, before any of them is used on the filesystem.
void CheckManifestPaths(const Manifest& m, const std::string& shown_sig, VerifyResult& r) {
  if (m.files.empty()) {
    Add(r, ProblemKind::kManifest, shown_sig,
        fmt::format("manifest: {} lists no files; an empty model cannot be verified", shown_sig));
  }
  std::set<std::string> seen;
  for (const ManifestEntry& e : m.files) {
    const std::string p = Printable(e.path);
    if (!IsSafeRelativePath(e.path)) {
      Add(r, ProblemKind::kUnsafePath, p,
          fmt::format("unsafe path: \"{}\" (in the signed manifest: absolute, '..', empty and non-normalised paths "
                      "are refused; nothing was read)",
                      p));
    } else if (!seen.insert(e.path).second) {
      Add(r, ProblemKind::kDuplicate, p, fmt::format("duplicate: {} (listed twice in the signed manifest)", p));
    }
  }
  for (const std::string& i : m.ignore_paths) {
    if (IsSafeRelativePath(i)) continue;
    Add(r, ProblemKind::kUnsafePath, Printable(i),
        fmt::format("unsafe path: \"{}\" (an ignore path of the signed manifest: absolute, '..', empty and "
                    "non-normalised paths are refused; nothing was read)",
                    Printable(i)));
  }
}

// Files signed and files on disk, both sorted by path: one side only is a missing or extra problem; the
// rest is paired for hashing.
struct Paired {
  std::vector<WalkedFile> on_disk;
  std::vector<const ManifestEntry*> signed_as;
};
Paired Pair(const std::vector<ManifestEntry>& signed_files, const std::vector<WalkedFile>& disk,
            std::vector<Problem>& found) {
  Paired both;
  size_t i = 0, j = 0;
  while (i < signed_files.size() || j < disk.size()) {
    if (j == disk.size() || (i < signed_files.size() && signed_files[i].path < disk[j].path)) {
      const std::string p = Printable(signed_files[i++].path);
      found.push_back({ProblemKind::kMissing, p,
                       fmt::format("missing: {} (in the signed manifest, not on disk; renamed or deleted?)", p)});
    } else if (i == signed_files.size() || disk[j].path < signed_files[i].path) {
      const std::string p = Printable(disk[j++].path);
      found.push_back({ProblemKind::kExtra, p,
                       fmt::format("extra: {} (on disk, not in the signed manifest; remove it or sign again)", p)});
    } else {
      both.on_disk.push_back(disk[j++]);
      both.signed_as.push_back(&signed_files[i++]);
    }
  }
  return both;
}

// Stage 3: the folder against the manifest.
void CompareFolder(const std::string& dir, const Manifest& m, std::vector<std::string> ignore, VerifyResult& r) {
  std::sort(ignore.begin(), ignore.end());
  WalkResult walked = Walk(dir, ignore);
  std::vector<Problem> found;
  for (Refusal& x : walked.refused) found.push_back(std::move(x.problem));
  std::vector<ManifestEntry> signed_files = m.files;
  std::sort(signed_files.begin(), signed_files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  const Paired both = Pair(signed_files, walked.files, found);
  const std::vector<absl::StatusOr<std::string>> digests = HashFiles(dir, both.on_disk, 0);
  for (size_t k = 0; k < digests.size(); ++k) {
    const std::string p = Printable(both.on_disk[k].path);
    const std::string& want = both.signed_as[k]->sha256;
    if (!digests[k].ok()) {
      found.push_back(
          {ProblemKind::kUnreadable, p, fmt::format("unreadable: {}: {}", p, digests[k].status().message())});
    } else if (*digests[k] != want) {
      found.push_back(
          {ProblemKind::kChanged, p, fmt::format("changed: {}: sha256 is {}, signed {}", p, *digests[k], want)});
    } else {
      r.bytes += both.on_disk[k].size;
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  for (Problem& p : found) r.problems.push_back(std::move(p));
}

VerifyResult Finish(VerifyResult r, const std::string& dir) {
  if (r.problems.empty()) {
    r.status = absl::OkStatus();
    return r;
  }
  const Problem& first = r.problems.front();
  const std::string message = fmt::format("{} cannot be verified: {} problem{}; the first: {}", Printable(dir),
                                          r.problems.size(), r.problems.size() == 1 ? "" : "s", first.message);
  switch (first.kind) {
    case ProblemKind::kSignature:
      r.status = absl::UnauthenticatedError(message);
      break;
    case ProblemKind::kManifest:
    case ProblemKind::kUnsafePath:
    case ProblemKind::kDuplicate:
      r.status = absl::InvalidArgumentError(message);
      break;
    default:
      r.status = absl::DataLossError(message);
  }
  return r;
}

}  // namespace

// ---- manifests and signatures -----------------------------------------------------------------------------

absl::StatusOr<Manifest> BuildManifest(const std::string& dir, const ManifestOptions& options) {
  RETURN_IF_ERROR(CheckFolder(dir));
  Manifest m;
  ASSIGN_OR_RETURN(m.ignore_paths, SignIgnorePaths(dir, options));
  m.model_name = ModelName(dir);
  WalkResult walked = Walk(dir, m.ignore_paths);
  if (!walked.refused.empty()) {
    const Refusal& first = walked.refused.front();
    const size_t more = walked.refused.size() - 1;
    return absl::Status(first.code, fmt::format("cannot sign {}: {}{}", Printable(dir), first.problem.message,
                                                more == 0 ? "" : fmt::format(" (and {} more)", more)));
  }
  if (walked.files.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("no files to sign in {} (ignored: {}); an empty model cannot be signed", Printable(dir),
                    fmt::join(m.ignore_paths, ", ")));
  }
  const std::vector<absl::StatusOr<std::string>> digests = HashFiles(dir, walked.files, options.threads);
  for (size_t i = 0; i < digests.size(); ++i) {
    if (!digests[i].ok()) return digests[i].status();
    m.files.push_back({walked.files[i].path, *digests[i], walked.files[i].size});
  }
  return m;
}

std::string SubjectDigest(const std::vector<ManifestEntry>& files) {
  archive::Sha256 h;
  for (const ManifestEntry& e : files) h.Update(HexToBytes(e.sha256));
  return h.HexDigest();
}

json StatementJson(const Manifest& manifest) {
  json resources = json::array();
  for (const ManifestEntry& e : manifest.files) {
    resources.push_back({{"name", e.path}, {"algorithm", "sha256"}, {"digest", e.sha256}});
  }
  json subject = json::object();
  subject["name"] = manifest.model_name;
  subject["digest"] = {{"sha256", SubjectDigest(manifest.files)}};
  json serialization = {
      {"method", "files"}, {"hash_type", "sha256"}, {"allow_symlinks", false}, {"ignore_paths", manifest.ignore_paths}};
  json statement = json::object();
  statement["_type"] = kStatementType;
  statement["subject"] = json::array({subject});
  statement["predicateType"] = kModelSigningPredicate;
  statement["predicate"] = {{"serialization", serialization}, {"resources", resources}};
  return statement;
}

std::string DssePae(std::string_view payload_type, std::string_view payload) {
  return fmt::format("DSSEv1 {} {} {} {}", payload_type.size(), payload_type, payload.size(), payload);
}

absl::StatusOr<std::string> SignManifest(const Manifest& manifest, const SigningKey& key) {
  if (manifest.files.empty()) return absl::InvalidArgumentError("the manifest lists no files; nothing to sign");
  const std::string payload = JsonText(StatementJson(manifest));
  ASSIGN_OR_RETURN(std::string sig, key.Sign(DssePae(kInTotoPayloadType, payload)));
  json signature = {{"keyid", ""}, {"sig", Base64Encode(sig)}};
  json bundle = json::object();
  bundle["mediaType"] = kBundleMediaType;
  bundle["verificationMaterial"] = {{"publicKey", {{"hint", key.KeyId()}}}, {"tlogEntries", json::array()}};
  bundle["dsseEnvelope"] = {{"payloadType", kInTotoPayloadType},
                            {"payload", Base64Encode(payload)},
                            {"signatures", json::array({signature})}};
  return JsonText(bundle, 2) + "\n";
}

absl::Status WriteSignatureFile(const std::string& path, std::string_view text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::UnavailableError(fmt::format("cannot write {}: {}", tmp, std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return absl::UnavailableError(fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
  return absl::OkStatus();
}

absl::StatusOr<SignatureBundle> ParseSignatureBundle(std::string_view text) {
  absl::StatusOr<json> doc = ParseJsonBounded(text, {kMaxSignatureFileBytes, kMaxSignatureJsonDepth});
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("not a signature file ({}); sign the model with gpugeek model sign", doc.status().message()));
  }
  if (!doc->is_object()) return absl::InvalidArgumentError("not a signature file: the JSON text is not an object");
  RETURN_IF_ERROR(Expect(*doc, "mediaType", "", kBundleMediaType));
  SignatureBundle b;
  if (const auto vm = doc->find("verificationMaterial"); vm != doc->end()) {
    ASSIGN_OR_RETURN(const json* pk, Field(*vm, "publicKey", json::value_t::object, "verificationMaterial"));
    if (pk->contains("hint")) {
      ASSIGN_OR_RETURN(b.key_hint, StringField(*pk, "hint", "verificationMaterial.publicKey"));
    }
  }
  ASSIGN_OR_RETURN(const json* env, Field(*doc, "dsseEnvelope", json::value_t::object, ""));
  RETURN_IF_ERROR(Expect(*env, "payloadType", "dsseEnvelope", kInTotoPayloadType));
  b.payload_type = kInTotoPayloadType;
  ASSIGN_OR_RETURN(b.payload, Base64Field(*env, "payload", "dsseEnvelope"));
  ASSIGN_OR_RETURN(const json* sigs, Field(*env, "signatures", json::value_t::array, "dsseEnvelope"));
  if (sigs->size() != 1) {
    return absl::InvalidArgumentError(
        fmt::format("dsseEnvelope.signatures: has {} entries, expected 1; sign the model again", sigs->size()));
  }
  ASSIGN_OR_RETURN(b.signature, Base64Field((*sigs)[0], "sig", "dsseEnvelope.signatures[0]"));
  return b;
}

absl::StatusOr<Manifest> ParseStatement(std::string_view payload) {
  absl::StatusOr<json> doc = ParseJsonBounded(payload, {kMaxSignatureFileBytes, kMaxSignatureJsonDepth});
  if (!doc.ok()) return absl::InvalidArgumentError(fmt::format("payload: {}", doc.status().message()));
  if (!doc->is_object()) return absl::InvalidArgumentError("payload: not a JSON object");
  RETURN_IF_ERROR(Expect(*doc, "_type", "", kStatementType));
  ASSIGN_OR_RETURN(std::string predicate_type, StringField(*doc, "predicateType", ""));
  if (predicate_type == kPredicateCompat) {
    return absl::InvalidArgumentError(
        fmt::format("predicateType: is the pre-1.0 \"{}\"; sign the model again", kPredicateCompat));
  }
  RETURN_IF_ERROR(Expect(*doc, "predicateType", "", kModelSigningPredicate));
  Manifest m;
  ASSIGN_OR_RETURN(std::string root, ParseSubject(*doc, m));
  ASSIGN_OR_RETURN(const json* predicate, Field(*doc, "predicate", json::value_t::object, ""));
  RETURN_IF_ERROR(ParseSerialization(*predicate, m));
  RETURN_IF_ERROR(ParseResources(*predicate, m));
  if (const std::string got = SubjectDigest(m.files); got != root) {
    return absl::InvalidArgumentError(fmt::format(
        "subject[0].digest.sha256: is {} but the resources hash to {}; the statement is inconsistent", root, got));
  }
  return m;
}

std::string_view ProblemKindName(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::kSignature:
      return "signature";
    case ProblemKind::kManifest:
      return "manifest";
    case ProblemKind::kUnsafePath:
      return "unsafe-path";
    case ProblemKind::kDuplicate:
      return "duplicate";
    case ProblemKind::kMissing:
      return "missing";
    case ProblemKind::kExtra:
      return "extra";
    case ProblemKind::kChanged:
      return "changed";
    case ProblemKind::kNotRegular:
      return "not-regular";
    case ProblemKind::kUnreadable:
      return "unreadable";
  }
  return "unknown";
}

VerifyResult VerifyModel(const std::string& dir, const VerifyingKey& key, const std::string& signature_path) {
  VerifyResult r;
  r.key_id = key.KeyId();
  const std::string sig_path = signature_path.empty() ? (fs::path(dir) / kSignatureFileName).string() : signature_path;
  if (absl::Status folder = CheckFolder(dir); !folder.ok()) {
    Add(r, ProblemKind::kUnreadable, Printable(dir), fmt::format("unreadable: {}", folder.message()));
    return Finish(std::move(r), dir);
  }
  std::optional<std::string> payload = VerifiedPayload(sig_path, key, r);
  if (!payload) return Finish(std::move(r), dir);
  absl::StatusOr<Manifest> m = ParseStatement(*payload);
  if (!m.ok()) {
    Add(r, ProblemKind::kManifest, Printable(sig_path),
        fmt::format("manifest: {}: {}", Printable(sig_path), m.status().message()));
    return Finish(std::move(r), dir);
  }
  r.model_name = m->model_name;
  r.files = m->files.size();
  CheckManifestPaths(*m, Printable(sig_path), r);
  if (!r.problems.empty()) return Finish(std::move(r), dir);
  std::vector<std::string> ignore = m->ignore_paths;
  if (std::optional<std::string> rel = PathInside(dir, sig_path)) ignore.push_back(*rel);
  CompareFolder(dir, *m, std::move(ignore), r);
  return Finish(std::move(r), dir);
}

}  // namespace gpugeek::models
