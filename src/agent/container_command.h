#pragma once
// The command that runs a member of a job with `image:` in a container (rootful podman, local images
// only), built as data so that tests check it exactly. The executor runs it like any member's command
// (under the shim, in the member's cgroups, with its lease): `podman run` stays in the foreground, so
// the member ends when the container does, with its exit status, and --rm removes the container then.
//
//   exec PODMAN... run --rm --name NAME --network=host RUN_FLAGS... --user UID:GID
//        --env-file ENV_FILE -v WORKDIR:WORKDIR -w WORKDIR -v HOST:PATH:ro... --device DEV... IMAGE
//        /bin/sh -c INIT gpugeek-init RUN
//
// Inside, the member sees what it would see on the host: the same working folder at the same path,
// the same environment (GPUGEEK_*, CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES as the executor computes
// them, the job's env, HOME = the working folder when the agent switches users) and its GPUs as device
// nodes; the job's dataset version, if it names one, is mounted read-only at /gpugeek/dataset. INIT is a small sh
// script that runs RUN as its child: a container's PID 1 ignores signals it has no handler for, so INIT traps SIGTERM /
// SIGINT (which `podman run` proxies to it on a cancel or a fence) and passes them to every process of the container,
// then exits with RUN's status.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::agent {

struct ContainerCommand {
  // The podman invocation, split into words: {"podman", "--root", "/var/lib/x", ...}; not empty.
  std::vector<std::string> podman;
  // Extra `podman run` flags, e.g. {"--ulimit", "nofile=4096:4096"} (machine specific, see the agent's
  // --podman-run-flags).
  std::vector<std::string> run_flags;
  std::string name;         // container name, ContainerName()
  std::string image;        // canonical reference, "localhost/busybox:latest"
  std::string working_dir;  // absolute; mounted at the same path and made the working directory
  std::string env_file;     // absolute path of the file ContainerEnvFile() wrote
  // The container's user: the tenant's uid:gid when the agent switches users; nullopt = the image's.
  std::optional<std::pair<uint32_t, uint32_t>> user;
  // Folders mounted read-only, as (absolute host path, absolute path in the container): the job's
  // dataset checkout at /gpugeek/dataset. Paths hold no ':' or ','.
  std::vector<std::pair<std::string, std::string>> read_only_mounts;
  std::vector<std::string> devices;  // device nodes passed in (GpuDeviceNodes)
  std::string run;                   // the member's shell command (run, or setup, or the torch launcher)
};

// "gpugeek-<node>-<workload id>-e<epoch>-<step>" (step: "setup" or "run"): each step of each placement
// has its own name, so removing one step's container never touches the next; the prefix
// "gpugeek-<node>-" is how the agent finds what a previous agent of the node left (ListContainers).
std::string ContainerName(const std::string& node, const std::string& workload_id, int64_t epoch,
                          const std::string& step);

// INIT of the file comment: `/bin/sh -c INIT gpugeek-init RUN` runs RUN and exits with its status.
const char* ContainerInitScript();

// The argv of `podman run` (see the file comment); the words exactly as exec would get them.
std::vector<std::string> ContainerArgv(const ContainerCommand& c);

// "exec " + ContainerArgv with every word single-quoted: the command for the executor's `/bin/sh -c`.
std::string ContainerShellCommand(const ContainerCommand& c);

// The device nodes of a member's GPUs that exist (`exists` says; emulated GPUs have none, so none are
// passed): NVIDIA: /dev/nvidia<N> per GPU (N = the NVML index, hw::GpuDevice::source_index), then
// /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools; AMD: /dev/kfd and every /dev/dri/renderD*
// that `render_nodes` lists (HIP_VISIBLE_DEVICES chooses among them, as on the host). No GPUs: none.
std::vector<std::string> GpuDeviceNodes(std::optional<hw::Vendor> vendor, const std::vector<int>& indices,
                                        const std::vector<std::string>& render_nodes,
                                        const std::function<bool(const std::string&)>& exists);

// The text of podman's --env-file for `env`: one NAME=VALUE line each, in name order. podman reads a
// value to the end of its line, so a value holding a newline cannot travel: InvalidArgument naming the
// variable ("env.NOTE: ...") and what to do instead.
absl::StatusOr<std::string> ContainerEnvFile(const std::map<std::string, std::string>& env);

// The argv of `gpugeek exec` into a member's running container: PODMAN... exec [--user UID:GID] --workdir
// WORKDIR NAME ARGV... (no shell: ARGV reaches the container's process as it is; the container's own
// environment, the member's, applies).
std::vector<std::string> ContainerExecArgv(const std::vector<std::string>& podman, const std::string& name,
                                           const std::optional<std::pair<uint32_t, uint32_t>>& user,
                                           const std::string& working_dir, const std::vector<std::string>& argv);

// The argv that removes a member's container whatever its state (`podman rm -f --time 0 NAME`); run when
// the member ended, and for leftovers a previous agent left.
std::vector<std::string> ContainerRemoveArgv(const std::vector<std::string>& podman, const std::string& name);

}  // namespace gpugeek::agent
