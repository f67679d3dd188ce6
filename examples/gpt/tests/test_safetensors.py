#!/usr/bin/python3
"""safetensors files cross between gpugeek (C++) and PyTorch bit for bit, and `gpugeek quantize`'s integers
are exactly what symmetric round-to-nearest computed in PyTorch gives.

PyTorch writes a model's weights (safetensors_io.save_file, the raw layout), `gpugeek quantize` reads that
file and writes the quantised one, and PyTorch reads it back (safetensors_io.load_file): kept tensors equal
the originals byte for byte, and the int8 / int4 integers and scales equal a PyTorch recomputation of
models/quantize.h's formulas. The binary is $GPUGEEK_BINARY (CTest sets it) or build/gpugeek.
"""

import json
import os
import subprocess
import tempfile
import unittest

import torch

import harness  # first: puts examples/gpt on sys.path
import safetensors_io as st

REPO = os.path.dirname(os.path.dirname(harness.GPT_DIR))


def binary():
    path = os.environ.get("GPUGEEK_BINARY") or os.path.join(REPO, "build", "gpugeek")
    if not os.path.exists(path):
        raise unittest.SkipTest(f"no gpugeek binary at {path}; build it or set GPUGEEK_BINARY")
    return path


def reference_int8_rows(w):
    """models/quantize.h int8: s = max|row| / 127 rounded up in fp32 so that 127 s >= max|row|; q = round(w / s)."""
    amax = w.abs().amax(dim=1)
    s = amax / 127
    s = torch.where(s * 127 < amax, torch.nextafter(s, torch.full_like(s, float("inf"))), s)
    q = torch.where(s[:, None] > 0, torch.round(w / s[:, None]), torch.zeros_like(w)).clamp(-127, 127)
    return q.to(torch.int8), s


class SafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        g = torch.Generator().manual_seed(3)
        self.weights = {
            "h.0.c_fc.weight": torch.randn(64, 96, generator=g) * 0.02,
            "h.0.c_fc.bias": torch.randn(64, generator=g),
            "h.0.half.weight": (torch.randn(32, 64, generator=g) * 0.1).to(torch.float16),
            "h.0.bf16.weight": (torch.randn(16, 64, generator=g) * 0.1).to(torch.bfloat16),
            "wte.weight": torch.randn(256, 32, generator=g) * 0.02,
            "step": torch.tensor(41, dtype=torch.int64),
            "mask": torch.tensor([True, False, True]),
        }
        self.path = os.path.join(self.dir.name, "model.safetensors")
        st.save_file(self.weights, self.path, {"format": "pt"})

    def tearDown(self):
        self.dir.cleanup()

    def quantize(self, scheme, *extra):
        out = os.path.join(self.dir.name, f"model.{scheme}.safetensors")
        r = subprocess.run([binary(), "quantize", self.path, "--to", scheme, "--out", out, "--json", *extra],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout), st.load_file(out)

    def test_python_round_trip_is_bit_exact(self):
        tensors, metadata = st.load_file(self.path)
        self.assertEqual(metadata, {"format": "pt"})
        for name, t in self.weights.items():
            self.assertEqual(tensors[name].dtype, t.dtype, name)
            self.assertTrue(torch.equal(tensors[name], t), name)

    def test_int8_rows_match_a_pytorch_recomputation_exactly(self):
        report, (tensors, metadata) = self.quantize("int8", "--skip", "embeddings")
        by_name = {t["name"]: t for t in report["tensors"]}
        self.assertEqual(by_name["wte.weight"]["kept"], "an embedding table (--skip embeddings)")
        self.assertEqual(by_name["h.0.c_fc.weight"]["bytes_after"], 64 * 96 + 4 * 64)
        q, s = reference_int8_rows(self.weights["h.0.c_fc.weight"])
        self.assertTrue(torch.equal(tensors["h.0.c_fc.weight"], q))
        self.assertTrue(torch.equal(tensors["h.0.c_fc.weight.qscale"], s))
        q16, s16 = reference_int8_rows(self.weights["h.0.half.weight"].float())
        self.assertTrue(torch.equal(tensors["h.0.half.weight"], q16))
        self.assertTrue(torch.equal(tensors["h.0.half.weight.qscale"], s16))
        for kept in ("wte.weight", "h.0.c_fc.bias", "step", "mask"):  # byte for byte as PyTorch wrote them
            self.assertTrue(torch.equal(tensors[kept], self.weights[kept]), kept)
        w = st.dequantize(tensors, metadata)
        self.assertEqual(w["h.0.half.weight"].dtype, torch.float16)
        self.assertEqual(w["h.0.bf16.weight"].dtype, torch.bfloat16)
        err = (w["h.0.c_fc.weight"] - self.weights["h.0.c_fc.weight"]).abs()
        self.assertTrue(bool((err <= s[:, None] / 2 * (1 + 1e-6)).all()))

    def test_int4_blocks_decode_within_half_a_scale(self):
        report, (tensors, metadata) = self.quantize("int4-block32")
        self.assertEqual(tensors["h.0.c_fc.weight"].dtype, torch.uint8)
        self.assertEqual(list(tensors["h.0.c_fc.weight"].shape), [64, 48])
        self.assertEqual(list(tensors["h.0.c_fc.weight.qscale"].shape), [64, 3])
        self.assertEqual(tensors["h.0.c_fc.weight.qscale"].dtype, torch.float16)
        w = self.weights["h.0.c_fc.weight"]
        back = st.dequantize(tensors, metadata)["h.0.c_fc.weight"]
        scales = tensors["h.0.c_fc.weight.qscale"].float().repeat_interleave(32, dim=1)
        self.assertTrue(bool(((back - w).abs() <= scales / 2 * (1 + 1e-6)).all()))
        self.assertTrue(bool((scales * 7 >= w.abs()).all()))  # scales rounded up: nothing clips
        self.assertEqual(report["quantised_bytes_after"], sum(t["bytes_after"] for t in report["tensors"] if "scheme" in t))


if __name__ == "__main__":
    unittest.main()
