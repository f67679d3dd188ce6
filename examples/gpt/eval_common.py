"""What quantize_eval.py and watermark_eval.py share: their command line, the trained model they start from,
loading a model from a (possibly quantised) safetensors file, and per-byte perplexity on held-out text."""

import argparse
import math
import os
import sys

import torch

import checkpoint
import data
import safetensors_io as st
from model import build_model

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "config.json")


def parser(doc):
    """An ArgumentParser with --checkpoint, --gpugeek and --out."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--checkpoint", required=True, help="train.py --out folder holding checkpoint.pt")
    p.add_argument("--gpugeek", default=os.path.join(HERE, "..", "..", "build", "gpugeek"), help="gpugeek binary")
    p.add_argument("--out", help="where to write the results (default: --checkpoint)")
    return p


def trained_model(args, program):
    """(model, out_dir): the model of args.checkpoint's checkpoint.pt, and the folder results go to."""
    out = args.out or args.checkpoint
    os.makedirs(out, exist_ok=True)
    state = checkpoint.load(args.checkpoint)
    if state is None:
        sys.exit(f"{program}: --checkpoint {args.checkpoint}: no checkpoint.pt; run train.py --out there first")
    model = build_model(CONFIG, seed=0)
    model.load_state_dict(state["model"])
    return model, out


def load_model(path):
    """The GPT of config.json with the weights of a safetensors file (dequantised when quantised)."""
    tensors, metadata = st.load_file(path)
    m = build_model(CONFIG, seed=0)
    m.load_state_dict(st.dequantize(tensors, metadata))
    return m


def perplexity(model, val, seq_len=64):
    """Per-byte perplexity, exp(mean cross-entropy in nats), over every window of `val`."""
    n = data.num_windows(val, seq_len)
    model.eval()
    with torch.no_grad():
        x, y = data.windows(val, list(range(n)), seq_len)
        return math.exp(model(x, y)[1].item())
