#!/usr/bin/env python3
"""Measures the GPU memory of the training step a `gpugeek plan --json` candidate describes, on a real GPU.

Builds the model of a Hugging Face config.json with random weights (transformers, no download), trains
--steps optimizer steps of random tokens at the plan's micro-batch, sequence length and recompute choice with
the plan's recipe, and prints one JSON object comparing the plan's per-GPU bytes with what CUDA reports:

  full (the planner's mixed-precision recipe, Megatron/DeepSpeed style): bf16 weights and bf16 gradients,
      an fp32 master copy of every parameter and AdamW's two fp32 moments (4 + 8 B/param), stepped one
      parameter at a time as its fp32 gradient is made (so no whole fp32 gradient copy is ever held);
  lora: frozen bf16 base, PEFT LoRA adapters (rank --lora-rank, all linear layers, fp32 as PEFT upcasts
      them) with AdamW;
  amp (--recipe amp, for comparison, not a planner recipe yet): fp32 weights under torch.autocast(bf16)
      with torch.optim.AdamW, the usual Hugging Face Trainer `bf16=True` run;
  pure_bf16 (--recipe pure_bf16, likewise): bf16 weights, gradients and AdamW moments, no master copy
      (torchtune's full fine-tune default).
--recompute none|full overrides the plan's activation recompute (full: Hugging Face gradient checkpointing,
one decoder layer at a time).

Measured terms, bytes:
  max_allocated: torch.cuda.max_memory_allocated() over the run (live tensors at the peak);
  max_reserved: torch.cuda.max_memory_reserved() (what the caching allocator held from CUDA);
  context: device memory in use that the allocator does not hold, read with cudaMemGetInfo after the
      first matrix product (CUDA context, kernels, cuBLAS handles);
  peak_device = max_reserved + context: what nvidia-smi would show at the peak.
Errors are (planned - measured) / measured.

Usage: planned_memory.py --config CONFIG.json --plan PLAN.json [--recipe plan|amp|pure_bf16]
                         [--recompute plan|none|full] [--steps 3]
Needs a CUDA GPU, torch and transformers (and peft for LoRA plans). Exit 2 on bad arguments.
"""

import argparse
import json
import sys
import time

import torch


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="the Hugging Face config.json the plan was made from")
    p.add_argument("--plan", required=True, help="the output of `gpugeek plan --json` for that config")
    p.add_argument("--recipe", choices=("plan", "amp", "pure_bf16", "fp32"), default="plan",
                   help="plan: the plan's own (its recipe.precision: mixed, autocast = amp, bf16 = pure_bf16, fp32)")
    p.add_argument("--recompute", choices=("plan", "none", "full"), default="plan")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps (the peak is the max over them)")
    p.add_argument("--lora-rank", type=int, default=16)
    return p.parse_args(argv)


def build(config_path, dtype):
    """The model of config_path with random weights of dtype, made on the GPU, attention through SDPA."""
    import os
    import shutil
    import tempfile
    from transformers import AutoConfig, AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as d:  # from_pretrained reads DIR/config.json
        shutil.copy(config_path, os.path.join(d, "config.json"))
        cfg = AutoConfig.from_pretrained(d)
    with torch.device("cuda"):
        try:
            return AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
        except TypeError:  # transformers 4 names it torch_dtype
            return AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype, attn_implementation="sdpa")


def full_step_factory(model, lr=1e-5):
    """The planner's full fine-tune recipe: bf16 model, fp32 master + AdamW moments, per-parameter step."""
    params = [p for p in model.parameters() if p.requires_grad]
    masters = [p.detach().float() for p in params]
    optims = [torch.optim.AdamW([m], lr=lr, foreach=False) for m in masters]

    def step():
        for p, m, opt in zip(params, masters, optims):
            m.grad = p.grad.float()
            p.grad = None
            opt.step()
            m.grad = None
            p.data.copy_(m)
    return step


def lora_step_factory(model, rank, lr=1e-4):
    from peft import LoraConfig, get_peft_model
    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                                                  target_modules="all-linear"))
    params = [p for p in peft_model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr)

    def step():
        opt.step()
        opt.zero_grad(set_to_none=True)
    return peft_model, step


def plain_step_factory(model, lr=1e-5):
    """torch.optim.AdamW over the model's own parameters: moments in the parameters' dtype."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step():
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("planned_memory.py: no CUDA GPU", file=sys.stderr)
        return 2
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    request, cand = plan["task"], plan["candidates"][0]
    if cand["gpus"] != 1:
        print("planned_memory.py: only one-GPU plans are measured here", file=sys.stderr)
        return 2
    task, seq, micro = request["kind"], request["seq"], cand["micro_batch"]
    plan_recipe = plan.get("recipe", {})
    recipe = args.recipe
    if task == "lora":
        recipe = "plan"  # a bf16 base and fp32 adapters whatever the precision (PEFT)
    elif recipe == "plan":
        precision = plan_recipe.get("precision", "mixed")
        recipe = {"mixed": "plan", "autocast": "amp", "bf16": "pure_bf16", "fp32": "fp32"}[precision]
    if plan_recipe.get("optimizer", "adamw") != "adamw":
        print(f"planned_memory.py: optimizer {plan_recipe['optimizer']} is not measured here", file=sys.stderr)
        return 2

    torch.cuda.init()
    a = torch.ones(256, 256, device="cuda")
    (a @ a).sum().item()  # cuBLAS handle and its kernels loaded
    del a
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    context = total - free - torch.cuda.memory_reserved()

    model = build(args.config, torch.float32 if recipe in ("amp", "fp32") else torch.bfloat16)
    if task == "lora":
        model, step = lora_step_factory(model, args.lora_rank)
    elif recipe in ("amp", "pure_bf16", "fp32"):
        step = plain_step_factory(model)
    elif task == "full" or task == "pretrain":
        step = full_step_factory(model)
    else:
        print(f"planned_memory.py: task {task} is not measured here", file=sys.stderr)
        return 2
    recompute = cand["recompute"] if args.recompute == "plan" else args.recompute
    if recompute == "full":
        model.gradient_checkpointing_enable()
        if task == "lora":
            model.enable_input_require_grads()
    elif recompute != "none":
        print(f"planned_memory.py: recompute {recompute} is not reproduced here", file=sys.stderr)
        return 2
    model.train()
    vocab = model.config.vocab_size
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    losses, oom = [], None
    try:
        for _ in range(args.steps):
            ids = torch.randint(0, vocab, (micro, seq), device="cuda", generator=gen)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=recipe == "amp"):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
            step()
            losses.append(loss.item())
    except torch.cuda.OutOfMemoryError as e:  # a finding too: the plan said it fits
        oom = str(e).split("\n")[0][:300]
    torch.cuda.synchronize()
    seconds = time.monotonic() - start
    allocated, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    planned_total = cand["memory_per_gpu_bytes"]
    planned_runtime = sum(m["bytes"] for m in cand["memory"] if m["label"] == "runtime")
    peak_device = reserved + context
    row = {
        "config": args.config, "task": task, "recipe": args.recipe, "ran": recipe,
        "plan_recipe": plan_recipe, "seq": seq, "micro_batch": micro,
        "recompute": recompute, "plan_recompute": cand["recompute"], "oom": oom, "gpu": torch.cuda.get_device_name(),
        "planned_bytes": planned_total, "planned_terms": {m["label"]: m["bytes"] for m in cand["memory"]},
        "max_allocated": allocated, "max_reserved": reserved, "context": context, "peak_device": peak_device,
        "error_total": (planned_total - peak_device) / peak_device,
        "error_tensors": (planned_total - planned_runtime - allocated) / allocated,
        "error_context": (planned_runtime - context) / context,
        "seconds_per_step": seconds / args.steps, "losses": losses,
    }
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
