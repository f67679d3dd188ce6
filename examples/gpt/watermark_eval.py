#!/usr/bin/python3
"""How the GPT example's watermark holds up: marked with `gpugeek model watermark embed`, then quantised to
INT8 and INT4, pruned, and fine-tuned; the mark read back each time with `gpugeek model watermark detect`.

    watermark_eval.py --checkpoint DIR [--gpugeek build/gpugeek] [--out DIR] [--steps 200]

DIR is a train.py --out folder (its checkpoint.pt). The weights are exported to safetensors and one matrix
(the largest, as the CLI picks it) carries a 256-bit mark under a random key. Reported per variant: the bit
error rate (BER), the probability that an unmarked model reads as well (false match), and the per-byte
perplexity on the held-out validation text (data.py). Attacks: `gpugeek quantize` to int8 and int4-block32;
50 % magnitude pruning of the marked matrix (its smallest half set to zero); --steps steps of continued
training (AdamW on the training text, batch 8 x 64 bytes) at train.py's final learning rate (2e-4) and at
its peak (2e-3), and at the peak with Uchida et al.'s regulariser (lambda 0.01: binary cross-entropy of
sigmoid(X w) against the message, X and the message recomputed here from the key as watermark.h defines them,
which also checks gpugeek's key stream from a second implementation). An unmarked model and a wrong key
show what no mark reads like.

Prints a table and writes watermark_eval.json in --out (default: --checkpoint).
"""

import hashlib
import json
import os
import subprocess
import sys

import torch

import data
import eval_common
import safetensors_io as st


def run(binary, *args):
    r = subprocess.run([binary, *args, "--json"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"watermark_eval.py: gpugeek {' '.join(args)} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def key_stream(key, label, row, blocks):
    """The bits gpugeek draws from a key (src/models/watermark.h): SHA-256(key || "gpugeek-watermark/v1/" ||
    label || be64(row) || be64(block)) for each block, bits least significant first, as a uint8 tensor."""
    raw = b"".join(hashlib.sha256(key + b"gpugeek-watermark/v1/" + label + row.to_bytes(8, "big") +
                                  b.to_bytes(8, "big")).digest() for b in range(blocks))
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)[:, None].bitwise_right_shift(torch.arange(8)).bitwise_and(1).flatten()


def mark_projection(key, n, bits=256):
    """(X, b): the +-1 projection [bits, n] and the message [bits] of watermark.h, for the first n <= 2^21
    values of a tensor."""
    blocks = (n + 255) // 256
    x = torch.stack([key_stream(key, b"x", j, blocks)[:n] for j in range(bits)]).float() * 2 - 1
    return x, key_stream(key, b"b", 0, (bits + 255) // 256)[:bits].float()


def uchida_loss(model, tensor, x, b):
    """Uchida et al.'s embedding regulariser: binary cross-entropy of sigmoid(X w) against the message."""
    w = dict(model.named_parameters())[tensor].flatten()[: x.shape[1]]
    return torch.nn.functional.binary_cross_entropy_with_logits(x @ w, b, reduction="sum")


def fine_tune(model, train, steps, lr, seed=7, regulariser=None):
    """`steps` AdamW steps on random training windows, plus lambda x regulariser(model) when given as
    (lambda, function); returns the model."""
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    n = data.num_windows(train, 64)
    model.train()
    for _ in range(steps):
        x, y = data.windows(train, torch.randint(0, n, (8,)).tolist(), 64)
        loss = model(x, y)[1]
        if regulariser is not None:
            loss = loss + regulariser[0] * regulariser[1](model)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def main(argv=None):
    p = eval_common.parser(__doc__)
    p.add_argument("--steps", type=int, default=200, help="fine-tuning steps of the fine-tuning attack")
    args = p.parse_args(argv)
    model, out = eval_common.trained_model(args, "watermark_eval.py")
    train, val = data.split_corpus(data.load_corpus())

    key = os.path.join(out, "mark.key")
    with open(key, "wb") as f:
        f.write(os.urandom(32))
    other_key = os.path.join(out, "other.key")
    with open(other_key, "wb") as f:
        f.write(os.urandom(32))
    plain = os.path.join(out, "model.safetensors")
    st.save_file(model.state_dict(), plain, {"format": "pt"})
    marked = os.path.join(out, "model.marked.safetensors")
    embed = run(args.gpugeek, "model", "watermark", "embed", plain, "--key", key, "--out", marked)
    tensor = embed["tensor"]

    def detect(path, key_file=key):
        return run(args.gpugeek, "model", "watermark", "detect", path, "--key", key_file, "--tensor", tensor)

    rows = []

    def add(variant, path, model_for_ppl, key_file=key):
        r = detect(path, key_file)
        rows.append({"variant": variant, "ber": r["ber"], "errors": r["errors"], "false_match": r["false_match"],
                     "ppl": eval_common.perplexity(model_for_ppl, val)})

    add("unmarked", plain, model)
    add("marked", marked, eval_common.load_model(marked))
    add("marked, wrong key", marked, eval_common.load_model(marked), other_key)
    for scheme in ("int8", "int4-block32"):
        q = os.path.join(out, f"model.marked.{scheme}.safetensors")
        run(args.gpugeek, "quantize", marked, "--to", scheme, "--skip", "embeddings", "--out", q)
        add(f"marked + {scheme}", q, eval_common.load_model(q))
    tensors, metadata = st.load_file(marked)
    w = tensors[tensor].clone()
    w[w.abs() < w.abs().flatten().kthvalue(w.numel() // 2).values] = 0
    tensors[tensor] = w
    pruned = os.path.join(out, "model.marked.pruned.safetensors")
    st.save_file(tensors, pruned, metadata)
    add("marked + 50% pruning", pruned, eval_common.load_model(pruned))
    with open(key, "rb") as f:
        x, b = mark_projection(f.read(), min(tensors[tensor].numel(), 1 << 21))
    marked_w = st.load_file(marked)[0][tensor].flatten()[: x.shape[1]].float()
    if int(((x @ marked_w > 0).float() != b).sum()) != rows[1]["errors"]:
        sys.exit("watermark_eval.py: the key stream recomputed here disagrees with gpugeek's reading")
    for lr in (2e-4, 2e-3):
        tuned = fine_tune(eval_common.load_model(marked), train, args.steps, lr)
        path = os.path.join(out, f"model.marked.tuned-{lr:g}.safetensors")
        st.save_file(tuned.state_dict(), path, {"format": "pt"})
        add(f"marked + {args.steps} steps at lr {lr:g}", path, tuned)
    tuned = fine_tune(eval_common.load_model(marked), train, args.steps, 2e-3,
                      regulariser=(0.01, lambda m: uchida_loss(m, tensor, x, b)))
    path = os.path.join(out, "model.marked.tuned-regularised.safetensors")
    st.save_file(tuned.state_dict(), path, {"format": "pt"})
    add(f"marked + {args.steps} steps at lr 0.002, Uchida regulariser", path, tuned)

    base = rows[0]["ppl"]
    print(f"mark: 256 bits in {tensor}, {100 * embed['relative_change']:.2f}% relative change (L2)")
    print(f"{'variant':<52} {'BER':>7} {'false match':>12} {'perplexity':>11} {'vs unmarked':>12}")
    for r in rows:
        print(f"{r['variant']:<52} {r['ber']:>7.4f} {r['false_match']:>12.3g} {r['ppl']:>11.4f} "
              f"{100 * (r['ppl'] / base - 1):>+11.2f}%")
    with open(os.path.join(out, "watermark_eval.json"), "w") as f:
        json.dump({"tensor": tensor, "relative_change": embed["relative_change"], "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
