"""Helpers the example's tests share: run the launcher, read what train.py wrote."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

GPT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, GPT_DIR)

PYTHON = "/usr/bin/python3"  # Debian's python3-torch is installed for the system interpreter only
STEP_LINE = re.compile(r"^step=(\d+) loss=([0-9.]+) lr=(\S+) tokens_per_s=(\d+)$")


def launcher_command(out, nnodes, nproc_per_node, max_restarts, train_args):
    """argv of launch_local.py running train.py into folder `out` with the given extra arguments."""
    return [PYTHON, os.path.join(GPT_DIR, "launch_local.py"), "--nnodes", str(nnodes),
            "--nproc-per-node", str(nproc_per_node), "--max-restarts", str(max_restarts), "--",
            PYTHON, os.path.join(GPT_DIR, "train.py"), "--out", out, *map(str, train_args)]


def free_port():
    """A TCP port on 127.0.0.1 the kernel just handed out (free now; nothing holds it for the caller)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def solo_env(**extra):
    """os.environ plus `extra` and a rendezvous of its own for a train.py run alone: MASTER_ADDR=127.0.0.1 and a
    MASTER_PORT the kernel just handed out. Alone, train.py's rendezvous defaults to torch's 29500, which another
    test, or a job the control plane placed on this machine, may hold at the same moment (EADDRINUSE)."""
    return dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), **extra)


class LaunchedRun:
    """A launcher process whose stdout and stderr lines are collected, in order, as they come."""

    def __init__(self, argv, env=None):
        self.lines = []
        self._cv = threading.Condition()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line.rstrip("\n"))
                self._cv.notify_all()

    def wait_for(self, predicate, timeout_s):
        """Blocks until predicate(lines) is true (returns True) or timeout_s pass or the launcher ends
        (returns False)."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return False
                self._cv.wait(min(left, 0.2))
            return True

    def finish(self, timeout_s):
        """The launcher's exit status; kills its whole process group if it outlives timeout_s."""
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self._reader.join(5)
        self.proc.stdout.close()
        return self.proc.returncode

    def snapshot(self):
        """A copy of the lines received so far."""
        with self._cv:
            return list(self.lines)

    def output(self):
        with self._cv:
            return "\n".join(self.lines)


def step_losses(lines):
    """{step: loss} from rank 0's `step=... loss=...` lines (a step logged twice keeps the later)."""
    out = {}
    for line in lines:
        m = STEP_LINE.match(line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out


def read_samples(path):
    """[(step, epoch, position, [indices])] from a samples-rank{R}.txt, in file order."""
    rows = []
    with open(path, encoding="ascii") as f:
        for line in f:
            step, epoch, position, *indices = map(int, line.split())
            rows.append((step, epoch, position, indices))
    return rows


def read_summary(out):
    """The summary.json train.py wrote into folder out."""
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        return json.load(f)
