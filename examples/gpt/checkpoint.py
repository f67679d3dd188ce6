"""Crash-safe checkpoints: a reader sees the previous complete checkpoint or the new complete one.

save() writes to a temporary file in the checkpoint's own folder (same file system, so the rename is
atomic), flushes and fsyncs it, os.replace()s it over the old one, then fsyncs the folder so the
rename itself survives a power loss (rename(2) is atomic but not durable until the directory is synced).
A process killed at any point leaves at most a stray temporary file, which the next save overwrites.
"""

import os
import tempfile

import torch

CHECKPOINT_NAME = "checkpoint.pt"


def checkpoint_path(directory):
    """The one checkpoint file of a run's folder."""
    return os.path.join(directory, CHECKPOINT_NAME)


def save(state, directory):
    """Atomically writes state (a dict of tensors and plain values, as torch.save takes) to
    checkpoint_path(directory); returns that path. Raises OSError if the disk refuses."""
    os.makedirs(directory, exist_ok=True)
    final = checkpoint_path(directory)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


def load(directory):
    """The state saved last in directory, or None when there is none."""
    path = checkpoint_path(directory)
    if not os.path.exists(path):
        return None
    return torch.load(path, map_location="cpu")
