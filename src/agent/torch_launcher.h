#pragma once
// The `launcher: torch` command: one process per GPU (or `procs_per_node`) on each node, with the
// env:// rendezvous variables PyTorch's init_process_group reads, as torchrun sets them:
//   RANK = node_rank x procs + local_rank, LOCAL_RANK, WORLD_SIZE = num_nodes x procs,
//   LOCAL_WORLD_SIZE = procs, GROUP_RANK = NODE_RANK = node_rank, MASTER_ADDR, MASTER_PORT
// (from GPUGEEK_NODE_RANK, GPUGEEK_NUM_NODES, GPUGEEK_MASTER_ADDR and GPUGEEK_MASTER_PORT, which the
// executor sets: executor.h BuildWorkloadEnv). Debian 12's torchrun cannot start under Python 3.11
// (an AttributeError in torch/distributed/elastic/multiprocessing/api.py), and a launcher of our own
// needs no Python on the node: it is a bash script.
//
// The local ranks share the member's stdout/stderr (its log). When one exits non-zero or is killed,
// the launcher (checking its ranks every 0.2 s) says which on stderr, stops the others (SIGTERM, SIGKILL
// after `grace_s`) and exits with
// that rank's status, so the member fails and the job's retry policy (`retry: {on: [error]}`) restarts
// the whole group from its checkpoint, on every node. It exits 0 once every local rank has.

#include <string>
#include <string_view>

#include "common/quote.h"

namespace gpugeek::agent {

// The shell command (for `/bin/sh -c`) that runs `run` as `procs` local ranks (1..64). `run` is passed
// as an argument, quoted: any text is safe.
std::string TorchLauncherCommand(std::string_view run, int procs, int grace_s = 30);

}  // namespace gpugeek::agent
