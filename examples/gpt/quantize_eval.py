#!/usr/bin/python3
"""Perplexity of the GPT example before and after `gpugeek quantize`, beside PyTorch's quantize_dynamic.

    quantize_eval.py --checkpoint DIR [--gpugeek build/gpugeek] [--out DIR]

DIR is a train.py --out folder (its checkpoint.pt). The weights are exported to safetensors
(safetensors_io), quantised by `gpugeek quantize --to int8 | int8-block32 | int4-block32 --skip embeddings`
(the token embedding is also the output head), loaded back (dequantised), and evaluated on every held-out
validation window (data.py: the last 5 % of the corpus, never trained on). PyTorch's
torch.ao.quantization.quantize_dynamic (qint8 nn.Linear, engine qnnpack; Debian's torch has no fbgemm)
quantises the same layers for comparison. Perplexity is per byte: exp(mean cross-entropy in nats).
Also times one 1024x1024 linear layer, batch 256, in fp32 against its dynamic-INT8 version on each
quantised engine this torch has (onednn is oneDNN, qnnpack is PyTorch's own kernels).

Prints a table and writes DIR/quantize_eval.json and DIR/quantize_eval.svg (or to --out).
"""

import io
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn

import data
import eval_common
import safetensors_io as st

SCHEMES = ("int8", "int8-block32", "int4-block32")


def state_bytes(model):
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return len(buf.getvalue())


def quantize(binary, src, scheme, workdir):
    out = os.path.join(workdir, f"model.{scheme}.safetensors")
    r = subprocess.run([binary, "quantize", src, "--to", scheme, "--skip", "embeddings", "--out", out, "--json"],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"quantize_eval.py: gpugeek quantize --to {scheme} failed: {r.stderr.strip()}")
    return out, json.loads(r.stdout)


def time_linear(engine, repeats=20):
    """(fp32 seconds, int8 seconds) per forward of Linear(1024, 1024) on a [256, 1024] batch."""
    torch.backends.quantized.engine = engine
    torch.manual_seed(0)
    fp32 = nn.Sequential(nn.Linear(1024, 1024)).eval()
    int8 = torch.ao.quantization.quantize_dynamic(fp32, {nn.Linear}, dtype=torch.qint8)
    x = torch.randn(256, 1024)

    def clock(m):
        with torch.no_grad():
            m(x)
            t = time.perf_counter()
            for _ in range(repeats):
                m(x)
            return (time.perf_counter() - t) / repeats

    return clock(fp32), clock(int8)


def svg(rows, path):
    """Bars of size (MB) and perplexity change (%) per variant."""
    w, bar, gap = 640, 22, 8
    h = 60 + len(rows) * (bar + gap)
    big = max(r["bytes"] for r in rows)
    worst = max(abs(r["ppl_change_pct"]) for r in rows) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           '<text x="10" y="20" font-weight="bold">GPT example: weights size and perplexity change per variant</text>',
           '<text x="200" y="42">size (MB)</text><text x="440" y="42">perplexity change (%)</text>']
    for i, r in enumerate(rows):
        y = 52 + i * (bar + gap)
        sw = 200 * r["bytes"] / big
        pw = 160 * abs(r["ppl_change_pct"]) / worst
        out.append(f'<text x="10" y="{y + 15}">{r["variant"]}</text>')
        out.append(f'<rect x="200" y="{y}" width="{sw:.1f}" height="{bar}" fill="#4e79a7"/>')
        out.append(f'<text x="{204 + sw:.1f}" y="{y + 15}">{r["bytes"] / 1e6:.2f}</text>')
        out.append(f'<rect x="440" y="{y}" width="{pw:.1f}" height="{bar}" fill="#e15759"/>')
        out.append(f'<text x="{444 + pw:.1f}" y="{y + 15}">{r["ppl_change_pct"]:+.2f}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv=None):
    args = eval_common.parser(__doc__).parse_args(argv)
    model, out_dir = eval_common.trained_model(args, "quantize_eval.py")
    _, val = data.split_corpus(data.load_corpus())

    src = os.path.join(out_dir, "model.safetensors")
    st.save_file(model.state_dict(), src, {"format": "pt"})
    base = eval_common.perplexity(model, val)
    rows = [{"variant": "fp32", "bytes": os.path.getsize(src), "ppl": base}]
    for scheme in SCHEMES:
        path, report = quantize(args.gpugeek, src, scheme, out_dir)
        q = eval_common.load_model(path)
        rows.append({"variant": f"gpugeek {scheme}", "bytes": os.path.getsize(path), "ppl": eval_common.perplexity(q, val),
                     "quantised_reduction": 1 - report["quantised_bytes_after"] / report["quantised_bytes_before"]})
    torch.backends.quantized.engine = "qnnpack"
    dyn = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    rows.append({"variant": "torch quantize_dynamic", "bytes": state_bytes(dyn), "ppl": eval_common.perplexity(dyn, val)})
    rows[0]["bytes_torch_save"] = state_bytes(model)
    for r in rows:
        r["ppl_change_pct"] = 100 * (r["ppl"] / base - 1)

    speed = {}
    for engine in ("onednn", "qnnpack"):
        if engine in torch.backends.quantized.supported_engines:
            f, i = time_linear(engine)
            speed[engine] = {"fp32_ms": 1e3 * f, "int8_ms": 1e3 * i, "speedup": f / i}

    print(f"{'variant':<26} {'bytes':>10} {'perplexity':>11} {'change':>8}")
    for r in rows:
        print(f"{r['variant']:<26} {r['bytes']:>10} {r['ppl']:>11.4f} {r['ppl_change_pct']:>+7.2f}%")
    print("quantize_dynamic's size is its torch.save state dict; fp32's as torch.save:", rows[0]["bytes_torch_save"])
    for engine, s in speed.items():
        print(f"Linear 1024x1024, batch 256, {engine}: fp32 {s['fp32_ms']:.2f} ms, dynamic int8 {s['int8_ms']:.2f} ms "
              f"({s['speedup']:.2f}x), {torch.get_num_threads()} thread(s)")
    with open(os.path.join(out_dir, "quantize_eval.json"), "w") as f:
        json.dump({"rows": rows, "linear_speed": speed, "threads": torch.get_num_threads()}, f, indent=2)
    svg(rows, os.path.join(out_dir, "quantize_eval.svg"))


if __name__ == "__main__":
    main()
