"""The workload's side of gpugeek's checkpoint contract (docs/checkpointing.md), Python standard library only.

Copy this one file into a job's workdir (examples/gpt does) and:

    import gpugeek_checkpoint
    stop = gpugeek_checkpoint.StopRequest()   # SIGTERM = the platform asks for a checkpoint now
    ...
    while training:
        ...
        if stop.requested or step % every == 0:
            save(...)                          # durably: write, fsync, rename
            gpugeek_checkpoint.report(step)    # "the checkpoint at `step` is complete"
        if stop.requested:
            break                              # and exit 0 within the job's checkpoint grace

report() posts {"step": N} to the node's agent at $GPUGEEK_AGENT_URL with this member's
$GPUGEEK_MEMBER_TOKEN (POST /v1/checkpoint); the server keeps N as what the job resumes from and shows it
in `gpugeek job ID`. Outside gpugeek (the variables unset) it does nothing and returns False.
restart_count() is $GPUGEEK_RESTART_COUNT (0 on the first run); checkpoint_dir() $GPUGEEK_CHECKPOINT_DIR.
"""

import json
import os
import signal
import sys
import urllib.error
import urllib.request


def restart_count():
    """How many times the platform restarted this job before this run (GPUGEEK_RESTART_COUNT), 0 outside."""
    try:
        return int(os.environ.get("GPUGEEK_RESTART_COUNT", "0"))
    except ValueError:
        return 0


def checkpoint_dir():
    """The job's checkpoint folder (GPUGEEK_CHECKPOINT_DIR), or None when the job set none."""
    return os.environ.get("GPUGEEK_CHECKPOINT_DIR") or None


def report(step, timeout=5.0):
    """Tells the agent the checkpoint at `step` (an int >= 0) is complete. True when the agent took it;
    False outside gpugeek or when the agent refused or could not be reached (the reason goes to stderr:
    a report that fails never stops training; the platform then resumes from the previous one)."""
    url = os.environ.get("GPUGEEK_AGENT_URL")
    token = os.environ.get("GPUGEEK_MEMBER_TOKEN")
    if not url or not token:
        return False
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be an int >= 0, not {step!r}")
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/checkpoint", data=json.dumps({"step": step}).encode(), method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            reply.read()
        return True
    except urllib.error.HTTPError as e:
        print(f"gpugeek_checkpoint: the agent refused step {step}: HTTP {e.code} {e.read()[:300]!r}",
              file=sys.stderr, flush=True)
    except (urllib.error.URLError, OSError) as e:
        print(f"gpugeek_checkpoint: cannot reach the agent at {url}: {e}", file=sys.stderr, flush=True)
    return False


class StopRequest:
    """Catches SIGTERM (what gpugeek sends before a planned stop: a cancel, a drain, a spot reclaim, a
    move; SIGKILL follows after the job's checkpoint grace). `requested` turns True; the workload then
    checkpoints, reports and exits. SIGINT too when `interrupt` is set."""

    def __init__(self, interrupt=False):
        self.requested = False
        self.signal = None
        signal.signal(signal.SIGTERM, self._handle)
        if interrupt:
            signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, _frame):
        self.requested = True
        self.signal = signum
