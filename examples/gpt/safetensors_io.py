"""safetensors files read and written with nothing but torch and json, and gpugeek's quantised weights.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N bytes
of JSON ({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}), then the
raw little-endian tensor bytes. Debian 12 ships no safetensors package; this reads the raw layout, so a
file `gpugeek quantize` wrote loads bit for bit (tests/test_safetensors.py checks it).

Quantised files (src/models/quantize.h): metadata "gpugeek.quantization" = {"format": 1, "tensors":
{NAME: {"scheme", "dtype"}}}; NAME holds the integers and NAME.qscale the scales:
  int8          I8 [rows, cols], F32 scales [rows]
  int8-block32  I8 [rows, cols], F16 scales [rows, cols / 32]
  int4-block32  U8 [rows, cols / 2] (q + 8, even element in the low nibble), F16 scales [rows, cols / 32]
dequantize() turns them back into float tensors of the recorded dtype.
"""

import json
import os
import struct

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
QUANT_KEY = "gpugeek.quantization"
SCALE_SUFFIX = ".qscale"
BLOCK = 32


def load_file(path):
    """(tensors, metadata): {name: tensor} in the file's dtypes and shapes, and the "__metadata__" dict."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        raw = bytearray(data[begin:end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(info["shape"])
    return tensors, metadata


def save_file(tensors, path, metadata=None):
    """Writes {name: tensor} (contiguous copies, in name order) as the reference writer does: keys sorted,
    the header padded with spaces to a multiple of 8 bytes."""
    header, chunks, at = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for raw in chunks:
            f.write(raw)
    os.replace(tmp, path)


def _unpack_int4(packed):
    """U8 [rows, cols/2] -> int8 [rows, cols] in -8..7 (even element in the low nibble)."""
    low = (packed & 0x0F).to(torch.int8) - 8
    high = (packed >> 4).to(torch.int8) - 8
    return torch.stack((low, high), dim=-1).reshape(packed.shape[0], -1)


def dequantize(tensors, metadata):
    """{name: float tensor}: the quantised tensors as q * s in their recorded dtype, the rest as they are."""
    info = json.loads(metadata.get(QUANT_KEY, '{"tensors": {}}'))["tensors"]
    out = {}
    for name, t in tensors.items():
        if name.endswith(SCALE_SUFFIX) and name[: -len(SCALE_SUFFIX)] in info:
            continue
        if name not in info:
            out[name] = t
            continue
        scheme, scales = info[name]["scheme"], tensors[name + SCALE_SUFFIX].to(torch.float32)
        q = _unpack_int4(t) if scheme == "int4-block32" else t
        if scheme == "int8":
            w = q.to(torch.float32) * scales[:, None]
        else:
            rows, cols = q.shape
            w = (q.to(torch.float32).reshape(rows, cols // BLOCK, BLOCK) * scales[:, :, None]).reshape(rows, cols)
        out[name] = w.to(DTYPES[info[name]["dtype"]])
    return out
