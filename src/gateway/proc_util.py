"""Child processes of the gateway's Python tests (h2_proxy_test.py, tls_test.py): waiting for the line that says where
a process listens, and stopping it (SIGTERM, then SIGKILL)."""

import queue
import re
import signal
import subprocess
import threading
import time


def wait_for_line(proc, pattern, what, timeout=20):
    """The first re.search match of `pattern` in `proc`'s stdout (text mode) within `timeout` seconds; RuntimeError
    naming `what` otherwise. The rest of stdout is drained by a thread, so the process never blocks on it."""
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{what} did not say where it listens within {timeout} s")
        try:
            m = re.search(pattern, lines.get(timeout=left))
        except queue.Empty:
            continue
        if m:
            return m


def stop(proc, grace=10):
    """SIGTERM, `grace` seconds, then SIGKILL; closes its stdout pipe. None is fine."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()
