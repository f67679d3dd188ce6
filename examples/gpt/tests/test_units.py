#!/usr/bin/python3
"""Single-process checks of the pieces: sharding, layout variables, atomic checkpoints, the model."""

import http.server
import json
import os
import signal
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

import torch

import harness  # first: puts examples/gpt on sys.path
import checkpoint
import data
import dist_env
import gpugeek_checkpoint
from model import GPT, GPTConfig, count_parameters


class ShardedSamplerTest(unittest.TestCase):
    def test_matches_distributed_sampler_and_resumes_anywhere(self):
        n, batch, world = 103, 4, 3
        samplers = [data.ShardedSampler(n, batch, world, r, seed=7) for r in range(world)]
        perm = samplers[0].permutation(0)
        epoch, position, seen = 0, 0, []
        for _ in range(samplers[0].steps_per_epoch()):
            batches = [s.batch(epoch, position) for s in samplers]
            for r in range(world):  # DistributedSampler: rank r's k-th batch is perm[r::world][kB:(k+1)B]
                k = position // (batch * world)
                self.assertEqual(batches[r], perm[r::world][k * batch:(k + 1) * batch].tolist())
            seen += sum(batches, [])
            epoch, position = samplers[0].advance(epoch, position)
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(len(seen), (n // (batch * world)) * batch * world)  # drop_last
        self.assertEqual((epoch, position), (1, 0))
        self.assertFalse(torch.equal(samplers[0].permutation(1), perm))  # reshuffled per epoch

    def test_windows_are_next_byte_pairs(self):
        tokens = torch.arange(50, dtype=torch.uint8)
        x, y = data.windows(tokens, [0, 2], seq_len=5)
        self.assertEqual(x.tolist(), [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
        self.assertEqual(y.tolist(), [[1, 2, 3, 4, 5], [11, 12, 13, 14, 15]])

    def test_corpus_split(self):
        train, val = data.split_corpus(data.load_corpus())
        self.assertGreater(len(train), 200_000)  # the 13 licence texts are ~230 KB
        self.assertEqual(len(val), int((len(train) + len(val)) * 0.05))


class DistEnvTest(unittest.TestCase):
    def test_torch_variables_win(self):
        env = dist_env.resolve({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                                "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234",
                                "GPUGEEK_MASTER_ADDR": "10.9.9.9", "GPUGEEK_RESTART_COUNT": "2"})
        self.assertEqual((env.rank, env.local_rank, env.world_size, env.master_addr, env.master_port,
                          env.restart_count), (3, 1, 4, "10.0.0.1", 1234, 2))

    def test_gpugeek_variables_fill_in(self):
        env = dist_env.resolve({"GPUGEEK_WORLD_SIZE": "2", "GPUGEEK_NODE_RANK": "1", "LOCAL_WORLD_SIZE": "1",
                                "GPUGEEK_MASTER_ADDR": "node-a", "GPUGEEK_MASTER_PORT": "29400"})
        self.assertEqual((env.rank, env.world_size, env.master_addr, env.master_port), (1, 2, "node-a", 29400))

    def test_only_data_parallel(self):
        for bad in ({"GPUGEEK_TP": "2"}, {"GPUGEEK_PP": "4"}, {"WORLD_SIZE": "4", "GPUGEEK_DP": "2"},
                    {"WORLD_SIZE": "2", "RANK": "2"}):
            with self.assertRaises(dist_env.LayoutError, msg=str(bad)):
                dist_env.resolve(bad)
        self.assertEqual(dist_env.resolve({"GPUGEEK_TP": "1", "GPUGEEK_DP": "1"}).world_size, 1)

    def test_train_refuses_tensor_parallel_with_status_2(self):
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([harness.PYTHON, os.path.join(harness.GPT_DIR, "train.py"), "--out", out],
                               env=harness.solo_env(GPUGEEK_TP="2"), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("data parallelism only", r.stderr)


class MaxMinutesTest(unittest.TestCase):
    def test_stops_in_time_with_checkpoint_and_summary(self):
        with tempfile.TemporaryDirectory() as out:
            argv = [harness.PYTHON, os.path.join(harness.GPT_DIR, "train.py"), "--out", out, "--steps", "100000",
                    "--batch-size", "2", "--seq-len", "16", "--max-minutes", "0.02"]  # 1.2 s
            r = subprocess.run(argv, env=harness.solo_env(OMP_NUM_THREADS="1"), capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            summary = harness.read_summary(out)
            self.assertGreater(summary["steps"], 0)
            self.assertLess(summary["steps"], 100000)
            self.assertEqual(summary["tokens_seen"], summary["steps"] * 2 * 16)
            self.assertEqual(checkpoint.load(out)["step"], summary["steps"])


class SigtermTest(unittest.TestCase):
    def test_checkpoints_the_step_in_flight_and_exits_0(self):
        """SIGTERM (a planned stop) mid-run: a checkpoint at the step it was on, `stopped step=S`, exit 0,
        no summary (no evaluation inside the grace)."""
        with tempfile.TemporaryDirectory() as out:
            argv = [harness.PYTHON, os.path.join(harness.GPT_DIR, "train.py"), "--out", out, "--steps", "100000",
                    "--batch-size", "2", "--seq-len", "16", "--log-every", "1", "--ckpt-every", "100000"]
            run = harness.LaunchedRun(argv, env=harness.solo_env())
            self.assertTrue(run.wait_for(lambda lines: any(l.startswith("step=3 ") for l in lines), 60), run.lines)
            os.kill(run.proc.pid, signal.SIGTERM)
            self.assertEqual(run.finish(60), 0, run.lines)
            stopped = [l for l in run.lines if l.startswith("stopped step=")]
            self.assertEqual(len(stopped), 1, run.lines)
            step = int(stopped[0].split()[1].split("=")[1])
            self.assertGreaterEqual(step, 3)
            self.assertIn(f"checkpoint step={step} ", "\n".join(run.lines) + " ")
            self.assertEqual(checkpoint.load(out)["step"], step)
            self.assertFalse(os.path.exists(os.path.join(out, "summary.json")))


class ResumeReportTest(unittest.TestCase):
    def test_a_run_reports_the_checkpoint_it_resumes_from(self):
        """The steps reported to a stand-in agent endpoint: the first run's checkpoints (2, 4), then the
        second run's resume point (4), although it trains no step and writes no checkpoint."""
        reports = []

        class Endpoint(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                reports.append((self.path, self.headers["Authorization"], json.loads(body)["step"]))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            env = harness.solo_env(OMP_NUM_THREADS="1", GPUGEEK_MEMBER_TOKEN="t" * 32,
                       GPUGEEK_AGENT_URL=f"http://127.0.0.1:{server.server_address[1]}")
            with tempfile.TemporaryDirectory() as out:
                argv = [harness.PYTHON, os.path.join(harness.GPT_DIR, "train.py"), "--out", out, "--steps", "4",
                        "--batch-size", "2", "--seq-len", "16", "--ckpt-every", "2", "--eval-windows", "2"]
                for _ in range(2):
                    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
                    self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("resumed step=4 ", r.stdout)
        finally:
            server.shutdown()
        self.assertEqual(reports, [("/v1/checkpoint", "Bearer " + "t" * 32, s) for s in (2, 4, 4)])


class ContractHelperTest(unittest.TestCase):
    def test_outside_gpugeek_report_does_nothing(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertFalse(gpugeek_checkpoint.report(12))
            self.assertEqual(gpugeek_checkpoint.restart_count(), 0)
            self.assertIsNone(gpugeek_checkpoint.checkpoint_dir())
        with mock.patch.dict(os.environ, {"GPUGEEK_RESTART_COUNT": "3", "GPUGEEK_CHECKPOINT_DIR": "/ckpt"}):
            self.assertEqual(gpugeek_checkpoint.restart_count(), 3)
            self.assertEqual(gpugeek_checkpoint.checkpoint_dir(), "/ckpt")

    def test_an_unreachable_agent_is_false_not_an_exception(self):
        env = {"GPUGEEK_AGENT_URL": "http://127.0.0.1:1", "GPUGEEK_MEMBER_TOKEN": "a" * 32}
        with mock.patch.dict(os.environ, env):
            self.assertFalse(gpugeek_checkpoint.report(12, timeout=2))
            with self.assertRaises(ValueError):
                gpugeek_checkpoint.report(-1)

    def test_stop_request_catches_sigterm(self):
        previous = signal.getsignal(signal.SIGTERM)
        try:
            stop = gpugeek_checkpoint.StopRequest()
            self.assertFalse(stop.requested)
            os.kill(os.getpid(), signal.SIGTERM)
            self.assertTrue(stop.requested)
            self.assertEqual(stop.signal, signal.SIGTERM)
        finally:
            signal.signal(signal.SIGTERM, previous)


class CheckpointTest(unittest.TestCase):
    def test_failed_save_keeps_the_previous_checkpoint(self):
        with tempfile.TemporaryDirectory() as d:
            checkpoint.save({"step": 1}, d)
            with mock.patch.object(torch, "save", side_effect=OSError("disk full")):
                with self.assertRaises(OSError):
                    checkpoint.save({"step": 2}, d)
            self.assertEqual(checkpoint.load(d), {"step": 1})
            self.assertEqual(os.listdir(d), [checkpoint.CHECKPOINT_NAME])  # no temporary file left

    def test_missing_is_none(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(checkpoint.load(d))


class ModelTest(unittest.TestCase):
    def test_gpt2_count_formula_and_causality(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"model_type": "gpt2", "vocab_size": 50, "n_positions": 16, "n_embd": 8,
                           "n_layer": 2, "n_head": 2}, f)
            cfg = GPTConfig.from_json(path)
        torch.manual_seed(0)
        model = GPT(cfg)
        h, v, p, L = 8, 50, 16, 2
        # GPT-2: wte + wpe + L x (2 LayerNorms, qkv, out, fc, proj, with biases) + ln_f; head tied.
        self.assertEqual(count_parameters(model), v * h + p * h + L * (12 * h * h + 13 * h) + 2 * h)
        x = torch.randint(0, v, (1, 10))
        y = x.clone()
        y[0, 6:] = (y[0, 6:] + 1) % v
        logits_x, logits_y = model(x)[0], model(y)[0]
        self.assertTrue(torch.allclose(logits_x[0, :6], logits_y[0, :6]))  # no peeking at later tokens
        self.assertFalse(torch.allclose(logits_x[0, 6:], logits_y[0, 6:]))


if __name__ == "__main__":
    unittest.main()
