// The sbatch line and batch script of a gang, byte-exact.

#include "backends/slurm/batch.h"

#include <gtest/gtest.h>

namespace gpugeek::backends::slurm {
namespace {

GangJob TwoNodes() {
  GangJob j;
  j.job_id = "job-00000007";
  j.epoch = 3;
  j.nodes = {"n2", "n1"};
  j.master_address = "10.0.0.2";
  j.gpu_type = "a100";
  j.gpus_per_node = 4;
  j.tasks_per_node = 2;
  j.workdir = "/scratch/job-00000007";
  j.command = {"python3", "train.py", "--name", "it's"};
  j.env = {{"HF_HOME", "/data/hf cache"}};
  j.platform_env = {{"GPUGEEK_TRIAL_ID", "t-1"}};
  return j;
}

TEST(BatchTest, SbatchPinsTheNodesAndTheGres) {
  const GangJob j = TwoNodes();
  ASSERT_TRUE(Validate(j).ok());
  EXPECT_EQ(SbatchArgv(j),
            (std::vector<std::string>{"sbatch", "--parsable", "--no-requeue", "--job-name=gpugeek-job-00000007-e3",
                                      "--comment=gpugeek:job-00000007:3", "--nodes=2", "--nodelist=n2,n1",
                                      "--ntasks-per-node=2", "--chdir=/scratch/job-00000007",
                                      "--output=/scratch/job-00000007/slurm-%j.out", "--gres=gpu:a100:4"}));
}

TEST(BatchTest, SiteLimitsAndAnIpv6Master) {
  GangJob j = TwoNodes();
  j.master_address = "fd00::2";
  j.time_limit_minutes = 90;
  j.cpus_per_task = 8;
  j.memory_per_node_bytes = (int64_t{64} << 30) + 1;  // rounded up to whole MiB
  j.account = "ml-team";
  j.qos = "high";
  ASSERT_TRUE(Validate(j).ok()) << Validate(j);
  const std::vector<std::string> argv = SbatchArgv(j);
  EXPECT_EQ(
      std::vector<std::string>(argv.end() - 5, argv.end()),
      (std::vector<std::string>{"--time=90", "--cpus-per-task=8", "--mem=65537M", "--account=ml-team", "--qos=high"}));
  EXPECT_NE(BatchScript(j).find("export MASTER_ADDR=fd00::2 "), std::string::npos);
}

TEST(BatchTest, ScriptRanksFollowThePlacementOrder) {
  EXPECT_EQ(BatchScript(TwoNodes()),
            "#!/bin/bash\n"
            "# gpugeek job job-00000007 epoch 3: 2 node(s) x 2 task(s), placed by gpugeek\n"
            "set -u\n"
            "export MASTER_ADDR=10.0.0.2 MASTER_PORT=29500 WORLD_SIZE=4\n"
            "export GPUGEEK_JOB_ID=job-00000007 GPUGEEK_EPOCH=3 GPUGEEK_NUM_NODES=2 GPUGEEK_GPUS_PER_NODE=4\n"
            "export GPUGEEK_WORLD_SIZE=8 GPUGEEK_MASTER_ADDR=10.0.0.2 GPUGEEK_MASTER_PORT=29500\n"
            "export GPUGEEK_TRIAL_ID='t-1'\n"
            "export HF_HOME='/data/hf cache'\n"
            "exec srun --kill-on-bad-exit=1 --ntasks-per-node=2 /bin/bash -c 'case \"$SLURMD_NODENAME\" in\n"
            "  n2) NODE_RANK=0 ;;\n"
            "  n1) NODE_RANK=1 ;;\n"
            "  *) echo \"gpugeek: node $SLURMD_NODENAME is not in the placement\" >&2; exit 97 ;;\n"
            "esac\n"
            "export NODE_RANK GPUGEEK_NODE_RANK=$NODE_RANK RANK=$((NODE_RANK * 2 + SLURM_LOCALID)) "
            "LOCAL_RANK=$SLURM_LOCALID\n"
            "exec \"$@\"\n"
            "' gpugeek-task 'python3' 'train.py' '--name' 'it'\\''s'\n");
}

TEST(BatchTest, HostileFieldsAreRefusedByName) {
  const std::pair<void (*)(GangJob&), const char*> cases[] = {
      {[](GangJob& j) { j.nodes = {"n1;rm -rf /"}; }, "nodes:"},
      {[](GangJob& j) {
         j.nodes = {"n1", "n1"};
       },
       "repeats"},
      {[](GangJob& j) { j.nodes.clear(); }, "nodes:"},
      {[](GangJob& j) { j.master_address = "$(id)"; }, "master_address"},
      {[](GangJob& j) { j.gpu_type = "a100,gpu:h100:8"; }, "gpu_type"},
      {[](GangJob& j) { j.gpus_per_node = 65; }, "gpus_per_node"},
      {[](GangJob& j) { j.tasks_per_node = 0; }, "tasks_per_node"},
      {[](GangJob& j) { j.master_port = 0; }, "master_port"},
      {[](GangJob& j) { j.workdir = "relative"; }, "workdir"},
      {[](GangJob& j) { j.command.clear(); }, "command"},
      {[](GangJob& j) {
         j.env = {{"A B", "x"}};
       },
       "env:"},
      {[](GangJob& j) { j.job_id = "job 1"; }, "job_id"},
      {[](GangJob& j) { j.job_id = ".."; }, "job_id"},
      {[](GangJob& j) { j.partition = "p;x"; }, "partition"},
      {[](GangJob& j) {
         j.env = {{"MASTER_ADDR", "evil"}};
       },
       "set by the platform"},
      {[](GangJob& j) {
         j.env = {{"GPUGEEK_EPOCH", "99"}};
       },
       "set by the platform"},
      {[](GangJob& j) {
         j.env = {{"SLURM_NODELIST", "x"}};
       },
       "steers Slurm"},
      {[](GangJob& j) {
         j.env = {{"SRUN_CPUS_PER_TASK", "x"}};
       },
       "env:"},
      {[](GangJob& j) { j.workdir = "/scratch/%u"; }, "workdir"},
      {[](GangJob& j) { j.workdir = "/scratch/a\\b"; }, "workdir"},
      {[](GangJob& j) { j.time_limit_minutes = -1; }, "time_limit_minutes"},
      {[](GangJob& j) { j.cpus_per_task = 2000; }, "cpus_per_task"},
      {[](GangJob& j) { j.account = "a b"; }, "account"},
      {[](GangJob& j) { j.qos = "--x=y z"; }, "qos"},
      {[](GangJob& j) {
         j.platform_env = {{"GPUGEEK_JOB_ID", "x"}};
       },
       "platform_env"},
  };
  for (const auto& [mutate, field] : cases) {
    GangJob j = TwoNodes();
    mutate(j);
    const absl::Status st = Validate(j);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), std::string_view::npos) << st;
  }
}

}  // namespace
}  // namespace gpugeek::backends::slurm
