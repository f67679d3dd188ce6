#!/usr/bin/python3
"""The model-artifact scripts end to end on a briefly trained GPT: quantize_eval.py (perplexity of gpugeek's
int8 / int4 against fp32 and quantize_dynamic) and watermark_eval.py (the mark read back after each attack).
A bounded version of the runs docs/models.md reports (those train 300 steps and fine-tune 200).
The binary is $GPUGEEK_BINARY (CTest sets it) or build/gpugeek."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import harness  # first: puts examples/gpt on sys.path

REPO = os.path.dirname(os.path.dirname(harness.GPT_DIR))


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
