#pragma once
// The chaos test's workload (chaos_test.cc): a training loop stand-in that follows the checkpoint
// contract (docs/checkpointing.md) and records what it does. Python 3, standard library only, with
// gpugeek_checkpoint.py (examples/gpt) beside it.
//
// It runs STEPS steps of STEP_SECONDS each. Rank 0 writes the step to $GPUGEEK_CHECKPOINT_DIR/step every
// CKPT_EVERY steps and on SIGTERM (write, fsync, rename: durable before reported), then reports it to
// its agent (gpugeek_checkpoint.report). Every rank starts from the step in that file (0 without one);
// rank 0 reports that step again (docs/checkpointing.md: the report of the run that wrote it may be lost).
// On SIGTERM it checkpoints (rank 0) and exits 0 within the grace, as examples/gpt/train.py does.
//
// Two files get one line per event (one O_APPEND write each, so concurrent writers never interleave):
//   PROBE_FILE     the fencing probe's lines (fencing_probe.h: start, alive every 100 ms, stop), so
//                  FindFencingViolations proves no member ran twice at once and no GPU was shared;
//   PROGRESS_FILE  `resume JOB RANK RESTARTS STEP`   the step a run starts from,
//                  `step JOB RANK RESTARTS STEP`     each step completed,
//                  `ckpt JOB RANK RESTARTS STEP`     a checkpoint written (before it is reported).

namespace gpugeek::chaos {

inline constexpr const char* kWorkloadScript = R"PY(import os, signal, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpugeek_checkpoint
probe = os.open(os.environ["PROBE_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
progress = os.open(os.environ["PROGRESS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
job = os.environ.get("GPUGEEK_JOB_ID", "-")
rank = os.environ.get("GPUGEEK_NODE_RANK", "-")
restarts = os.environ.get("GPUGEEK_RESTART_COUNT", "-")
node = os.path.basename(os.path.dirname(os.path.dirname(os.getcwd())))
gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "") or "-"
def emit(kind):
    os.write(probe, ("%s %s %s %s %s %s %d %d\n" % (kind, job, rank, restarts, node, gpus, time.monotonic_ns(), os.getpid())).encode())
def note(kind, step):
    os.write(progress, ("%s %s %s %s %d\n" % (kind, job, rank, restarts, step)).encode())
stop = gpugeek_checkpoint.StopRequest()
emit("start")
ckdir = gpugeek_checkpoint.checkpoint_dir()
path = os.path.join(ckdir, "step")
def save(step):
    os.makedirs(ckdir, exist_ok=True)
    tmp = "%s.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(str(step))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    note("ckpt", step)
    gpugeek_checkpoint.report(step)
try:
    with open(path) as f:
        step = int(f.read())
except FileNotFoundError:
    step = 0
note("resume", step)
if rank == "0" and step > 0:
    gpugeek_checkpoint.report(step)  # what it resumes from is complete: its writer's report may be lost
steps = int(os.environ["STEPS"])
slices = max(1, round(float(os.environ["STEP_SECONDS"]) / 0.1))
every = int(os.environ["CKPT_EVERY"])
while step < steps:
    for _ in range(slices):
        time.sleep(0.1)
        emit("alive")
        if stop.requested:
            break
    if stop.requested:
        if rank == "0":
            save(step)  # just in time: the last completed step
        break
    step += 1
    note("step", step)
    if rank == "0" and (step % every == 0 or step == steps):
        save(step)
emit("stop")
sys.exit(0)
)PY";

}  // namespace gpugeek::chaos
