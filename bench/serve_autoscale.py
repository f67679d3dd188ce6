"""Autoscaling of a served model, end to end: gpugeek up's gateway, deployment controller and agent with
bench/serve_autoscale.yaml (examples/gpt/serve.py replicas, seeded weights), driven by real HTTP clients. Measures:

  1. burst: 1 client, then 50 at once: seconds from the burst to the first scale-up decision (the service's desired
     replicas rising) and to the new replicas being READY; the panic window is 10 % of the spec's stable window;
  2. idle: seconds from the last request to zero replicas (the spec's stable window + scale_to_zero_grace);
  3. cold start, CYCLES times: at zero replicas, one request's latency (held in the gateway's activator while a
     replica starts) and whether it succeeded; p50 / p99.

Prints a table and the replicas-over-time chart on stderr, one JSON line on stdout. Run by bench/serve_autoscale.sh,
which starts `gpugeek up` and deploys the service:

    /usr/bin/python3 bench/serve_autoscale.py --gpugeek build/gpugeek --server URL --gateway URL [--cycles 20]
"""

import argparse
import functools
import json
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def cli(args, gpugeek, server):
    out = subprocess.run([gpugeek, *args, "--server", server, "--json"], check=True, capture_output=True, text=True,
                         timeout=30)
    return json.loads(out.stdout)


def service_state(a):
    s = next((x for x in cli(["services"], a.gpugeek, a.server) if x["name"] == a.service), None)
    if s is None:
        raise SystemExit(f"service {a.service} is not deployed")
    return s


def ready_replicas(a):
    return sum(1 for r in cli(["replicas", a.service], a.gpugeek, a.server) if r["state"] == "READY")


def alive_replicas(a):
    return sum(1 for r in cli(["replicas", a.service], a.gpugeek, a.server) if r["state"] != "ENDED")


def routed_replicas(a):
    routes = cli(["endpoints"], a.gpugeek, a.server)["routes"]
    return sum(len(v["replicas"]) for r in routes if r["service"] == a.service for v in r["versions"])


def predict(a, user, timeout=120):
    req = urllib.request.Request(a.gateway + "/predict", data=json.dumps({"prompt": "The ", "max_tokens": 8}).encode(),
                                 headers={"Content-Type": "application/json", "X-User": user, "Host": a.service})
    with urllib.request.urlopen(req, timeout=timeout, context=tls_context(a.cacert)) as r:
        r.read()
        return r.status


def wait_for(what, predicate, timeout, step=0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(step)
    raise SystemExit(f"serve_autoscale: {what} did not happen within {timeout} s")


def burst(a):
    """1 client for `quiet` s, then 50; samples (t, desired, ready) every 0.5 s until the burst ends."""
    stop = threading.Event()
    clients = []
    errors = []
    answered = [0]
    lock = threading.Lock()

    def client(i):
        while not stop.is_set():
            try:
                predict(a, f"user-{i}")
                with lock:
                    answered[0] += 1
            except Exception as e:  # noqa: BLE001 - counted
                with lock:
                    errors.append(repr(e))

    def start(n):
        for i in range(len(clients), len(clients) + n):
            t = threading.Thread(target=client, args=(i,), daemon=True)
            t.start()
            clients.append(t)

    samples = []
    t0 = time.monotonic()
    start(1)
    burst_at = None
    first_decision = first_ready = None
    base_desired = service_state(a)["desired"]
    base_ready = ready_replicas(a)
    while time.monotonic() - t0 < a.quiet + a.burst_seconds:
        now = time.monotonic() - t0
        if burst_at is None and now >= a.quiet:
            start(a.clients - 1)
            burst_at = now
        s = service_state(a)
        ready = ready_replicas(a)
        samples.append((now, s["desired"], ready))
        if burst_at is not None:
            if first_decision is None and s["desired"] > base_desired:
                first_decision = now - burst_at
            if first_ready is None and ready > base_ready:
                first_ready = now - burst_at
        time.sleep(0.5)
    stop.set()
    for t in clients:
        t.join(timeout=130)
    last_request = time.monotonic()
    return {"samples": samples, "decision_s": first_decision, "ready_s": first_ready, "answered": answered[0],
            "errors": len(errors), "last_request": last_request}


def chart(samples, width=60, height=8):
    """Desired (D) and ready (R) replicas over time, as text."""
    if not samples:
        return ""
    top = max(max(d, r) for _, d, r in samples) or 1
    end = samples[-1][0] or 1
    grid = [[" "] * width for _ in range(height + 1)]
    for t, d, r in samples:
        x = min(width - 1, int(t / end * (width - 1)))
        grid[height - round(d / top * height)][x] = "D"
        yr = height - round(r / top * height)
        grid[yr][x] = "*" if grid[yr][x] == "D" else "R"
    lines = [f"{top * (height - i) / height:4.1f} |" + "".join(row) for i, row in enumerate(grid)]
    lines.append("     +" + "-" * width)
    lines.append(f"      0 s{' ' * (width - 12)}{end:5.1f} s   D desired, R ready, * both")
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def tls_context(cacert):
    """One TLS client context for every request (None: the system's CAs, or plain http)."""
    return ssl.create_default_context(cafile=cacert) if cacert else None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpugeek", required=True)
    p.add_argument("--server", required=True)
    p.add_argument("--gateway", required=True)
    p.add_argument("--cacert", default=None, help="the CA the gateway's certificate chains to (https)")
    p.add_argument("--service", default="gpt")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--quiet", type=float, default=6.0)
    p.add_argument("--burst-seconds", type=float, default=20.0)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--stable-window", type=float, default=20.0, help="the spec's (for the panic window's size)")
    a = p.parse_args()

    # The service may have scaled to zero already (no load since it was deployed): the first request brings it back.
    t = time.monotonic()
    for attempt in range(20):  # the gateway reads the endpoints each second: the new service is routed within one
        try:
            predict(a, "warm-up", timeout=180)
            break
        except urllib.error.HTTPError as e:
            if e.code != 404 or attempt == 19:
                raise
            time.sleep(0.25)
    print(f"# warm-up request answered in {time.monotonic() - t:.2f} s", file=sys.stderr)
    b = burst(a)
    print(chart(b["samples"]), file=sys.stderr)
    idle_from = b["last_request"]
    zero_at = wait_for("scale to zero", lambda: alive_replicas(a) == 0, 180)
    idle_s = zero_at - idle_from

    cold = []
    failures = 0
    for i in range(a.cycles):
        wait_for("scale to zero", lambda: alive_replicas(a) == 0 and routed_replicas(a) == 0, 180)
        time.sleep(1.5)  # the gateway reads the endpoints each second: it has dropped the last replica too
        t = time.monotonic()
        try:
            ok = predict(a, f"cold-{i}") == 200
        except Exception:  # noqa: BLE001 - counted
            ok = False
        cold.append(time.monotonic() - t)
        failures += 0 if ok else 1
        print(f"# cold start {i + 1}/{a.cycles}: {cold[-1]:.2f} s {'ok' if ok else 'FAILED'}", file=sys.stderr)
    cold_sorted = sorted(cold)
    p50 = statistics.median(cold_sorted) if cold else None
    p99 = cold_sorted[min(len(cold_sorted) - 1, int(round(0.99 * (len(cold_sorted) - 1))))] if cold else None
    panic_window = a.stable_window * 0.10
    rows = [
        ("burst: first scale-up decision", b["decision_s"], f"panic window {panic_window:.1f} s"),
        ("burst: first new replica READY", b["ready_s"], "includes the replica's start"),
        ("idle -> zero replicas", idle_s, f"stable window {a.stable_window:.0f} s + grace"),
        (f"cold start p50 ({a.cycles} cycles)", p50, f"{failures} failed"),
        (f"cold start p99 ({a.cycles} cycles)", p99, ""),
    ]
    for name, value, note in rows:
        print(f"{name:34s} {('-' if value is None else f'{value:7.2f} s'):>10s}  {note}", file=sys.stderr)
    print(json.dumps({"bench": "serve_autoscale", "clients": a.clients, "decision_s": b["decision_s"],
                      "ready_s": b["ready_s"], "burst_answered": b["answered"], "burst_errors": b["errors"],
                      "idle_to_zero_s": idle_s, "cold_start_s": cold, "cold_p50_s": p50, "cold_p99_s": p99,
                      "cold_failures": failures, "panic_window_s": panic_window}))
    if b["decision_s"] is None or failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
