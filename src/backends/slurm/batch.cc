#include "backends/slurm/batch.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "absl/strings/str_join.h"
#include "common/quote.h"

namespace gpugeek::backends::slurm {
namespace {

bool IsHostWord(const std::string& s) {
  if (s.empty() || s.size() > 255) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  }
  return true;
}

bool IsAddress(const std::string& s) {
  if (IsHostWord(s)) return true;
  if (s.empty() || s.size() > 64) return false;  // an IPv6 literal
  for (char c : s) {
    if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) return false;
  }
  return s.find(':') != std::string::npos;
}

bool Reserved(const std::string& name) {
  static const char* const kNames[] = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  for (const char* prefix : {"GPUGEEK_", "SLURM_", "SRUN_", "SBATCH_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

bool IsEnvName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace

absl::Status Validate(const GangJob& job) {
  if (!IsHostWord(job.job_id) || job.job_id == "." || job.job_id == "..") {
    return absl::InvalidArgumentError("job_id: use letters, digits, '.', '_' or '-' (not . or ..)");
  }
  if (job.epoch < 0) return absl::InvalidArgumentError("epoch: must be >= 0");
  if (job.nodes.empty() || job.nodes.size() > 1024) {
    return absl::InvalidArgumentError("nodes: give 1 to 1024 Slurm node names");
  }
  std::set<std::string> seen;
  for (const std::string& n : job.nodes) {
    if (!IsHostWord(n)) {
      return absl::InvalidArgumentError(
          fmt::format("nodes: {} is not a Slurm node name ([A-Za-z0-9._-])", QuoteForMessage(n)));
    }
    if (!seen.insert(n).second) return absl::InvalidArgumentError(fmt::format("nodes: {} repeats", QuoteForMessage(n)));
  }
  if (!IsAddress(job.master_address)) {
    return absl::InvalidArgumentError("master_address: give the first node's address (slurmrestd node address)");
  }
  if (job.master_port < 1 || job.master_port > 65535) return absl::InvalidArgumentError("master_port: 1..65535");
  if (!job.gpu_type.empty() && !IsHostWord(job.gpu_type)) {
    return absl::InvalidArgumentError("gpu_type: a GRES type is [A-Za-z0-9._-] (e.g. a100)");
  }
  if (job.gpus_per_node < 0 || job.gpus_per_node > 64) return absl::InvalidArgumentError("gpus_per_node: 0..64");
  if (job.tasks_per_node < 1 || job.tasks_per_node > 256) return absl::InvalidArgumentError("tasks_per_node: 1..256");
  if (!job.partition.empty() && !IsHostWord(job.partition)) {
    return absl::InvalidArgumentError("partition: a Slurm partition name is [A-Za-z0-9._-]");
  }
  bool plain_path = !job.workdir.empty() && job.workdir[0] == '/' && job.workdir.size() <= 4096;
  for (char c : job.workdir) plain_path &= c != '%' && c != '\\' && static_cast<unsigned char>(c) >= 0x20;
  if (!plain_path) {
    return absl::InvalidArgumentError(
        "workdir: give an absolute path on the Slurm nodes without '%', '\\' or control characters");
  }
  if (job.time_limit_minutes < 0 || job.time_limit_minutes > 366 * 24 * 60) {
    return absl::InvalidArgumentError("time_limit_minutes: 0 (the partition's) .. 527040 (366 days)");
  }
  if (job.cpus_per_task < 0 || job.cpus_per_task > 1024) return absl::InvalidArgumentError("cpus_per_task: 0..1024");
  if (job.memory_per_node_bytes < 0 || job.memory_per_node_bytes > (int64_t{1} << 50)) {
    return absl::InvalidArgumentError("memory_per_node_bytes: 0 (the partition's) .. 1 PiB");
  }
  if (!job.account.empty() && !IsHostWord(job.account)) {
    return absl::InvalidArgumentError("account: a Slurm account name is [A-Za-z0-9._-]");
  }
  if (!job.qos.empty() && !IsHostWord(job.qos))
    return absl::InvalidArgumentError("qos: a Slurm QoS name is [A-Za-z0-9._-]");
  if (job.command.empty() || job.command[0].empty())
    return absl::InvalidArgumentError("command: give what each task runs");
  for (const auto& [name, value] : job.platform_env) {
    if (name != "GPUGEEK_EXPERIMENT" && name != "GPUGEEK_TRIAL_ID" && name != "GPUGEEK_PARAMS") {
      return absl::InvalidArgumentError(
          fmt::format("platform_env: {} is not a platform variable", QuoteForMessage(name)));
    }
  }
  for (const auto& [name, value] : job.env) {
    if (!IsEnvName(name)) {
      return absl::InvalidArgumentError(fmt::format("env: {} is not a variable name", QuoteForMessage(name)));
    }
    if (Reserved(name)) {
      return absl::InvalidArgumentError(
          fmt::format("env: {} is set by the platform or steers Slurm; use another name", QuoteForMessage(name)));
    }
  }
  return absl::OkStatus();
}

std::string SlurmJobName(const GangJob& job) { return fmt::format("gpugeek-{}-e{}", job.job_id, job.epoch); }

std::vector<std::string> SbatchArgv(const GangJob& job) {
  std::vector<std::string> argv = {"sbatch",
                                   "--parsable",
                                   "--no-requeue",
                                   "--job-name=" + SlurmJobName(job),
                                   fmt::format("--comment=gpugeek:{}:{}", job.job_id, job.epoch),
                                   fmt::format("--nodes={}", job.nodes.size()),
                                   "--nodelist=" + absl::StrJoin(job.nodes, ","),
                                   fmt::format("--ntasks-per-node={}", job.tasks_per_node),
                                   "--chdir=" + job.workdir,
                                   "--output=" + job.workdir + "/slurm-%j.out"};
  if (job.gpus_per_node > 0) {
    argv.push_back(job.gpu_type.empty() ? fmt::format("--gres=gpu:{}", job.gpus_per_node)
                                        : fmt::format("--gres=gpu:{}:{}", job.gpu_type, job.gpus_per_node));
  }
  if (!job.partition.empty()) argv.push_back("--partition=" + job.partition);
  if (job.time_limit_minutes > 0) argv.push_back(fmt::format("--time={}", job.time_limit_minutes));
  if (job.cpus_per_task > 0) argv.push_back(fmt::format("--cpus-per-task={}", job.cpus_per_task));
  if (job.memory_per_node_bytes > 0) {
    const int64_t mib = (job.memory_per_node_bytes + (int64_t{1} << 20) - 1) >> 20;
    argv.push_back(fmt::format("--mem={}M", mib));
  }
  if (!job.account.empty()) argv.push_back("--account=" + job.account);
  if (!job.qos.empty()) argv.push_back("--qos=" + job.qos);
  return argv;
}

std::string BatchScript(const GangJob& job) {
  std::string s = "#!/bin/bash\n";
  s += fmt::format("# gpugeek job {} epoch {}: {} node(s) x {} task(s), placed by gpugeek\n", job.job_id, job.epoch,
                   job.nodes.size(), job.tasks_per_node);
  s += "set -u\n";
  s += fmt::format("export MASTER_ADDR={} MASTER_PORT={} WORLD_SIZE={}\n", job.master_address, job.master_port,
                   job.nodes.size() * job.tasks_per_node);
  s += fmt::format("export GPUGEEK_JOB_ID={} GPUGEEK_EPOCH={} GPUGEEK_NUM_NODES={} GPUGEEK_GPUS_PER_NODE={}\n",
                   job.job_id, job.epoch, job.nodes.size(), job.gpus_per_node);
  s += fmt::format("export GPUGEEK_WORLD_SIZE={} GPUGEEK_MASTER_ADDR={} GPUGEEK_MASTER_PORT={}\n",
                   job.nodes.size() * std::max(job.gpus_per_node, 1), job.master_address, job.master_port);
  for (const auto& [name, value] : job.platform_env) s += fmt::format("export {}={}\n", name, ShellQuote(value));
  for (const auto& [name, value] : job.env) s += fmt::format("export {}={}\n", name, ShellQuote(value));
  // Each task: its node's index in the placement, then the command.
  std::string task = "case \"$SLURMD_NODENAME\" in\n";
  for (size_t i = 0; i < job.nodes.size(); ++i) task += fmt::format("  {}) NODE_RANK={} ;;\n", job.nodes[i], i);
  task += "  *) echo \"gpugeek: node $SLURMD_NODENAME is not in the placement\" >&2; exit 97 ;;\nesac\n";
  task += fmt::format(
      "export NODE_RANK GPUGEEK_NODE_RANK=$NODE_RANK RANK=$((NODE_RANK * {} + SLURM_LOCALID)) "
      "LOCAL_RANK=$SLURM_LOCALID\n",
      job.tasks_per_node);
  task += "exec \"$@\"\n";
  std::vector<std::string> quoted;
  for (const std::string& a : job.command) quoted.push_back(ShellQuote(a));
  s += fmt::format("exec srun --kill-on-bad-exit=1 --ntasks-per-node={} /bin/bash -c {} gpugeek-task {}\n",
                   job.tasks_per_node, ShellQuote(task), absl::StrJoin(quoted, " "));
  return s;
}

}  // namespace gpugeek::backends::slurm
