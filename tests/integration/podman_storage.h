#pragma once
// What the container tests share: the podman invocation for a private storage (as
// ../shared/infra/container-up.sh sets it up) and the `podman run` flags this machine kind needs.
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace gpugeek::testing {

// The session lacks CAP_SYS_RESOURCE: podman's default rlimits fail (container-up.sh).
inline constexpr char kRunFlags[] = "--ulimit nofile=4096:4096 --ulimit nproc=4096:4096";

// Rootful podman over the storage in `state` (state/storage, state/runroot), runc, no systemd.
inline std::string PodmanFor(const std::filesystem::path& state) {
  return fmt::format(
      "podman --root {0}/storage --runroot {0}/runroot --runtime runc --cgroup-manager=cgroupfs "
      "--events-backend=file",
      state.string());
}

// Writes `text` to `p`, making its folder.
inline void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace gpugeek::testing
