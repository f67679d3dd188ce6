"""The trial's side of a gpugeek hyper-parameter experiment (docs/hpo.md), Python standard library only.

Copy this one file into the trial's workdir (examples/gpt does) and:

    import gpugeek_hpo
    params = gpugeek_hpo.params()            # {"lr": 0.003, "width": 64, ...}, {} outside an experiment
    for epoch in range(1, epochs + 1):
        train_one_epoch(...)
        if gpugeek_hpo.report(epoch, validation_loss()):
            break                            # pruned: the platform stops this trial (checkpoint, exit 0)

report(step, value) posts {"step": N, "value": V} to the node's agent at $GPUGEEK_AGENT_URL with this
member's $GPUGEEK_MEMBER_TOKEN (POST /v1/report); the agent holds the value until the server has stored
it, and the experiment's pruner decides on it. It returns True when the server has asked this trial to
stop (it was pruned; SIGTERM follows). The trial's final value is the last one it reported before it
exited 0. Outside gpugeek (the variables unset) report() only prints the value and returns False.
"""

import json
import math
import os
import sys
import urllib.error
import urllib.request


def params():
    """The trial's point (GPUGEEK_PARAMS) as a dict; {} outside an experiment."""
    text = os.environ.get("GPUGEEK_PARAMS")
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"GPUGEEK_PARAMS is not a JSON object: {text[:200]!r}")
    return value


def trial_id():
    """The trial's number in its experiment (GPUGEEK_TRIAL_ID), None outside an experiment."""
    text = os.environ.get("GPUGEEK_TRIAL_ID")
    return int(text) if text else None


def experiment():
    """The experiment's id (GPUGEEK_EXPERIMENT, e.g. "x-000003"), None outside an experiment."""
    return os.environ.get("GPUGEEK_EXPERIMENT") or None


def report(step, value, timeout=5.0):
    """Reports the objective's `value` (a finite number) at `step` (an int >= 0). True when the server has
    asked this trial to stop; False otherwise, outside gpugeek, or when the agent could not be reached (the
    reason goes to stderr: a report that fails never stops training)."""
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be an int >= 0, not {step!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"value must be finite, not {value!r}")
    url = os.environ.get("GPUGEEK_AGENT_URL")
    token = os.environ.get("GPUGEEK_MEMBER_TOKEN")
    if not url or not token:
        print(f"gpugeek_hpo: step {step}: {value:.6g} (not in a gpugeek job: not reported)", flush=True)
        return False
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/report", data=json.dumps({"step": step, "value": value}).encode(), method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return bool(json.loads(reply.read() or b"{}").get("should_stop", False))
    except urllib.error.HTTPError as e:
        print(f"gpugeek_hpo: the agent refused step {step}: HTTP {e.code} {e.read()[:300]!r}",
              file=sys.stderr, flush=True)
    except (urllib.error.URLError, OSError, ValueError) as e:
        print(f"gpugeek_hpo: cannot reach the agent at {url}: {e}", file=sys.stderr, flush=True)
    return False
