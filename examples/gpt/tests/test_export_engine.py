#!/usr/bin/python3
"""export_engine.py on a briefly trained GPT: TorchScript equals eager, both ONNX files pass onnx.checker, OpenCV's
DNN module runs the fp32 graph to eager's logits, the numpy reference evaluator runs both graphs, the QDQ file
holds gpugeek's int8 integers and scales (a row recomputed here by hand), and engine.json's sha256 are the files'.
The QDQ weights are also compared with `gpugeek quantize` when the binary is there ($GPUGEEK_BINARY or
build/gpugeek)."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

import harness  # first: puts examples/gpt on sys.path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

import checkpoint
import export_engine

REPO = os.path.dirname(os.path.dirname(harness.GPT_DIR))


class ExportEngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        ckpt, cls.out = cls.dir.name, os.path.join(cls.dir.name, "engines")
        subprocess.run([sys.executable, os.path.join(harness.GPT_DIR, "train.py"), "--out", ckpt, "--steps", "10",
                        "--log-every", "10", "--ckpt-every", "10"], check=True, capture_output=True, timeout=300,
                       env=harness.solo_env())
        binary = os.environ.get("GPUGEEK_BINARY") or os.path.join(REPO, "build", "gpugeek")
        cls.with_gpugeek = os.path.exists(binary)
        r = subprocess.run([sys.executable, os.path.join(harness.GPT_DIR, "export_engine.py"), "--checkpoint", ckpt,
                            "--out", cls.out, "--batch", "2", "--seq", "32", "--repeats", "2",
                            *(["--gpugeek", binary] if cls.with_gpugeek else [])],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError(r.stderr)
        cls.stdout = r.stdout
        with open(os.path.join(cls.out, "engine.json")) as f:
            cls.manifest = json.load(f)
        cls.checks = cls.manifest["checks"]["files"]
        cls.state = checkpoint.load(ckpt)["model"]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_torchscript_equals_eager(self):
        self.assertLessEqual(self.checks["torchscript"]["max_abs_diff_vs_eager"], 1e-5)
        # The saved file, loaded here, against the eager model of the same checkpoint.
        model = export_engine.build_model(export_engine.eval_common.CONFIG, seed=0).eval()
        model.load_state_dict(self.state)
        ts = torch.jit.load(os.path.join(self.out, "model.torchscript.pt"))
        idx = torch.randint(0, 256, (3, 20), generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            self.assertLessEqual((ts(idx) - model(idx)[0]).abs().max().item(), 1e-5)

    def test_onnx_files_pass_the_checker_and_run(self):
        for name in ("model.onnx", "model.int8.onnx"):
            onnx.checker.check_model(onnx.load(os.path.join(self.out, name)))
        fp32 = self.checks["onnx"]
        self.assertTrue(fp32["runtime"].startswith("OpenCV DNN 4."), fp32)
        self.assertLess(fp32["max_abs_diff_vs_eager"], 1e-4)  # measured 3e-6: fp32, another order of sums
        self.assertLess(fp32["reference_max_abs_diff_vs_eager"], 1e-4)
        int8 = self.checks["onnx-int8"]
        self.assertLess(int8["reference_max_abs_diff_vs_eager_dequantised"], 1e-4)
        # Against the fp32 model the difference is the quantisation's own: present, and small for logits of ~+-10.
        self.assertGreater(int8["reference_max_abs_diff_vs_eager"], 1e-4)
        self.assertLess(int8["reference_max_abs_diff_vs_eager"], 0.1)
        self.assertEqual(len(int8["quantised"]), 16)  # 4 blocks x (c_attn, c_proj, c_fc, mlp_proj)

    def test_qdq_weights_are_gpugeek_int8(self):
        graph = onnx.load(os.path.join(self.out, "model.int8.onnx")).graph
        inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        name = "gpt.h.1.c_fc.weight"
        self.assertNotIn(name, inits)
        q, s = inits[name + "_quantized"], inits[name + "_scale"]
        self.assertEqual(q.dtype, np.int8)
        self.assertEqual(q.shape, (1024, 256))
        self.assertFalse(inits[name + "_zero_point"].any())
        dq = [n for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] == name + "_quantized"]
        self.assertEqual([a.i for a in dq[0].attribute if a.name == "axis"], [0])
        # Row 5 by hand: s = max|w| / 127 in fp32, one float up if s * 127 < max|w|; q = round half even of w / s.
        row = self.state["h.1.c_fc.weight"][5].numpy()
        amax = np.float32(max(abs(float(v)) for v in row))
        scale = np.float32(amax / np.float32(127))
        if np.float32(scale * np.float32(127)) < amax:
            scale = np.nextafter(scale, np.float32(np.inf))
        self.assertEqual(s[5], scale)
        self.assertEqual(q[5].tolist(), [int(np.clip(np.rint(np.float32(v / scale)), -127, 127)) for v in row])
        self.assertEqual(int(np.abs(q[5]).max()), 127)
        # The head (tied to the embedding) stays fp32, as under `gpugeek quantize --skip embeddings`.
        self.assertIn("gpt.wte.weight", inits)
        if self.with_gpugeek:
            self.assertTrue(self.manifest["checks"]["int8_equals_gpugeek_quantize"])

    def test_manifest_describes_the_files(self):
        files = self.manifest["files"]
        self.assertEqual(sorted(files), ["model.int8.onnx", "model.onnx", "model.torchscript.pt"])
        for name, entry in files.items():
            with open(os.path.join(self.out, name), "rb") as f:
                blob = f.read()
            self.assertEqual(entry["sha256"], hashlib.sha256(blob).hexdigest(), name)
            self.assertEqual(entry["bytes"], len(blob), name)
        self.assertEqual(files["model.onnx"]["opset"], 13)
        self.assertEqual(files["model.onnx"]["inputs"], [{"name": "idx", "dtype": "int64", "shape": ["batch", "time"]}])
        self.assertEqual(files["model.onnx"]["outputs"][0]["shape"], ["batch", "time", 256])
        # 16 matrices of 4 bytes per weight become 1 byte per weight plus a scale and a zero point per row.
        self.assertLess(files["model.int8.onnx"]["bytes"], 0.4 * files["model.onnx"]["bytes"])
        self.assertIn("TorchScript", self.stdout)


if __name__ == "__main__":
    unittest.main()
