#!/usr/bin/python3
"""One rank is SIGKILLed after a checkpoint; the launcher restarts the group, which resumes from that
checkpoint (at most one checkpoint interval back), replays exactly the same data, and finishes with 0."""

import os
import re
import signal
import tempfile
import unittest

import torch

import harness
from harness import launcher_command, read_samples, step_losses

NODES, PER_NODE = 2, 2
WORLD = NODES * PER_NODE
STEPS, BATCH, SEQ, CKPT_EVERY = 40, 4, 32, 10
KILL_AFTER_STEP = 15  # mid-way between the checkpoints at 10 and 20
KILLED_RANK = 2  # rank 0 of the second node
TRAIN_ARGS = ["--steps", STEPS, "--batch-size", BATCH, "--seq-len", SEQ, "--ckpt-every", CKPT_EVERY,
              "--log-every", 1, "--lr", 2e-3]

PID_LINE = re.compile(r"launch_local: attempt=(\d+) rank=(\d+) node=\d+ pid=(\d+)")
CKPT_LINE = re.compile(r"^checkpoint step=(\d+)")
RESUME_LINE = re.compile(r"^resumed step=(\d+) epoch=(\d+) position=(\d+) restart=(\d+)")


def matches(pattern, lines):
    return [m for m in map(pattern.match, lines) if m]


class RestartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpt-restart-")
        cls.out = cls.tmp.name
        run = harness.LaunchedRun(launcher_command(cls.out, NODES, PER_NODE, 2, TRAIN_ARGS))
        reached = run.wait_for(lambda lines: max(step_losses(lines), default=0) >= KILL_AFTER_STEP, 90)
        before = run.snapshot()  # what rank 0 had reported when the kill was sent
        cls.killed = False
        if reached:
            pid = next(int(m.group(3)) for m in matches(PID_LINE, before)
                       if m.group(1) == "0" and int(m.group(2)) == KILLED_RANK)
            os.kill(pid, signal.SIGKILL)
            cls.killed = True
        cls.step_before_kill = max(step_losses(before), default=0)
        cls.ckpt_before_kill = max((int(m.group(1)) for m in matches(CKPT_LINE, before)), default=0)
        cls.status = run.finish(timeout_s=100)
        cls.lines = run.lines
        cls.after = run.lines[len(before):]
        cls.output = run.output()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_kill_happened_after_a_checkpoint(self):
        self.assertTrue(self.killed, self.output)
        self.assertGreaterEqual(self.ckpt_before_kill, CKPT_EVERY, self.output)
        self.assertIn(f"attempt=0 rank={KILLED_RANK} exited with status 137", self.output)

    def test_group_restarted_and_finished(self):
        self.assertEqual(self.status, 0, self.output)
        self.assertEqual(len([m for m in matches(PID_LINE, self.lines) if m.group(1) == "1"]), WORLD)
        self.assertIn(f"attempt=1 all {WORLD} ranks exited 0", self.output)
        self.assertEqual(harness.read_summary(self.out)["steps"], STEPS)
        self.assertEqual(torch.load(os.path.join(self.out, "checkpoint.pt"))["step"], STEPS)

    def test_resumed_from_the_checkpoint(self):
        resumed = matches(RESUME_LINE, self.after)
        self.assertEqual(len(resumed), 1, self.output)
        step, epoch, position, restart = map(int, resumed[0].groups())
        self.assertEqual(restart, 1)
        self.assertGreaterEqual(step, self.ckpt_before_kill)
        self.assertGreaterEqual(step, self.step_before_kill - CKPT_EVERY)
        self.assertEqual(step % CKPT_EVERY, 0)
        self.assertEqual((epoch, position), (0, step * BATCH * WORLD))
        # Rank 0 logs every step: after the resume it goes on at step + 1, not at 1.
        self.assertEqual(min(step_losses(self.after[self.after.index(resumed[0].string):])), step + 1)

    def test_replayed_steps_repeat_the_losses(self):
        # Model, optimizer, data position and RNG all come back: a replayed step computes the same loss.
        before, after = step_losses(self.lines[: len(self.lines) - len(self.after)]), step_losses(self.after)
        resumed_at = int(matches(RESUME_LINE, self.after)[0].group(1))
        replayed = sorted(set(before) & set(after))
        # Normally steps 11..15: the kill lands within a step of rank 0 logging step 15.
        self.assertEqual(replayed, list(range(resumed_at + 1, max(before) + 1)), self.output)
        for step in replayed:
            self.assertAlmostEqual(before[step], after[step], delta=1e-3, msg=f"step {step}")

    def test_replayed_steps_read_the_same_data(self):
        for rank in range(WORLD):
            seen = {}
            for step, epoch, position, indices in read_samples(os.path.join(self.out, f"samples-rank{rank}.txt")):
                if step in seen:
                    self.assertEqual(seen[step], (epoch, position, indices), f"rank {rank} step {step}")
                seen[step] = (epoch, position, indices)
            self.assertEqual(sorted(seen), list(range(1, STEPS + 1)), f"rank {rank}")


if __name__ == "__main__":
    unittest.main()
