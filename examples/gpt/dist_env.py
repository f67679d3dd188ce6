"""Where this process sits in the job: torch's env:// variables, filled in from gpugeek's own.

torch's env:// rendezvous reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (LOCAL_RANK and
LOCAL_WORLD_SIZE are what torchrun adds). A gpugeek agent sets GPUGEEK_WORLD_SIZE, GPUGEEK_NODE_RANK,
GPUGEEK_MASTER_ADDR / _PORT, GPUGEEK_CHECKPOINT_DIR and GPUGEEK_RESTART_COUNT (src/agent/README.md);
a torch variable wins where both are set. GPUGEEK_TP / GPUGEEK_PP / GPUGEEK_DP carry the planner's
layout: this example is data-parallel only, so TP and PP must be 1 and DP must equal the world size.
"""

import os
from dataclasses import dataclass


class LayoutError(ValueError):
    """The requested parallel layout is one this program cannot run."""


@dataclass(frozen=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    restart_count: int


def _int(env, names, default):
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise LayoutError(f"{name}={value!r} is not an integer") from None
    return default


def resolve(env=None):
    """The DistEnv of this process from env (default os.environ). Without any of the variables it is a
    single process: rank 0 of 1. Raises LayoutError for TP or PP other than 1, DP other than the world
    size, or a rank outside the world."""
    env = os.environ if env is None else env
    tp = _int(env, ["GPUGEEK_TP"], 1)
    pp = _int(env, ["GPUGEEK_PP"], 1)
    if tp != 1 or pp != 1:
        raise LayoutError(f"GPUGEEK_TP={tp} GPUGEEK_PP={pp}: this example runs data parallelism only "
                          "(TP=1, PP=1); plan the job with --tp 1 --pp 1 or use a Megatron-style trainer")
    world = _int(env, ["WORLD_SIZE", "GPUGEEK_WORLD_SIZE"], 1)
    dp = _int(env, ["GPUGEEK_DP"], world)
    if dp != world:
        raise LayoutError(f"GPUGEEK_DP={dp} but the world has {world} ranks: with TP=PP=1 they must be equal")
    local_world = _int(env, ["LOCAL_WORLD_SIZE"], world)
    local_rank = _int(env, ["LOCAL_RANK"], 0)
    node_rank = _int(env, ["GROUP_RANK", "GPUGEEK_NODE_RANK"], 0)
    rank = _int(env, ["RANK"], node_rank * local_world + local_rank)
    if not 0 <= rank < world or not 0 <= local_rank < local_world:
        raise LayoutError(f"rank {rank} (local {local_rank}) is outside a world of {world} "
                          f"({local_world} per node)")
    return DistEnv(rank=rank, local_rank=local_rank, world_size=world, local_world_size=local_world,
                   master_addr=env.get("MASTER_ADDR") or env.get("GPUGEEK_MASTER_ADDR") or "127.0.0.1",
                   master_port=_int(env, ["MASTER_PORT", "GPUGEEK_MASTER_PORT"], 29500),
                   restart_count=_int(env, ["TORCHELASTIC_RESTART_COUNT", "GPUGEEK_RESTART_COUNT"], 0))
