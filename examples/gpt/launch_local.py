#!/usr/bin/python3
"""Starts NNODES x NPROC_PER_NODE ranks of a command on this machine and restarts the whole group if one dies.

    launch_local.py --nnodes 2 --nproc-per-node 2 --max-restarts 3 -- /usr/bin/python3 train.py --out DIR

Each rank gets torch's env:// variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
MASTER_ADDR=127.0.0.1, MASTER_PORT: a free port picked anew for every attempt, so a restart never waits
for the old one's TIME_WAIT), TORCHELASTIC_RESTART_COUNT and GPUGEEK_RESTART_COUNT (the attempt, from 0),
and OMP_NUM_THREADS / OPENBLAS_NUM_THREADS so that the ranks together use the CPUs once. Each rank is its
own process group, so stopping it stops what it started.

The group is one unit, as torchrun's elastic agent treats it: when any rank exits non-zero or by a signal,
the others get SIGTERM (SIGKILL 10 s later) and, while restarts remain, all ranks start again; the
program is expected to resume from its own checkpoint. A rank exiting with status 2 (a usage or layout
error, as argparse and train.py report them) is not restarted: it would fail the same way.

Prints `launch_local: ...` lines to stderr: one per rank started (with its pid) and one per failure.
Exit status: 0 when every rank of an attempt exits 0; otherwise the failing rank's status (128 + signal
number for a signal) once restarts are spent.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

USAGE_ERROR = 2
POLL_SECONDS = 0.1
GRACE_SECONDS = 10.0


def log(message):
    """One `launch_local: ...` line on stderr."""
    print(f"launch_local: {message}", file=sys.stderr, flush=True)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice for port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(base, node, local_rank, args, port, attempt):
    """The environment of one rank: base plus the env:// variables."""
    world = args.nnodes * args.nproc_per_node
    threads = str(max(1, (os.cpu_count() or 1) // world))
    env = dict(base)
    env.update(RANK=str(node * args.nproc_per_node + local_rank), LOCAL_RANK=str(local_rank),
               WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(args.nproc_per_node), GROUP_RANK=str(node),
               NODE_RANK=str(node), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               TORCHELASTIC_RESTART_COUNT=str(attempt), GPUGEEK_RESTART_COUNT=str(attempt),
               OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
    return env


def start_group(args, attempt):
    """Starts every rank; returns their Popen objects in rank order."""
    port = free_port()
    procs = []
    for node in range(args.nnodes):
        for local_rank in range(args.nproc_per_node):
            env = rank_env(os.environ, node, local_rank, args, port, attempt)
            p = subprocess.Popen(args.command, env=env, start_new_session=True)
            log(f"attempt={attempt} rank={env['RANK']} node={node} pid={p.pid} master_port={port}")
            procs.append(p)
    return procs


def stop_group(procs):
    """SIGTERM to every live rank's process group, SIGKILL to those left after GRACE_SECONDS."""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, None)):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + (wait or GRACE_SECONDS)
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)


def exit_status(returncode):
    """Popen's returncode as a shell would report it (a signal N becomes 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def wait_group(procs):
    """Blocks until every rank exited 0 (returns None) or one failed (returns (rank, status))."""
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                return rank, exit_status(code)
        if all(code == 0 for code in codes):
            return None
        time.sleep(POLL_SECONDS)


def run(args):
    """Runs the group until an attempt succeeds or restarts are spent; returns the exit status."""
    procs = []

    def on_signal(signum, _frame):
        log(f"got signal {signum}; stopping the group")
        stop_group(procs)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for attempt in range(args.max_restarts + 1):
        procs[:] = start_group(args, attempt)
        failure = wait_group(procs)
        if failure is None:
            log(f"attempt={attempt} all {len(procs)} ranks exited 0")
            return 0
        rank, status = failure
        log(f"attempt={attempt} rank={rank} exited with status {status}; stopping the group")
        stop_group(procs)
        if status == USAGE_ERROR:
            log("status 2 is a usage error; not restarting")
            return status
        if attempt < args.max_restarts:
            log(f"restarting the group ({attempt + 1} of {args.max_restarts} restarts)")
    log("no restarts left")
    return status


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nnodes", type=int, default=1, help="simulated nodes")
    p.add_argument("--nproc-per-node", type=int, default=1, help="ranks per node")
    p.add_argument("--max-restarts", type=int, default=3, help="times the group is restarted after a failure")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command or args.nnodes < 1 or args.nproc_per_node < 1 or args.max_restarts < 0:
        p.error("need --nnodes >= 1, --nproc-per-node >= 1, --max-restarts >= 0 and a command after --")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
