#!/usr/bin/python3
"""The model artifacts of a briefly trained GPT end to end: the model folder train.py exports (out/model/) served
by serve.py --model-dir as trained, in float32 and as `gpugeek quantize --to int8` left it (what the quickstart
pushes and examples/gpt-serve.yaml serves); quantize_eval.py (perplexity of gpugeek's int8 / int4 against fp32
and quantize_dynamic) and watermark_eval.py (the mark read back after each attack). A bounded version of the runs
docs/models.md reports (those train 300 steps and fine-tune 200).
The binary is $GPUGEEK_BINARY (CTest sets it) or build/gpugeek."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import harness  # first: puts examples/gpt on sys.path

import torch

import checkpoint
import data
import serve
from model import build_model

REPO = os.path.dirname(os.path.dirname(harness.GPT_DIR))
CONFIG = os.path.join(harness.GPT_DIR, "config.json")


class ModelArtifactsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = os.environ.get("GPUGEEK_BINARY") or os.path.join(REPO, "build", "gpugeek")
        if not os.path.exists(cls.binary):
            raise unittest.SkipTest(f"no gpugeek binary at {cls.binary}; build it or set GPUGEEK_BINARY")
        cls.dir = tempfile.TemporaryDirectory()
        env = harness.solo_env()
        subprocess.run([sys.executable, os.path.join(harness.GPT_DIR, "train.py"), "--out", cls.dir.name,
                        "--steps", "40", "--log-every", "20"], check=True, capture_output=True, timeout=300, env=env)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def served(self, folder, prompt, max_tokens):
        """(GET /health, POST /predict answers) of `serve.py --model-dir folder` started on a free port."""
        port = harness.free_port()
        proc = subprocess.Popen([harness.PYTHON, os.path.join(harness.GPT_DIR, "serve.py"), "--port", str(port),
                                 "--model-dir", folder], stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                        health = json.loads(r.read())
                    break
                except OSError:
                    self.assertIsNone(proc.poll(), "serve.py exited")
                    self.assertLess(time.monotonic(), deadline, "serve.py did not answer /health in 60 s")
                    time.sleep(0.2)
            req = urllib.request.Request(f"http://127.0.0.1:{port}/predict",
                                         data=json.dumps({"prompt": prompt, "max_tokens": max_tokens}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return health, json.loads(r.read())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)

    def test_the_exported_model_serves_as_trained_in_float32_and_int8(self):
        fp32 = os.path.join(self.dir.name, "model")
        self.assertEqual(sorted(os.listdir(fp32)), ["config.json", "model.safetensors"])
        int8 = os.path.join(self.dir.name, "model-int8")
        os.makedirs(int8)
        subprocess.run([self.binary, "quantize", os.path.join(fp32, "model.safetensors"), "--to", "int8", "--skip",
                        "embeddings", "--out", os.path.join(int8, "model.safetensors")], check=True,
                       capture_output=True, timeout=120)
        shutil.copy(os.path.join(fp32, "config.json"), int8)

        trained = build_model(CONFIG, seed=0)
        trained.load_state_dict(checkpoint.load(self.dir.name)["model"])
        trained.eval()
        models = {"fp32": serve.load_model(CONFIG, model_dir=fp32), "int8": serve.load_model(CONFIG, model_dir=int8)}
        self.assertEqual(models["fp32"][1], f"{fp32} (unquantised)")
        self.assertEqual(models["int8"][1], f"{int8} (int8)")
        # Logits [8, 64, 256] of the first 8 held-out windows: float32 exactly the trained model's; int8 within 2 % of
        # their largest magnitude, the same next byte at >= 95 % of the positions, the loss within 0.5 %.
        _, val = data.split_corpus(data.load_corpus())
        x, y = data.windows(val, list(range(8)), 64)
        with torch.no_grad():
            want, want_loss = trained(x, y)
            got = {name: m(x, y) for name, (m, _) in models.items()}
        self.assertTrue(torch.equal(got["fp32"][0], want))
        error = (got["int8"][0] - want).abs().max().item()
        agree = (got["int8"][0].argmax(-1) == want.argmax(-1)).float().mean().item()
        loss_change = got["int8"][1].item() / want_loss.item() - 1
        print(f"int8: max |logit error| {error:.4g} of max |logit| {want.abs().max().item():.4g}, same argmax at "
              f"{100 * agree:.1f}% of positions, loss {100 * loss_change:+.3f}%", file=sys.stderr)
        self.assertGreater(error, 0.0)  # the weights really are the quantised ones
        self.assertLess(error, 0.02 * want.abs().max().item())
        self.assertGreaterEqual(agree, 0.95)
        self.assertLess(abs(loss_change), 0.005)
        # Served over HTTP: what the process loaded from each folder answers what the model in hand generates.
        for name, folder in (("fp32", fp32), ("int8", int8)):
            health, answer = self.served(folder, "The Licensor ", 24)
            self.assertEqual(health["weights"], models[name][1])
            want_text = "".join(map(serve.text_of, serve.generate(models[name][0], "The Licensor ", 24)))
            self.assertEqual(answer["completion"], want_text, name)
            self.assertEqual(answer["tokens"], 24)

    def script(self, name, *extra):
        out = os.path.join(self.dir.name, name)
        r = subprocess.run([sys.executable, os.path.join(harness.GPT_DIR, name), "--checkpoint", self.dir.name,
                            "--gpugeek", self.binary, "--out", out, *extra], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def test_quantised_models_keep_their_perplexity(self):
        out = self.script("quantize_eval.py")
        with open(os.path.join(out, "quantize_eval.json")) as f:
            rows = {r["variant"]: r for r in json.load(f)["rows"]}
        self.assertLess(abs(rows["gpugeek int8"]["ppl_change_pct"]), 0.5)
        self.assertLess(abs(rows["gpugeek int4-block32"]["ppl_change_pct"]), 2.0)
        # Per-row int8 of the matrices: 75% - 1/K smaller, K = 256 or 1024 inputs (quantize.h).
        self.assertGreater(rows["gpugeek int8"]["quantised_reduction"], 0.75 - 1 / 256)
        self.assertLess(rows["gpugeek int8"]["quantised_reduction"], 0.75)
        self.assertTrue(os.path.exists(os.path.join(out, "quantize_eval.svg")))

    def test_the_watermark_survives_quantisation_and_pruning(self):
        out = self.script("watermark_eval.py", "--steps", "5")
        with open(os.path.join(out, "watermark_eval.json")) as f:
            rows = {r["variant"]: r for r in json.load(f)["rows"]}
        self.assertEqual(rows["marked"]["errors"], 0)
        self.assertEqual(rows["marked + int8"]["errors"], 0)
        self.assertLessEqual(rows["marked + 50% pruning"]["ber"], 0.1)
        self.assertGreater(rows["unmarked"]["ber"], 0.3)
        self.assertGreater(rows["marked, wrong key"]["ber"], 0.3)


if __name__ == "__main__":
    unittest.main()
