#include "models/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/json_parse.h"
#include "common/status_macros.h"

namespace gpugeek::models {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  uint64_t bytes;
};

constexpr std::array<DtypeEntry, 15> kDtypes = {{
    {Dtype::kBool, "BOOL", 1},
    {Dtype::kU8, "U8", 1},
    {Dtype::kI8, "I8", 1},
    {Dtype::kU16, "U16", 2},
    {Dtype::kI16, "I16", 2},
    {Dtype::kF16, "F16", 2},
    {Dtype::kBF16, "BF16", 2},
    {Dtype::kU32, "U32", 4},
    {Dtype::kI32, "I32", 4},
    {Dtype::kF32, "F32", 4},
    {Dtype::kU64, "U64", 8},
    {Dtype::kI64, "I64", 8},
    {Dtype::kF64, "F64", 8},
    {Dtype::kF8E4M3, "F8_E4M3", 1},
    {Dtype::kF8E5M2, "F8_E5M2", 1},
}};

const DtypeEntry& Entry(Dtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e;
  }
  return kDtypes[9];  // unreachable: every enumerator is listed
}

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 62;

// Elements x bytes per element, or nullopt when a dimension is negative or the product passes 2^62.
std::optional<uint64_t> CheckedBytes(const std::vector<int64_t>& shape, Dtype dtype) {
  uint64_t n = DtypeBytes(dtype);
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMaxTensorBytes / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("safetensors header: {}", what));
}

absl::StatusOr<TensorInfo> ParseTensor(const std::string& name, const nlohmann::json& v) {
  if (!v.is_object()) return Bad(fmt::format("{}: must be an object with dtype, shape and data_offsets", name));
  for (const auto& [key, unused] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Bad(fmt::format("{}.{}: unknown field; a tensor has only dtype, shape and data_offsets", name, key));
    }
  }
  TensorInfo t{.name = name};
  auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) return Bad(fmt::format("{}.dtype: missing or not a string", name));
  std::optional<Dtype> parsed = ParseDtype(dtype->get<std::string>());
  if (!parsed) return Bad(fmt::format("{}.dtype: unknown dtype {}", name, dtype->dump()));
  t.dtype = *parsed;
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) return Bad(fmt::format("{}.shape: missing or not an array", name));
  for (const nlohmann::json& d : *shape) {
    if (!d.is_number_unsigned()) return Bad(fmt::format("{}.shape: {} is not a dimension (>= 0)", name, d.dump()));
    if (d.get<uint64_t>() > kMaxTensorBytes)
      return Bad(fmt::format("{}.shape: dimension {} is too large", name, d.dump()));
    t.shape.push_back(d.get<int64_t>());
  }
  auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return Bad(fmt::format("{}.data_offsets: must be [begin, end], two byte offsets", name));
  }
  t.begin = (*offsets)[0].get<uint64_t>();
  t.end = (*offsets)[1].get<uint64_t>();
  std::optional<uint64_t> bytes = CheckedBytes(t.shape, t.dtype);
  if (!bytes) return Bad(fmt::format("{}.shape: element count overflows", name));
  if (t.end < t.begin || t.end - t.begin != *bytes) {
    return Bad(fmt::format("{}.data_offsets: [{}, {}] spans {} bytes; dtype {} and shape need {}", name, t.begin, t.end,
                           t.end - std::min(t.begin, t.end), DtypeName(t.dtype), *bytes));
  }
  return t;
}

// The tensors must tile [0, data_bytes) exactly, in some order.
absl::Status CheckTiling(std::vector<TensorInfo>& tensors, uint64_t data_bytes) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t at = 0;
  for (const TensorInfo& t : tensors) {
    if (t.begin < at)
      return Bad(fmt::format("{}.data_offsets: overlaps the tensor before it (bytes {}..{})", t.name, t.begin, at));
    if (t.begin > at)
      return Bad(fmt::format("{}.data_offsets: leaves a hole of {} bytes before it", t.name, t.begin - at));
    at = t.end;
  }
  if (at != data_bytes) {
    return Bad(fmt::format("tensors end at byte {} of a data section of {} bytes; the file is truncated or padded", at,
                           data_bytes));
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t put = ::write(fd, bytes.data(), bytes.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return absl::InternalError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(put));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view DtypeName(Dtype dtype) { return Entry(dtype).name; }

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

uint64_t DtypeBytes(Dtype dtype) { return Entry(dtype).bytes; }

uint64_t TensorInfo::Elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const TensorInfo* SafetensorsHeader::Find(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size) {
  if (file_size < 8 || prefix.size() < 8) {
    return Bad(fmt::format("the file is {} bytes; a safetensors file starts with an 8-byte header length", file_size));
  }
  uint64_t n = 0;
  std::memcpy(&n, prefix.data(), 8);
  if (n == 0 || n > kMaxHeaderBytes) {
    return Bad(fmt::format("header length {} is outside 1..{} bytes", n, kMaxHeaderBytes));
  }
  if (n > file_size - 8)
    return Bad(fmt::format("header length {} runs past the end of the {}-byte file", n, file_size));
  if (prefix.size() < 8 + n) return absl::InternalError("ParseSafetensorsHeader: prefix shorter than the header");
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonBounded(prefix.substr(8, n), JsonLimits{.max_bytes = kMaxHeaderBytes, .max_depth = 3});
  if (!parsed.ok()) return Bad(std::string(parsed.status().message()));
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return Bad("must be a JSON object of tensors");
  SafetensorsHeader header{.header_bytes = n, .data_bytes = file_size - 8 - n};
  for (const auto& [name, v] : doc.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return Bad("__metadata__: must be an object of strings");
      for (const auto& [key, value] : v.items()) {
        if (!value.is_string()) return Bad(fmt::format("__metadata__.{}: must be a string", key));
        header.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    if (name.empty()) return Bad("a tensor has an empty name");
    ASSIGN_OR_RETURN(TensorInfo t, ParseTensor(name, v));
    header.tensors.push_back(std::move(t));
  }
  RETURN_IF_ERROR(CheckTiling(header.tensors, header.data_bytes));
  return header;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  std::string prefix(8, '\0');
  absl::Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  } else if (::pread(fd, prefix.data(), 8, 0) == 8) {
    uint64_t n = 0;
    std::memcpy(&n, prefix.data(), 8);
    if (n > 0 && n <= kMaxHeaderBytes && n <= static_cast<uint64_t>(st.st_size) - 8) {
      prefix.resize(8 + n);
      if (::pread(fd, prefix.data() + 8, n, 8) != static_cast<ssize_t>(n)) prefix.resize(8);
    }
  }
  ::close(fd);
  RETURN_IF_ERROR(status);
  SafetensorsFile file;
  file.path_ = path;
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(prefix, static_cast<uint64_t>(st.st_size));
  if (!header.ok())
    return absl::InvalidArgumentError(fmt::format("{}: {}", path, std::string(header.status().message())));
  file.header_ = *std::move(header);
  return file;
}

absl::StatusOr<std::string> SafetensorsFile::Read(std::string_view name) const {
  const TensorInfo* t = header_.Find(name);
  if (t == nullptr) return absl::NotFoundError(fmt::format("{}: no tensor named {}", path_, name));
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
  std::string bytes(t->Bytes(), '\0');
  uint64_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::pread(fd, bytes.data() + done, bytes.size() - done,
                          static_cast<off_t>(header_.DataStart() + t->begin + done));
    if (got <= 0) break;
    done += static_cast<uint64_t>(got);
  }
  ::close(fd);
  if (done != bytes.size())
    return absl::InternalError(fmt::format("{}: {} is cut short; the file shrank", path_, name));
  return bytes;
}

absl::StatusOr<std::string> SafetensorsHeaderJson(const std::vector<TensorSpec>& tensors,
                                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json doc = nlohmann::json::object();  // std::map underneath: keys come out sorted
  if (!metadata.empty()) doc["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return absl::InvalidArgumentError(
          fmt::format("tensor name '{}': must be non-empty and not __metadata__", t.name));
    }
    if (doc.contains(t.name)) return absl::InvalidArgumentError(fmt::format("tensor {}: named twice", t.name));
    std::optional<uint64_t> bytes = CheckedBytes(t.shape, t.dtype);
    if (!bytes) return absl::InvalidArgumentError(fmt::format("tensor {}: negative dimension or too large", t.name));
    doc[t.name] = {{"dtype", DtypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + *bytes}}};
    at += *bytes;
  }
  std::string json = doc.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

absl::StatusOr<SafetensorsWriter> SafetensorsWriter::Create(const std::string& path, std::vector<TensorSpec> tensors,
                                                            const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(std::string json, SafetensorsHeaderJson(tensors, metadata));
  SafetensorsWriter w;
  w.path_ = path;
  w.tmp_path_ = path + ".tmp";
  w.tensors_ = std::move(tensors);
  w.fd_ = ::open(w.tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0)
    return absl::PermissionDeniedError(fmt::format("{}: cannot create: {}", w.tmp_path_, std::strerror(errno)));
  uint64_t n = json.size();
  std::string head(8, '\0');
  std::memcpy(head.data(), &n, 8);
  RETURN_IF_ERROR(WriteAll(w.fd_, head + json, w.tmp_path_));
  return w;
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      tensors_(std::move(other.tensors_)),
      next_(other.next_),
      fd_(std::exchange(other.fd_, -1)) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

absl::Status SafetensorsWriter::Append(std::string_view bytes) {
  if (fd_ < 0 || next_ >= tensors_.size()) {
    return absl::FailedPreconditionError(fmt::format("{}: every tensor is already written", path_));
  }
  const TensorSpec& t = tensors_[next_];
  uint64_t want = *CheckedBytes(t.shape, t.dtype);
  if (bytes.size() != want) {
    return absl::InvalidArgumentError(fmt::format("tensor {}: {} bytes given; dtype {} and its shape need {}", t.name,
                                                  bytes.size(), DtypeName(t.dtype), want));
  }
  ++next_;
  return WriteAll(fd_, bytes, tmp_path_);
}

absl::Status SafetensorsWriter::Finish() {
  if (fd_ < 0) return absl::FailedPreconditionError(fmt::format("{}: already finished", path_));
  if (next_ != tensors_.size()) {
    return absl::FailedPreconditionError(fmt::format("{}: {} of {} tensors written; append {} next", path_, next_,
                                                     tensors_.size(), tensors_[next_].name));
  }
  int fd = std::exchange(fd_, -1);
  bool synced = ::fsync(fd) == 0;
  bool closed = ::close(fd) == 0;
  if (!synced || !closed || ::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_path_.c_str());
    return absl::InternalError(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorData>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorData& t : tensors) specs.push_back(t.spec);
  ASSIGN_OR_RETURN(SafetensorsWriter writer, SafetensorsWriter::Create(path, std::move(specs), metadata));
  for (const TensorData& t : tensors) RETURN_IF_ERROR(writer.Append(t.bytes));
  return writer.Finish();
}

}  // namespace gpugeek::models
