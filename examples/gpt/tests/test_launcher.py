#!/usr/bin/python3
"""launch_local.py on its own: the env:// variables each rank gets, the restart limit, no retry of status 2."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import harness

LAUNCHER = os.path.join(harness.GPT_DIR, "launch_local.py")


def launch(*args, env=None):
    return subprocess.run([harness.PYTHON, LAUNCHER, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))


class LauncherTest(unittest.TestCase):
    def test_ranks_get_env_variables(self):
        with tempfile.TemporaryDirectory() as d:
            dump = ("import json, os, sys; keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', "
                    "'GROUP_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'GPUGEEK_RESTART_COUNT'); "
                    "json.dump({k: os.environ[k] for k in keys}, open(sys.argv[1] + '/' + os.environ['RANK'], 'w'))")
            r = launch("--nnodes", "2", "--nproc-per-node", "3", "--", sys.executable, "-c", dump, d)
            self.assertEqual(r.returncode, 0, r.stderr)
            envs = []
            for rank in range(6):
                with open(os.path.join(d, str(rank)), encoding="utf-8") as f:
                    envs.append(json.load(f))
        for rank, e in enumerate(envs):
            self.assertEqual((e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"]), (str(rank), str(rank % 3), str(rank // 3)))
            self.assertEqual((e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["MASTER_ADDR"]), ("6", "3", "127.0.0.1"))
            self.assertEqual(e["GPUGEEK_RESTART_COUNT"], "0")
        self.assertEqual(len({e["MASTER_PORT"] for e in envs}), 1)

    def test_restarts_up_to_the_limit_then_reports_the_status(self):
        r = launch("--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "2", "--",
                   "sh", "-c", 'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 30')
        self.assertEqual(r.returncode, 3, r.stderr)
        for attempt in range(3):
            self.assertIn(f"attempt={attempt} rank=1 exited with status 3", r.stderr)
        self.assertNotIn("attempt=3", r.stderr)
        self.assertIn("no restarts left", r.stderr)

    def test_usage_error_is_not_retried(self):
        with tempfile.TemporaryDirectory() as out:
            r = launch("--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "3", "--",
                       harness.PYTHON, os.path.join(harness.GPT_DIR, "train.py"), "--out", out,
                       env={"GPUGEEK_TP": "2"})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("data parallelism only", r.stderr)
        self.assertIn("not restarting", r.stderr)
        self.assertNotIn("attempt=1", r.stderr)


if __name__ == "__main__":
    unittest.main()
