"""A GPT-2-style decoder-only language model built from a Hugging Face GPT-2 config.json.

The architecture is GPT-2's (Radford et al. 2019, and Hugging Face's GPT2LMHeadModel): token and
learned position embeddings, n_layer pre-LayerNorm blocks of causal multi-head self-attention and a
GELU MLP (both with biases), a final LayerNorm, and an output head tied to the token embedding. The
parameter count is therefore the one `gpugeek plan` computes from the same file (the tied head counted
once); tests/test_param_count.py checks the two are equal.
"""

import json
import math
import os
import sys
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    """The fields of a GPT-2 config.json that shape the model, under GPT-2's names."""

    vocab_size: int
    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int
    n_inner: int
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    embd_pdrop: float = 0.0
    attn_pdrop: float = 0.0
    resid_pdrop: float = 0.0

    @staticmethod
    def from_json(path, overrides=None):
        """Reads a GPT-2 config.json, with `overrides` (e.g. {"n_embd": 128}, a search's width) replacing
        its fields. Raises ValueError for another model_type, an untied head or n_embd not divisible by
        n_head (the planner refuses the same)."""
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        raw.update(overrides or {})
        if raw.get("model_type") != "gpt2":
            raise ValueError(f"{path}: model_type must be 'gpt2', got {raw.get('model_type')!r}")
        if not raw.get("tie_word_embeddings", True):
            raise ValueError(f"{path}: only a tied output head is supported")
        n_embd = raw["n_embd"]
        if n_embd % raw["n_head"] != 0:
            raise ValueError(f"{path}: n_embd {n_embd} is not a multiple of n_head {raw['n_head']}")
        optional = ("activation_function", "layer_norm_epsilon", "initializer_range", "embd_pdrop",
                    "attn_pdrop", "resid_pdrop")
        return GPTConfig(vocab_size=raw["vocab_size"], n_positions=raw["n_positions"], n_embd=n_embd,
                         n_layer=raw["n_layer"], n_head=raw["n_head"],
                         n_inner=raw.get("n_inner") or 4 * n_embd,  # GPT-2: null means 4 x n_embd
                         **{k: raw[k] for k in optional if raw.get(k) is not None})


def _activation(name):
    if name == "gelu_new":  # GPT-2's tanh approximation
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    raise ValueError(f"activation_function {name!r} is not supported (gelu_new, gelu)")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t attends to positions <= t."""

    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)  # q, k, v in one matmul, as GPT-2
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.attn_pdrop)
        self.resid_drop = nn.Dropout(cfg.resid_pdrop)
        # A plain attribute, not a buffer: DDP broadcasts buffers and gloo cannot broadcast bool tensors.
        # So Module.to() does not move it: forward() moves it to the input's device on first use.
        self.causal_mask = torch.tril(torch.ones(cfg.n_positions, cfg.n_positions, dtype=torch.bool))

    def forward(self, x):
        """x: [batch, time, n_embd] float -> [batch, time, n_embd]."""
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        # [b, t, c] -> [b, heads, t, head_dim]
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if self.causal_mask.device != x.device:
            self.causal_mask = self.causal_mask.to(x.device)
        scores = scores.masked_fill(~self.causal_mask[:t, :t], float("-inf"))
        y = self.attn_drop(F.softmax(scores, dim=-1)) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.c_proj(y))


class Block(nn.Module):
    """x + attn(ln_1(x)), then x + mlp(ln_2(x)): GPT-2's pre-LayerNorm residual block."""

    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.c_fc = nn.Linear(cfg.n_embd, cfg.n_inner)
        self.act = _activation(cfg.activation_function)
        self.mlp_proj = nn.Linear(cfg.n_inner, cfg.n_embd)
        self.mlp_drop = nn.Dropout(cfg.resid_pdrop)

    def forward(self, x):
        """x: [batch, time, n_embd] -> [batch, time, n_embd]."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_drop(self.mlp_proj(self.act(self.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    """The language model: token ids [batch, time] (int64, < vocab_size, time <= n_positions) ->
    logits [batch, time, vocab_size]; with targets [batch, time], also the mean cross-entropy (nats)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.embd_pdrop)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.apply(self._init_weights)
        # GPT-2 scales the residual projections by 1/sqrt(2 x n_layer): two per block add to the stream.
        for name, p in self.named_parameters():
            if name.endswith(("attn.c_proj.weight", "mlp_proj.weight")):
                nn.init.normal_(p, 0.0, cfg.initializer_range / math.sqrt(2 * cfg.n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, self.cfg.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        _, t = idx.shape
        if t > self.cfg.n_positions:
            raise ValueError(f"sequence of {t} tokens exceeds n_positions {self.cfg.n_positions}")
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the head is the token embedding (tied)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


def count_parameters(model):
    """Number of distinct parameters (a shared tensor, such as the tied head, counted once)."""
    return sum(p.numel() for p in model.parameters())  # parameters() already yields each tensor once


def build_model(config_path, seed, overrides=None):
    """The model of config_path (with `overrides` of its fields) with weights drawn from
    torch.manual_seed(seed) (same on every rank)."""
    torch.manual_seed(seed)
    return GPT(GPTConfig.from_json(config_path, overrides))


if __name__ == "__main__":
    # `model.py [CONFIG]`: prints the parameter count of the model of CONFIG (default config.json here).
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "config.json")
    print(f"parameters={count_parameters(build_model(path, 0))}")
