#!/usr/bin/python3
"""Trains the GPT of config.json on the Debian licence texts with DistributedDataParallel.

--device auto (the default) trains on the GPU when PyTorch sees one (rank r on GPU LOCAL_RANK, NCCL between
ranks), else on the CPU (gloo); --device cpu or cuda forces one. The arithmetic is float32 on both.

Run one process per rank with the env:// variables set (launch_local.py does that on one machine; a
gpugeek agent's GPUGEEK_* variables are read too, see dist_env.py). Without them it runs as one process.

Rank 0 prints one line per --log-every steps, `step=S loss=L lr=LR tokens_per_s=T` (loss: the mean of the
ranks' batch losses in nats per byte; tokens_per_s: all ranks' tokens per wall second since the previous
line), checkpoints every --ckpt-every steps (checkpoint.py) and at the end, and writes summary.json. Each
checkpoint is reported to gpugeek as complete (gpugeek_checkpoint.py, docs/checkpointing.md). On SIGTERM
(a planned stop: cancel, drain, spot reclaim) every rank stops after the step in flight: a checkpoint at
that step, reported, then exit 0 without evaluating, `stopped step=S on SIGTERM`.
With --eval-every N (a trial of a gpugeek experiment, docs/hpo.md) it also evaluates every N steps, prints
`eval step=S val_loss=V` and reports V at step S (gpugeek_hpo.py); when the experiment's pruner stops the
trial it stops as on SIGTERM. The final validation loss is reported at the last step.
Every rank appends `step epoch position i1 i2 ...` (the windows it trained on at that step) to
samples-rank{R}.txt in --out. On start every rank resumes from --out/checkpoint.pt when there is one.
At the end (not on SIGTERM) rank 0 exports the trained model to --out/model/: model.safetensors (the float32
weights, no optimizer, nothing pickled) and the config.json they fit, a folder `gpugeek model push` takes
and serve.py --model-dir loads (export_model).
Exit status: 0 done; 2 bad arguments, layout or a checkpoint of other arguments in --out.
"""

import argparse
import faulthandler
import json
import math
import os
import random
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import checkpoint
import data
import dataset_version
import dist_env
import gpugeek_checkpoint
import gpugeek_hpo
import safetensors_io
from model import build_model, count_parameters

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("GPUGEEK_CHECKPOINT_DIR"),
                   help="folder for checkpoint.pt, summary.json and the sample logs "
                        "(default $GPUGEEK_CHECKPOINT_DIR)")
    p.add_argument("--config", default=os.path.join(HERE, "config.json"), help="GPT-2 config.json")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps in all")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--seq-len", type=int, default=64, help="tokens (bytes) per sequence")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--lr-schedule", choices=("cosine", "constant"), default="cosine",
                   help="after warm-up: cosine decay to --lr/10 at --steps, or constant")
    p.add_argument("--warmup-steps", type=int, default=10, help="linear warm-up from 0 to --lr")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay of matrices only")
    p.add_argument("--grad-clip", type=float, default=1.0, help="max global gradient L2 norm")
    p.add_argument("--ckpt-every", type=int, default=50, help="checkpoint every this many steps")
    p.add_argument("--log-every", type=int, default=10, help="print a line every this many steps")
    p.add_argument("--seed", type=int, default=1234, help="seeds weights, data order and RNGs")
    p.add_argument("--max-minutes", type=float, default=0.0,
                   help="stop (checkpoint, summary, exit 0) after this much wall time; 0: no limit")
    p.add_argument("--eval-windows", type=int, default=64, help="validation windows at the end")
    p.add_argument("--eval-every", type=int, default=0,
                   help="also evaluate every this many steps and report the validation loss to a gpugeek "
                        "experiment (gpugeek_hpo.report; a pruned trial stops); 0: only at the end")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where to train: auto is cuda when a GPU is visible, else cpu")
    p.add_argument("--n-embd", type=int, default=0, help="the model's width instead of config.json's n_embd")
    p.add_argument("--dataset", default=None,
                   help="NAME@REV: read the licence texts from this dataset version in a gpugeek store "
                        "(`gpugeek data push`; REV a branch, tag or commit digest) instead of "
                        "/usr/share/common-licenses")
    p.add_argument("--data-store", default=os.environ.get("GPUGEEK_DATA_STORE"),
                   help="the store folder for --dataset (default $GPUGEEK_DATA_STORE)")
    p.add_argument("--data-dir", default=os.environ.get("GPUGEEK_DATASET_DIR") or data.LICENCE_DIR,
                   help="folder holding the licence texts: default $GPUGEEK_DATASET_DIR (the checkout of the "
                        "job's `dataset:` version the node made), else /usr/share/common-licenses")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no GPU (use --device cpu or auto)")
    if args.dataset is not None:
        name, _, rev = args.dataset.partition("@")
        if not args.data_store:
            p.error("--dataset needs --data-store (or $GPUGEEK_DATA_STORE)")
        try:
            args.version = dataset_version.DatasetVersion(args.data_store, name, rev or "main")
        except dataset_version.DatasetVersionError as e:
            p.error(f"--dataset {args.dataset}: {e}")
    else:
        args.version = None
    if not args.out:
        p.error("--out is required (or set GPUGEEK_CHECKPOINT_DIR)")
    for name in ("steps", "batch_size", "seq_len", "ckpt_every", "log_every"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("eval_every", "n_embd", "warmup_steps"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must not be negative")
    return args


def learning_rate(args, step):
    """The learning rate of optimizer step `step` (0-based)."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    if args.lr_schedule == "constant":
        return args.lr
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps))
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def make_optimizer(model, args):
    """AdamW; weight decay on matrices (>= 2 dims), none on biases and LayerNorm gains (GPT-2 / nanoGPT)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))


def usage_error(message):
    """Exits with status 2, which launch_local.py does not retry: the same arguments would fail again."""
    print(f"train.py: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def pick_device(args, env):
    """The torch.device this rank trains on and its process-group backend (NCCL on a GPU, else gloo)."""
    if args.device == "cpu" or (args.device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu"), "gloo"
    device = torch.device("cuda", env.local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device, "nccl"


def all_reduce_sum(values, device=torch.device("cpu")):
    """Element-wise sum over ranks of a list of floats (a tensor on `device`, as the backend needs)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def rng_states():
    """This process's random generator states (torch CPU, Python), as a checkpoint keeps them per rank."""
    return {"torch": torch.get_rng_state(), "python": random.getstate()}


def save_checkpoint(args, env, model, optimizer, progress):
    """Collective: gathers every rank's RNG state, then rank 0 writes the checkpoint atomically."""
    states = [None] * env.world_size
    dist.all_gather_object(states, rng_states())
    if env.rank == 0:
        state = dict(progress, model=model.module.state_dict(), optimizer=optimizer.state_dict(),
                     rng=states, world_size=env.world_size, batch_size=args.batch_size,
                     seq_len=args.seq_len, seed=args.seed)
        checkpoint.save(state, args.out)
        print(f"checkpoint step={progress['step']} epoch={progress['epoch']} "
              f"position={progress['position']}", flush=True)
        gpugeek_checkpoint.report(progress["step"])


def resume(args, env, model, optimizer, device):
    """The progress dict of the checkpoint in args.out after loading it into model and optimizer (and
    this rank's RNG), or a fresh one. Every rank loads the same checkpoint: a barrier orders the loads
    after any earlier write, and the ranks' steps are compared."""
    dist.barrier()
    state = checkpoint.load(args.out)
    progress = {"step": 0, "epoch": 0, "position": 0, "tokens_seen": 0, "first_loss": None, "last_loss": None}
    if state is not None:
        for key in ("batch_size", "seq_len", "seed"):
            if state[key] != getattr(args, key):
                usage_error(f"checkpoint in {args.out} has {key}={state[key]}, not {getattr(args, key)}: "
                            "use a new --out")
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if state["world_size"] == env.world_size:
            torch.set_rng_state(state["rng"][env.rank]["torch"])
            random.setstate(state["rng"][env.rank]["python"])
        progress = {k: state[k] for k in progress}
    lo, hi = all_reduce_sum([-progress["step"], progress["step"]], device)
    if -lo != hi:
        raise RuntimeError(f"ranks loaded different checkpoints (steps {-lo:.0f}..{hi:.0f})")
    if state is not None and env.rank == 0:
        print(f"resumed step={progress['step']} epoch={progress['epoch']} "
              f"position={progress['position']} restart={env.restart_count}", flush=True)
        # What this run resumes from is a complete checkpoint too: the report of the run that wrote it
        # may never have reached the server (its node lost contact right after), so say it again.
        gpugeek_checkpoint.report(progress["step"])
    return progress


def export_model(args, model):
    """Writes the trained model as a model folder, --out/model/: model.safetensors ({name: float32 tensor} as
    model.state_dict() names them, metadata {"format": "pt"}) and config.json (--config with --n-embd applied,
    so the file fits the weights). Each file goes to a temporary name and is renamed into place: a reader sees
    the previous file or the new one, whole. Returns the folder."""
    folder = os.path.join(args.out, "model")
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(model.state_dict(), os.path.join(folder, "model.safetensors"), {"format": "pt"})
    with open(args.config, encoding="utf-8") as f:
        config = json.load(f)
    if args.n_embd:
        config["n_embd"] = args.n_embd
    tmp = os.path.join(folder, "config.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    os.replace(tmp, os.path.join(folder, "config.json"))
    return folder


def evaluate(model, val_tokens, args, env, device):
    """Mean validation loss (nats per byte) over the first --eval-windows windows, shared by the ranks."""
    n = min(args.eval_windows, data.num_windows(val_tokens, args.seq_len))
    mine = list(range(env.rank, n, env.world_size))
    total = 0.0
    model.eval()
    with torch.no_grad():
        if mine:
            x, y = (t.to(device) for t in data.windows(val_tokens, mine, args.seq_len))
            total = model.module(x, y)[1].item() * len(mine)
    model.train()
    total, count = all_reduce_sum([total, len(mine)], device)
    return total / count


def train(args, env, stop_request):
    if "OMP_NUM_THREADS" not in os.environ:  # launch_local.py sets it; else share the CPUs between ranks
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // env.local_world_size))
    # env:// reads these four; dist_env may have filled them in from GPUGEEK_* variables.
    os.environ.update(MASTER_ADDR=env.master_addr, MASTER_PORT=str(env.master_port), RANK=str(env.rank),
                      WORLD_SIZE=str(env.world_size))
    device, backend = pick_device(args, env)
    dist.init_process_group(backend, init_method="env://", timeout=timedelta(minutes=5))
    model = build_model(args.config, args.seed, {"n_embd": args.n_embd} if args.n_embd else None)
    n_params = count_parameters(model)
    if args.seq_len > model.cfg.n_positions:
        usage_error(f"--seq-len {args.seq_len} exceeds n_positions {model.cfg.n_positions}")
    model = model.to(device)  # after the seeded build: the same initial weights on every device
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = make_optimizer(model, args)
    train_tokens, val_tokens = data.split_corpus(data.load_corpus(args.data_dir, version=args.version))
    sampler = data.ShardedSampler(data.num_windows(train_tokens, args.seq_len), args.batch_size,
                                  env.world_size, env.rank, args.seed)
    progress = resume(args, env, model, optimizer, device)
    if env.rank == 0:
        where = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "cpu"
        print(f"device={where} backend={backend}", flush=True)
        print(f"params={n_params} world_size={env.world_size} train_bytes={len(train_tokens)} "
              f"val_bytes={len(val_tokens)} windows={sampler.n} steps_per_epoch={sampler.steps_per_epoch()}",
              flush=True)
        if args.version is not None:
            print(f"dataset={args.version.dataset} commit={args.version.commit}", flush=True)
        elif os.environ.get("GPUGEEK_DATASET"):  # NAME@COMMIT of the job's `dataset:`, checked out by the node
            print(f"dataset={os.environ['GPUGEEK_DATASET']} dir={args.data_dir}", flush=True)
    # One write(2) per line on an O_APPEND descriptor: a rank killed mid-run leaves whole lines only.
    samples_fd = os.open(os.path.join(args.out, f"samples-rank{env.rank}.txt"),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    tokens_per_step = args.batch_size * args.seq_len * env.world_size
    start = last_log = time.monotonic()
    last_log_step = progress["step"]
    while progress["step"] < args.steps:
        step, epoch, position = progress["step"], progress["epoch"], progress["position"]
        indices = sampler.batch(epoch, position)
        x, y = (t.to(device, non_blocking=True) for t in data.windows(train_tokens, indices, args.seq_len))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(args, step)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        os.write(samples_fd, f"{step + 1} {epoch} {position} {' '.join(map(str, indices))}\n".encode())
        out_of_time = env.rank == 0 and args.max_minutes > 0 and time.monotonic() - start > args.max_minutes * 60
        # Any rank's SIGTERM stops them all after this step (the platform signals every rank).
        loss_sum, stop, signalled = all_reduce_sum([loss.item(), float(out_of_time), float(stop_request.requested)],
                                                   device)
        stop = stop or signalled
        loss_value = progress["last_loss"] = loss_sum / env.world_size
        progress["epoch"], progress["position"] = sampler.advance(epoch, position)
        progress["step"] = step + 1
        progress["tokens_seen"] += tokens_per_step
        if progress["first_loss"] is None:
            progress["first_loss"] = loss_value
        if env.rank == 0 and (progress["step"] % args.log_every == 0 or progress["step"] == 1):
            now = time.monotonic()
            rate = (progress["step"] - last_log_step) * tokens_per_step / max(now - last_log, 1e-9)
            print(f"step={progress['step']} loss={loss_value:.4f} lr={learning_rate(args, step):.6g} "
                  f"tokens_per_s={rate:.0f}", flush=True)
            last_log, last_log_step = now, progress["step"]
        if args.eval_every and progress["step"] % args.eval_every == 0 and progress["step"] < args.steps:
            # A trial of an experiment: its pruner may stop it on this value (then SIGTERM follows; the
            # next step's all-reduce sees it on every rank).
            val_loss = evaluate(model, val_tokens, args, env, device)
            if env.rank == 0:
                print(f"eval step={progress['step']} val_loss={val_loss:.4f}", flush=True)
                if gpugeek_hpo.report(progress["step"], val_loss):
                    print(f"pruned at step={progress['step']}", flush=True)
                    stop_request.requested = True
        if stop or progress["step"] == args.steps or progress["step"] % args.ckpt_every == 0:
            save_checkpoint(args, env, model, optimizer, progress)
        if signalled:
            os.close(samples_fd)
            if env.rank == 0:
                print(f"stopped step={progress['step']} on SIGTERM", flush=True)
            del model, optimizer
            dist.destroy_process_group()
            return
        if stop:
            break
    os.close(samples_fd)
    val_loss = evaluate(model, val_tokens, args, env, device)
    if env.rank == 0:
        summary = {"first_loss": progress["first_loss"], "last_loss": progress["last_loss"], "val_loss": val_loss,
                   "steps": progress["step"], "world_size": env.world_size, "parameters": n_params,
                   "tokens_seen": progress["tokens_seen"],
                   "dataset_commit": (args.version.commit if args.version is not None
                                      else os.environ.get("GPUGEEK_DATASET", "@").partition("@")[2] or None),
                   "wall_seconds_this_attempt": round(time.monotonic() - start, 1)}
        with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(f"done steps={summary['steps']} last_loss={summary['last_loss']:.4f} val_loss={val_loss:.4f}",
              flush=True)
        print(f"exported model={export_model(args, model.module)}", flush=True)
        if args.eval_every:
            gpugeek_hpo.report(progress["step"], val_loss)  # the trial's final value
    dist.barrier()
    # DDP's reducer holds the process group: freed after destroy_process_group(), its gloo threads
    # could wait forever at interpreter exit (seen 1 run in 4 with torch 1.13), so free it first.
    del model, optimizer
    dist.destroy_process_group()


def main(argv=None):
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints every thread's Python stack
    stop_request = gpugeek_checkpoint.StopRequest()  # before anything slow: a SIGTERM is never lost
    args = parse_args(argv)
    try:
        env = dist_env.resolve()
    except dist_env.LayoutError as e:
        usage_error(str(e))
    os.makedirs(args.out, exist_ok=True)
    train(args, env, stop_request)
    return 0


if __name__ == "__main__":
    sys.exit(main())
