#pragma once
// A gpugeek gang as one Slurm batch job, pinned where gpugeek's scheduler placed it.
//
// Why sbatch and not slurmrestd for the submission: Slurm 22.05's REST API (v0.0.36-v0.0.38) refuses the
// node list ("Disabled key: required_nodes") and ignores #SBATCH lines, so it cannot pin a job to the
// nodes gpugeek chose; `sbatch --nodelist` can. Inventory, job state and cancellation go through
// slurmrestd (rest_client.h).
//
// The job: `sbatch --parsable --no-requeue --nodes=N --nodelist=... --ntasks-per-node=T
// --gres=gpu[:TYPE]:G ...` with the script of BatchScript on stdin. `--no-requeue`: a NODE_FAIL ends the
// job and gpugeek re-places it (from its checkpoint), so Slurm never runs a second copy elsewhere. The
// script runs one `srun` step with T tasks per node; each task gets the torch.distributed env:// variables
// with ranks in gpugeek's node order (Slurm numbers nodes in sorted hostname order, SLURM_NODEID, which
// is not the placement's order): NODE_RANK = the node's index in `nodes`, RANK = NODE_RANK x T +
// SLURM_LOCALID, LOCAL_RANK, WORLD_SIZE = N x T, MASTER_ADDR = the first node's address, MASTER_PORT; and
// gpugeek's own GPUGEEK_JOB_ID, GPUGEEK_EPOCH, GPUGEEK_NUM_NODES, GPUGEEK_NODE_RANK, GPUGEEK_GPUS_PER_NODE,
// GPUGEEK_WORLD_SIZE, GPUGEEK_MASTER_ADDR, GPUGEEK_MASTER_PORT (as agent/README.md lists them).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::backends::slurm {

struct GangJob {
  std::string job_id;              // gpugeek's job id
  int64_t epoch = 0;               // allocation epoch (fencing): in the Slurm job name and comment
  std::vector<std::string> nodes;  // Slurm node names in rank order; nodes[0] hosts rank 0
  std::string master_address;      // nodes[0]'s address (slurmrestd node "address")
  int master_port = 29500;
  std::string gpu_type;  // GRES type ("a100"); empty for untyped GPUs
  int gpus_per_node = 0;
  int tasks_per_node = 1;
  std::string partition;             // optional
  std::string workdir;               // --chdir; the job's output goes to WORKDIR/slurm-<jobid>.out
  std::vector<std::string> command;  // argv every task runs
  // Exported to every task. Names the platform sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
  // NODE_RANK, GPUGEEK_*) or that steer Slurm itself (SLURM_*, SRUN_*, SBATCH_*) are refused.
  std::vector<std::pair<std::string, std::string>> env;
  // Variables the platform sets for this job (api::kPlatformEnvNames: GPUGEEK_EXPERIMENT, GPUGEEK_TRIAL_ID,
  // GPUGEEK_PARAMS), exported before `env`.
  std::vector<std::pair<std::string, std::string>> platform_env;
  // Site limits; 0 / empty: the partition's defaults.
  int64_t time_limit_minutes = 0;     // --time (1 .. 366 days)
  int cpus_per_task = 0;              // --cpus-per-task (0 .. 1024)
  int64_t memory_per_node_bytes = 0;  // --mem, in whole MiB (rounded up)
  std::string account;                // --account
  std::string qos;                    // --qos
};

// InvalidArgument naming the field when a node name, GRES type, partition, account or QoS is not
// [A-Za-z0-9._-]+, the master address is neither that nor an IPv6 literal, an env name is not
// [A-Za-z_][A-Za-z0-9_]* or is one the platform sets, a node repeats, counts are out of 1..1024 (nodes),
// 0..64 (GPUs), 1..256 (tasks), the port is not 1..65535, the workdir is not an absolute path free of
// '%', '\\' and control characters (sbatch expands % in --output), or the command is empty.
absl::Status Validate(const GangJob& job);

// The Slurm job name: "gpugeek-<job_id>-e<epoch>" (what squeue shows).
std::string SlurmJobName(const GangJob& job);

// sbatch's argv (argv[0] = "sbatch"). Validate first.
std::vector<std::string> SbatchArgv(const GangJob& job);

// The batch script (bash), given to sbatch on stdin. Validate first.
std::string BatchScript(const GangJob& job);

}  // namespace gpugeek::backends::slurm
