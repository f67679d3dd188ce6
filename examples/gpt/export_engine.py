#!/usr/bin/python3
"""Compiled engines of the GPT example: TorchScript, ONNX and INT8 (QDQ) ONNX, each checked against eager PyTorch.

    export_engine.py --checkpoint DIR [--out DIR] [--formats torchscript,onnx,onnx-int8]
                     [--batch 8] [--seq 128] [--repeats 10] [--gpugeek build/gpugeek]

DIR is a train.py --out folder (its checkpoint.pt). Written to --out (default DIR):
  model.torchscript.pt  torch.jit.trace of the model's forward, token ids [batch, time] int64 -> logits
                        [batch, time, vocab] fp32 (the loss branch left out).
  model.onnx            opset 13, dynamic batch and time axes, the same function written with the ops OpenCV 4.6's
                        DNN module runs (below).
  model.int8.onnx       model.onnx with each nn.Linear weight stored as gpugeek's `int8` scheme (src/models/quantize.h:
                        symmetric, per output row, q in [-127, 127], fp32 scale max|row| / 127 rounded up) in an INT8
                        initializer feeding DequantizeLinear(axis=0, zero point 0). The token embedding, which is also
                        the output head, stays fp32 as under `gpugeek quantize --skip embeddings`.
  engine.json           per file: format, bytes, sha256, opset, input and output names and shapes, dtype policy;
                        and the checks and timings below.

Checks: TorchScript's logits equal eager's within 1e-5 (max abs difference printed); onnx.checker passes for both
ONNX files; both run in OpenCV's DNN module (cv2.dnn, Debian's python3-opencv) and their logits are compared with
eager's: the fp32 file with the fp32 model, the QDQ file with the model holding the same dequantised weights and with
the fp32 model. A pure-numpy evaluator of exactly the ops in these graphs (reference_run) checks the files the same
way, independently of OpenCV. With --gpugeek, the QDQ file's integers and scales are compared with what `gpugeek
quantize --to int8` writes for the same weights. Latency: eager, TorchScript and OpenCV on one thread, a
[--batch, --seq] batch of seeded token ids, median of --repeats runs after one warm-up.

Why the ONNX graph is not torch.onnx.export of GPT.forward as it stands: OpenCV 4.6's importer has no Range (torch.
arange), no Gather with computed indices (the embedding lookup), no Where (masked_fill), no LayerNormalization, and
broadcasts a constant only over the dimensions from axis 1 and a computed tensor not at all. PortableGPT (below)
computes the same logits from the same parameters with MatMul, Gemm and elementwise ops on [batch * time, features]
matrices; its difference from eager is part of what the checks measure. OpenCV also cannot import dynamic axes
("dynamic 'zero' shapes are not supported"): the runtime check loads a copy with the input dimensions pinned.

Prints a table and writes --out/engine.json.
"""

import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import eval_common
import safetensors_io as st
from model import build_model

FORMATS = ("torchscript", "onnx", "onnx-int8")
FILES = {"torchscript": "model.torchscript.pt", "onnx": "model.onnx", "onnx-int8": "model.int8.onnx"}
OPSET = 13  # torch 1.13 exports up to 16; 13 is the first with per-axis DequantizeLinear and Split's sizes as input
TS_TOLERANCE = 1e-5
INPUT, OUTPUT = "idx", "logits"


class Logits(nn.Module):
    """GPT.forward without targets, returning the logits only (TorchScript traces one tensor out)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx):
        return self.gpt(idx)[0]


class PortableGPT(nn.Module):
    """The logits of `gpt` (its parameters, shared, not copied) from ops OpenCV 4.6 runs.

    Differences from GPT.forward, each the same function: the embedding lookup is a one-hot row (relu(1 - |id - v|),
    exact for integer ids) times wte; LayerNorm's means are products with a [C, 1] column of 1/C and back out with a
    [1, C] row of ones; the causal mask is added (0 or -inf) to the [batch * heads, time * time] scores; q is divided
    by sqrt(head_dim) before q @ k^T (OpenCV 4.6 drops a scale fused after a product of two computed tensors);
    per-token work is on [batch * time, C] matrices, so linear layers export as Gemm with the [out, in] weight."""

    def __init__(self, gpt):
        super().__init__()
        cfg = gpt.cfg
        if cfg.vocab_size < cfg.n_embd:
            raise ValueError("PortableGPT shares one row of ones for the one-hot and LayerNorm: needs vocab >= n_embd")
        self.gpt = gpt
        n = cfg.n_positions
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
        self.register_buffer("mask", torch.zeros(n, n).masked_fill(~causal, float("-inf")))
        self.register_buffer("vocab", torch.arange(cfg.vocab_size, dtype=torch.float32))
        # One row of ones for both uses: the exporter would otherwise merge equal constants with Identity nodes,
        # which OpenCV 4.6 cannot import.
        self.register_buffer("ones", torch.ones(1, cfg.vocab_size))
        self.register_buffer("mean_col", torch.full((cfg.n_embd, 1), 1.0 / cfg.n_embd))

    def _layer_norm(self, ln, x):
        ones = self.ones[:, : x.shape[1]]
        d = x - x @ self.mean_col @ ones
        var = (d * d) @ self.mean_col @ ones
        return d / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    def _attention(self, attn, x, b, t):
        c, h = x.shape[1], attn.n_head
        q, k, v = attn.c_attn(x).split(c, dim=1)
        q, k, v = (z.reshape(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        scores = (q / math.sqrt(c // h)) @ k.transpose(2, 3)
        scores = (scores.reshape(b * h, t * t) + self.mask[:t, :t].reshape(t * t)).reshape(b * h, t, t)
        y = F.softmax(scores, dim=2) @ v.reshape(b * h, t, c // h)
        return attn.c_proj(y.reshape(b, h, t, c // h).transpose(1, 2).reshape(b * t, c))

    def forward(self, idx):
        g = self.gpt
        b, t = idx.shape
        onehot = F.relu(1 - (idx.reshape(b * t, 1).to(torch.float32) @ self.ones - self.vocab).abs())
        x = ((onehot @ g.wte.weight).reshape(b, t, -1) + g.wpe.weight[:t]).reshape(b * t, -1)
        for block in g.h:
            x = x + self._attention(block.attn, self._layer_norm(block.ln_1, x), b, t)
            x = x + block.mlp_proj(block.act(block.c_fc(self._layer_norm(block.ln_2, x))))
        return F.linear(self._layer_norm(g.ln_f, x), g.wte.weight).reshape(b, t, -1)


def int8_rows(w):
    """gpugeek's `int8` scheme (quantize.cc, QuantizeMatrix) for a float32 [rows, cols] array: (q int8, s float32
    [rows]) with s = max|row| / 127 in fp32, raised to the next float when s * 127 < max|row|, and q = round half to
    even of w / s in fp32 (0 for an all-zero row)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=1)
    s = amax / np.float32(127)
    s = np.where(s * np.float32(127) < amax, np.nextafter(s, np.float32(np.inf)), s).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(s[:, None] > 0, np.rint(w / s[:, None]), np.float32(0))
    return np.clip(r, -127, 127).astype(np.int8), s


def linear_weights(model):
    """Names of the nn.Linear weights of `model` (a GPT), the tensors the QDQ file quantises."""
    return [f"{name}.weight" for name, m in model.named_modules() if isinstance(m, nn.Linear)]


def export_onnx(portable, path, example):
    """torch.onnx.export of `portable` to `path`, batch and time dynamic, the vocabulary axis fixed."""
    import onnx

    torch.onnx.export(portable, (example,), path, input_names=[INPUT], output_names=[OUTPUT], opset_version=OPSET,
                      dynamic_axes={INPUT: {0: "batch", 1: "time"}, OUTPUT: {0: "batch", 1: "time"}},
                      do_constant_folding=True)
    # The exporter names the vocabulary axis after the last Reshape; it is a constant.
    model = onnx.load(path)
    vocab = model.graph.output[0].type.tensor_type.shape.dim[2]
    vocab.dim_value = portable.gpt.cfg.vocab_size
    onnx.save(model, path)


def make_qdq(fp32_path, path, weight_names):
    """Writes model.int8.onnx: each initializer `gpt.NAME` of weight_names replaced by NAME_quantized (INT8 [out, in]),
    NAME_scale (FLOAT [out]), NAME_zero_point (INT8 [out], zeros) and DequantizeLinear(axis=0) feeding its users.
    Returns {NAME: (q, s)}."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(fp32_path)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    done, dq_nodes = {}, []
    for name in weight_names:
        init = inits.get(f"gpt.{name}")
        if init is None:
            raise RuntimeError(f"export_engine.py: {name} is not an initializer of {fp32_path}")
        q, s = int8_rows(numpy_helper.to_array(init))
        graph.initializer.remove(init)
        graph.initializer.extend([numpy_helper.from_array(q, f"{init.name}_quantized"),
                                  numpy_helper.from_array(s, f"{init.name}_scale"),
                                  numpy_helper.from_array(np.zeros(len(s), np.int8), f"{init.name}_zero_point")])
        dq_nodes.append(helper.make_node("DequantizeLinear", [f"{init.name}_{x}" for x in ("quantized", "scale", "zero_point")],
                                         [f"{init.name}_dequantized"], name=f"{init.name}_DequantizeLinear", axis=0))
        for node in graph.node:
            for i, x in enumerate(node.input):
                if x == init.name:
                    node.input[i] = f"{init.name}_dequantized"
        done[name] = (q, s)
    nodes = dq_nodes + list(graph.node)  # initializers first: the DequantizeLinear nodes depend on nothing else
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, path)
    return done


def reference_run(model, idx):
    """Evaluates an ONNX graph of exactly the ops these exports hold, in numpy (float32), on token ids `idx`.

    A reference check that does not depend on OpenCV, not a runtime: one op after another in graph order, each as the
    ONNX operator specification defines it, for the attributes these graphs use. Raises NotImplementedError naming an
    op it does not know."""
    import onnx
    from onnx import numpy_helper

    env = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    env[model.graph.input[0].name] = np.asarray(idx, dtype=np.int64)
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}
    unary = {"Sqrt": np.sqrt, "Tanh": np.tanh, "Abs": np.abs, "Relu": lambda x: np.maximum(x, 0)}
    for node in model.graph.node:
        a = {attr.name: onnx.helper.get_attribute_value(attr) for attr in node.attribute}
        x = [env[i] if i else None for i in node.input]
        op = node.op_type
        if op == "Constant":
            y = [numpy_helper.to_array(a["value"])]
        elif op in binary:
            y = [binary[op](x[0], x[1])]
        elif op in unary:
            y = [unary[op](x[0])]
        elif op == "MatMul":
            y = [np.matmul(x[0], x[1])]
        elif op == "Gemm":
            lhs = x[0].T if a.get("transA") else x[0]
            rhs = x[1].T if a.get("transB") else x[1]
            y = [np.float32(a.get("alpha", 1.0)) * (lhs @ rhs) + (np.float32(a.get("beta", 1.0)) * x[2] if len(x) > 2 else 0)]
        elif op == "DequantizeLinear":
            shape = [1] * x[0].ndim
            shape[a.get("axis", 1)] = -1
            y = [((x[0].astype(np.int32) - x[2].astype(np.int32).reshape(shape)) * x[1].reshape(shape)).astype(np.float32)]
        elif op == "Unsqueeze":
            y = [np.expand_dims(x[0], tuple(int(v) for v in x[1]))]
        elif op == "Concat":
            y = [np.concatenate(x, axis=a["axis"])]
        elif op == "Reshape":
            y = [x[0].reshape([int(d) if d != 0 else x[0].shape[i] for i, d in enumerate(x[1])])]
        elif op == "Transpose":
            y = [np.transpose(x[0], a["perm"])]
        elif op == "Shape":
            y = [np.array(x[0].shape, np.int64)]
        elif op == "Gather":
            y = [np.take(x[0], x[1], axis=a.get("axis", 0))]
        elif op == "Slice":
            index = [slice(None)] * x[0].ndim
            axes = x[3] if len(x) > 3 else range(len(x[1]))
            steps = x[4] if len(x) > 4 else [1] * len(x[1])
            for begin, end, axis, step in zip(x[1], x[2], axes, steps):
                index[int(axis)] = slice(int(begin), int(end), int(step))
            y = [x[0][tuple(index)]]
        elif op == "Cast":
            y = [x[0].astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[a["to"]])]
        elif op == "Split":
            y = np.split(x[0], np.cumsum(x[1])[:-1], axis=a.get("axis", 0))
        elif op == "Softmax":
            e = np.exp(x[0] - x[0].max(axis=a.get("axis", -1), keepdims=True))
            y = [e / e.sum(axis=a.get("axis", -1), keepdims=True)]
        else:
            raise NotImplementedError(f"reference_run: op {op} ({node.name})")
        for name, value in zip(node.output, y):
            env[name] = value
    return env[model.graph.output[0].name]


def opencv_net(path, batch, seq):
    """cv2.dnn.Net of the ONNX file at `path` with its input pinned to [batch, seq] (OpenCV 4.6 imports no dynamic
    axes), one thread."""
    import cv2
    import onnx

    model = onnx.load(path)
    for value, dims in ((model.graph.input[0], (batch, seq)), (model.graph.output[0], (batch, seq, None))):
        for d, n in zip(value.type.tensor_type.shape.dim, dims):
            if n is not None:
                d.dim_value = n
    cv2.setNumThreads(1)
    net = cv2.dnn.readNetFromONNX(np.frombuffer(model.SerializeToString(), np.uint8))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net


def opencv_run(net, idx):
    net.setInput(idx.numpy().astype(np.float32))  # cv2.dnn carries every blob as float; ids < 2^24 are exact
    return net.forward()


def median_ms(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def onnx_io(path):
    import onnx

    graph = onnx.load(path).graph

    def describe(v):
        return {"name": v.name, "dtype": onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[v.type.tensor_type.elem_type].name,
                "shape": [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]}

    return [describe(v) for v in graph.input], [describe(v) for v in graph.output]


def gpugeek_int8(binary, model, workdir):
    """{name: (q, s)} of `gpugeek quantize --to int8 --skip embeddings` on the model's weights."""
    src, out = os.path.join(workdir, "model.safetensors"), os.path.join(workdir, "model.int8.safetensors")
    st.save_file(model.state_dict(), src, {"format": "pt"})
    r = subprocess.run([binary, "quantize", src, "--to", "int8", "--skip", "embeddings", "--out", out],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"export_engine.py: gpugeek quantize --to int8 failed: {r.stderr.strip()}")
    tensors, _ = st.load_file(out)
    return {n: (t.numpy(), tensors[n + st.SCALE_SUFFIX].numpy()) for n, t in tensors.items() if t.dtype == torch.int8}


def max_diff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def main(argv=None):
    p = eval_common.parser(__doc__)
    p.add_argument("--formats", default=",".join(FORMATS), help="comma-separated subset of " + ",".join(FORMATS))
    p.add_argument("--batch", type=int, default=8, help="batch of the checks and timings")
    p.add_argument("--seq", type=int, default=128, help="tokens per row of the checks and timings")
    p.add_argument("--repeats", type=int, default=10, help="timed runs per engine (the median is reported)")
    p.add_argument("--seed", type=int, default=0, help="seed of the token ids")
    p.set_defaults(gpugeek=None)
    args = p.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        sys.exit(f"export_engine.py: --formats {args.formats}: choose from {','.join(FORMATS)}")
    if "onnx-int8" in formats and "onnx" not in formats:
        formats.insert(formats.index("onnx-int8"), "onnx")  # the QDQ graph is an edit of the fp32 one
    model, out_dir = eval_common.trained_model(args, "export_engine.py")
    model.eval()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(args.seed)
    idx = torch.randint(0, model.cfg.vocab_size, (args.batch, args.seq), generator=gen)
    with torch.no_grad():
        eager = model(idx)[0]
    eager_ms = median_ms(lambda: torch.no_grad()(model)(idx), args.repeats)

    report = {"checkpoint": os.path.abspath(args.checkpoint), "batch": args.batch, "seq": args.seq,
              "repeats": args.repeats, "threads": 1, "seed": args.seed, "torch": torch.__version__,
              "eager_ms": eager_ms, "files": {}}
    rows = [("eager PyTorch", "-", None, None, eager_ms)]
    paths = {f: os.path.join(out_dir, FILES[f]) for f in formats}

    if "torchscript" in formats:
        with torch.no_grad():
            traced = torch.jit.trace(Logits(model).eval(), (idx,))
        traced.save(paths["torchscript"])
        loaded = torch.jit.load(paths["torchscript"]).eval()
        with torch.no_grad():
            diff = max_diff(loaded(idx), eager)
        if diff > TS_TOLERANCE:
            sys.exit(f"export_engine.py: TorchScript logits differ from eager by {diff:.3g} > {TS_TOLERANCE}")
        ms = median_ms(lambda: torch.no_grad()(loaded)(idx), args.repeats)
        report["files"]["torchscript"] = {"max_abs_diff_vs_eager": diff, "tolerance": TS_TOLERANCE, "ms": ms,
                                          "runtime": f"torch.jit {torch.__version__}"}
        rows.append(("TorchScript", FILES["torchscript"], diff, None, ms))

    if "onnx" in formats:
        import cv2
        import onnx

        portable = PortableGPT(model).eval()
        with torch.no_grad():
            report["portable_max_abs_diff_vs_eager"] = max_diff(portable(idx), eager)
        example = torch.randint(0, model.cfg.vocab_size, (2, 16), generator=gen)
        with tempfile.TemporaryDirectory() as tmp:
            export_onnx(portable, paths["onnx"], example)
            quantised = {}
            if "onnx-int8" in formats:
                quantised = make_qdq(paths["onnx"], paths["onnx-int8"], linear_weights(model))
                dq = {n: torch.from_numpy(q.astype(np.float32) * s[:, None]) for n, (q, s) in quantised.items()}
                dq_model = build_model(eval_common.CONFIG, seed=0).eval()
                dq_model.load_state_dict({**model.state_dict(), **dq})
                with torch.no_grad():
                    eager_dq = dq_model(idx)[0]
                if args.gpugeek:
                    theirs = gpugeek_int8(args.gpugeek, model, tmp)
                    same = sorted(theirs) == sorted(quantised) and all(
                        np.array_equal(theirs[n][0], q) and np.array_equal(theirs[n][1], s) for n, (q, s) in quantised.items())
                    if not same:
                        sys.exit("export_engine.py: the QDQ weights differ from `gpugeek quantize --to int8`")
                    report["int8_equals_gpugeek_quantize"] = True
            for f in ("onnx", "onnx-int8"):
                if f not in formats:
                    continue
                onnx.checker.check_model(onnx.load(paths[f]))
                graph = onnx.load(paths[f])
                ref = reference_run(graph, idx.numpy())
                entry = {"checker": "passed", "ops": sorted({n.op_type for n in graph.graph.node}),
                         "reference_max_abs_diff_vs_eager": max_diff(ref, eager),
                         "reference_ms": median_ms(lambda: reference_run(graph, idx.numpy()), max(1, args.repeats // 3))}
                if f == "onnx-int8":
                    entry["reference_max_abs_diff_vs_eager_dequantised"] = max_diff(ref, eager_dq)
                    entry["quantised"] = sorted(quantised)
                try:
                    net = opencv_net(paths[f], args.batch, args.seq)
                except cv2.error as e:  # OpenCV 4.6: "Per-channel scales/zeropoints are not supported" (QDQ)
                    entry["runtime"] = None
                    entry["opencv_error"] = [x for x in str(e).splitlines() if "error:" in x][-1].split("error: ")[-1]
                    rows.append((f"numpy ref. {f}", FILES[f], entry["reference_max_abs_diff_vs_eager"],
                                 entry.get("reference_max_abs_diff_vs_eager_dequantised"), entry["reference_ms"]))
                else:
                    logits = opencv_run(net, idx)
                    entry.update(runtime=f"OpenCV DNN {cv2.__version__} (cv2.dnn.readNetFromONNX)",
                                 max_abs_diff_vs_eager=max_diff(logits, eager),
                                 ms=median_ms(lambda: opencv_run(net, idx), args.repeats))
                    if f == "onnx-int8":
                        entry["max_abs_diff_vs_eager_dequantised"] = max_diff(logits, eager_dq)
                    rows.append((f"OpenCV {f}", FILES[f], entry["max_abs_diff_vs_eager"],
                                 entry.get("max_abs_diff_vs_eager_dequantised"), entry["ms"]))
                report["files"][f] = entry

    manifest = {"model": "examples/gpt (GPT-2 architecture, config.json)", "files": {}}
    for f in formats:
        entry = {"format": f, "bytes": os.path.getsize(paths[f]), "sha256": sha256(paths[f])}
        if f == "torchscript":
            entry.update(opset=None, inputs=[{"name": INPUT, "dtype": "int64", "shape": ["batch", "time"]}],
                         outputs=[{"name": OUTPUT, "dtype": "float32", "shape": ["batch", "time", model.cfg.vocab_size]}],
                         dtype_policy="fp32 weights and activations", torch=torch.__version__)
        else:
            inputs, outputs = onnx_io(paths[f])
            entry.update(opset=OPSET, inputs=inputs, outputs=outputs, dtype_policy=(
                "fp32 weights and activations" if f == "onnx" else
                "nn.Linear weights INT8 per output row (gpugeek int8: scale max|row|/127 rounded up to fp32, zero "
                "point 0) through DequantizeLinear(axis=0); embeddings (also the output head), biases, LayerNorm "
                "and activations fp32"))
        manifest["files"][FILES[f]] = entry
        report["files"][f]["bytes"] = entry["bytes"]
    manifest["checks"] = report
    with open(os.path.join(out_dir, "engine.json"), "w") as f:
        json.dump(manifest, f, indent=2)

    print(f"batch {args.batch} x {args.seq} tokens, 1 thread, median of {args.repeats}")
    print(f"{'engine':<22} {'file':<22} {'bytes':>10} {'max|d| eager':>13} {'max|d| dq eager':>16} {'ms':>9}")
    for name, path, diff, diff_dq, ms in rows:
        size = os.path.getsize(os.path.join(out_dir, path)) if path != "-" else 0
        print(f"{name:<22} {path:<22} {size or '-':>10} {'-' if diff is None else f'{diff:.3g}':>13} "
              f"{'-' if diff_dq is None else f'{diff_dq:.3g}':>16} {ms:>9.1f}")
    if "portable_max_abs_diff_vs_eager" in report:
        print(f"PortableGPT (the function exported to ONNX) vs eager: {report['portable_max_abs_diff_vs_eager']:.3g}")
        for f in ("onnx", "onnx-int8"):
            if f in report["files"]:
                e = report["files"][f]
                print(f"numpy reference evaluator, {f}: max|d| vs eager {e['reference_max_abs_diff_vs_eager']:.3g}"
                      + (f", vs dequantised eager {e['reference_max_abs_diff_vs_eager_dequantised']:.3g}" if f == "onnx-int8" else "")
                      + (f"; OpenCV: {e['opencv_error']}" if "opencv_error" in e else ""))
    if report.get("int8_equals_gpugeek_quantize"):
        print("QDQ int8 weights and scales equal `gpugeek quantize --to int8` bit for bit")


if __name__ == "__main__":
    main()
