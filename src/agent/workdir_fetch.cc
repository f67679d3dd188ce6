#include "agent/workdir_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "archive/digest.h"

namespace gpugeek::agent {

std::shared_ptr<WorkdirFetcher> WorkdirFetcher::Create(std::string cache_dir, DownloadFn download) {
  return std::shared_ptr<WorkdirFetcher>(new WorkdirFetcher(std::move(cache_dir), std::move(download)));
}

WorkdirFetcher::WorkdirFetcher(std::string cache_dir, DownloadFn download)
    : cache_dir_(std::move(cache_dir)), download_(std::move(download)) {}

int WorkdirFetcher::downloads() const {
  MutexLock lock(&mu_);
  return downloads_;
}

std::shared_future<absl::StatusOr<std::string>> WorkdirFetcher::Fetch(const std::string& digest) {
  std::promise<absl::StatusOr<std::string>> ready;
  if (!archive::IsSha256Hex(digest)) {
    ready.set_value(absl::InvalidArgumentError(
        fmt::format("workdir_digest: '{}' is not a SHA-256 (64 hex digits)", digest.substr(0, 80))));
    return ready.get_future().share();
  }
  struct stat st;
  if (::stat(PathOf(digest).c_str(), &st) == 0) {  // only verified archives are ever renamed into place
    ready.set_value(PathOf(digest));
    return ready.get_future().share();
  }
  MutexLock lock(&mu_);
  if (auto it = in_flight_.find(digest); it != in_flight_.end()) return it->second;
  auto promise = std::make_shared<std::promise<absl::StatusOr<std::string>>>();
  std::shared_future<absl::StatusOr<std::string>> future = promise->get_future().share();
  in_flight_[digest] = future;
  ++downloads_;
  std::thread([self = shared_from_this(), digest, promise] {
    absl::StatusOr<std::string> result = self->Download(digest);
    {
      // Forgotten before the result is published: a caller seeing a failure and asking again starts anew.
      MutexLock forget(&self->mu_);
      self->in_flight_.erase(digest);
    }
    promise->set_value(std::move(result));
  }).detach();
  return future;
}

absl::StatusOr<std::string> WorkdirFetcher::Download(const std::string& digest) {
  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) return absl::UnavailableError(fmt::format("workdir cache: cannot create {}: {}", cache_dir_, ec.message()));
  const std::string part = PathOf(digest) + ".part";
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::UnavailableError(fmt::format("workdir cache: cannot create {}: {}", part, std::strerror(errno)));
  archive::Sha256 sha;
  uint64_t bytes = 0;
  absl::Status write_error;
  absl::Status status = download_(digest, [&](const std::string& piece) {
    size_t at = 0;
    while (at < piece.size()) {
      const ssize_t w = ::write(fd, piece.data() + at, piece.size() - at);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        write_error = absl::UnavailableError(fmt::format("workdir cache: writing {}: {}", part, std::strerror(errno)));
        return false;
      }
      at += static_cast<size_t>(w);
    }
    sha.Update(piece);
    bytes += piece.size();
    return true;
  });
  if (status.ok()) status = write_error;
  if (status.ok() && ::fsync(fd) != 0) {
    status = absl::UnavailableError(fmt::format("workdir cache: fsync {}: {}", part, std::strerror(errno)));
  }
  ::close(fd);
  if (status.ok()) {
    const std::string got = sha.HexDigest();
    if (got != digest) {
      status = absl::DataLossError(fmt::format(
          "workdir archive {}: the {} bytes fetched from the server hash to {}; not used", digest, bytes, got));
    }
  }
  if (status.ok() && ::rename(part.c_str(), PathOf(digest).c_str()) != 0) {
    status = absl::UnavailableError(fmt::format("workdir cache: rename {}: {}", part, std::strerror(errno)));
  }
  if (!status.ok()) {
    ::unlink(part.c_str());
    return status;
  }
  return PathOf(digest);
}

}  // namespace gpugeek::agent
