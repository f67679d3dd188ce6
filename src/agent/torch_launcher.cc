#include "agent/torch_launcher.h"

#include <fmt/format.h>

namespace gpugeek::agent {
namespace {

// $1 = procs, $2 = grace seconds, $3 = the command. No single quote inside (it is passed quoted).
constexpr std::string_view kScript = R"bash(
set -u
# Job control: each rank runs in a process group of its own, so stop_all signals a rank's whole tree and
# waits until none of it is left (a rank's `sh -c` may die of the SIGTERM while its python still writes
# the checkpoint the SIGTERM asked for).
set -m
procs=$1 grace=$2 run=$3
node=${GPUGEEK_NODE_RANK:-0} nodes=${GPUGEEK_NUM_NODES:-1}
export WORLD_SIZE=$((nodes * procs)) LOCAL_WORLD_SIZE=$procs GROUP_RANK=$node NODE_RANK=$node
export MASTER_ADDR=${GPUGEEK_MASTER_ADDR:-127.0.0.1} MASTER_PORT=${GPUGEEK_MASTER_PORT:-29500}
declare -A local_rank_of=()
stop_all() {
  local pids=("${!local_rank_of[@]}")
  ((${#pids[@]} == 0)) && return
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  for ((t = 0; t < grace * 10; t++)); do
    alive=0
    for p in "${pids[@]}"; do kill -0 -- "-$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  wait
}
trap "stop_all; exit 143" TERM INT
for ((i = 0; i < procs; i++)); do
  RANK=$((node * procs + i)) LOCAL_RANK=$i /bin/sh -c "$run" &
  local_rank_of[$!]=$i
done
while ((${#local_rank_of[@]} > 0)); do
  sleep 0.2
  for pid in "${!local_rank_of[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid"
    rc=$?
    i=${local_rank_of[$pid]}
    unset "local_rank_of[$pid]"
    if ((rc != 0)); then
      echo "[gpugeek torch launcher] local rank $i (rank $((node * procs + i))) exited with status $rc; stopping the other ranks of node $node" >&2
      stop_all
      exit $rc
    fi
  done
done
exit 0
)bash";

}  // namespace

std::string TorchLauncherCommand(std::string_view run, int procs, int grace_s) {
  return fmt::format("exec bash -c {} gpugeek-torch-launcher {} {} {}", ShellQuote(kScript), procs, grace_s,
                     ShellQuote(run));
}

}  // namespace gpugeek::agent
