"""The training text and its sharding across data-parallel ranks.

Text: the licence texts every Debian system ships under /usr/share/common-licenses (base-files),
concatenated in a fixed order and read as bytes, so the tokenizer is the identity on 0..255 (vocab 256)
and no tokenizer file is needed. The last 5 % is held out for validation.

Samples: the token stream cut into non-overlapping windows of seq_len + 1 bytes (inputs and their
next-byte targets). Each epoch has a permutation of the window indices drawn from (seed, epoch); global
batch k is permutation[k*B*W : (k+1)*B*W] and rank r takes every W-th entry of it starting at r. That is
exactly what torch's DistributedSampler(shuffle=True, drop_last=True) followed by a batch-B DataLoader
gives rank r, and it makes the resume position a single number: the index into the epoch's permutation
at which the next global batch starts.
"""

import os

import torch

LICENCE_DIR = "/usr/share/common-licenses"
# base-files ships these in every Debian release since 9; a fixed list keeps the corpus the same on
# every machine (a directory listing could pick up files other packages add).
LICENCE_FILES = ("Apache-2.0", "Artistic", "BSD", "GFDL-1.2", "GFDL-1.3", "GPL-1", "GPL-2", "GPL-3",
                 "LGPL-2", "LGPL-2.1", "LGPL-3", "MPL-1.1", "MPL-2.0")
VALIDATION_FRACTION = 0.05


def load_corpus(directory=LICENCE_DIR, names=LICENCE_FILES, version=None):
    """The concatenated files as a 1-D uint8 tensor of bytes (one token per byte): read from `directory`,
    or, given `version` (a dataset_version.DatasetVersion), from that dataset version in a gpugeek store
    (every byte checked against its digest)."""
    parts = []
    for name in sorted(names):
        if version is not None:
            if name not in version.files:
                raise ValueError(f"dataset {version.dataset} at {version.commit[:12]} has no file {name}")
            parts.append(version.read(name))
            continue
        with open(os.path.join(directory, name), "rb") as f:
            parts.append(f.read())
    return torch.frombuffer(bytearray(b"".join(parts)), dtype=torch.uint8)


def split_corpus(tokens):
    """(train, validation): the first 95 % and the last 5 % of tokens."""
    n_val = int(len(tokens) * VALIDATION_FRACTION)
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val:]


def num_windows(tokens, seq_len):
    """How many non-overlapping windows of seq_len + 1 tokens fit in tokens."""
    return (len(tokens) - 1) // seq_len


def windows(tokens, indices, seq_len):
    """Inputs and targets of the windows with these indices: two int64 tensors [len(indices), seq_len];
    window i is tokens[i*seq_len : i*seq_len + seq_len + 1] split into x = [:-1], y = [1:]."""
    starts = torch.as_tensor(indices, dtype=torch.int64) * seq_len
    rows = starts[:, None] + torch.arange(seq_len + 1)[None, :]
    chunk = tokens[rows].to(torch.int64)
    return chunk[:, :-1], chunk[:, 1:]


class ShardedSampler:
    """Which windows each rank reads, epoch by epoch, resumable at any global batch boundary.

    n: number of windows; batch_size: windows per rank per step; world_size, rank: the data-parallel
    group; seed: with the epoch, seeds the permutation (the same on every rank).
    """

    def __init__(self, n, batch_size, world_size, rank, seed):
        self.n, self.batch_size, self.world_size, self.rank, self.seed = n, batch_size, world_size, rank, seed
        self.global_batch = batch_size * world_size
        self._cached = (None, None)  # (epoch, permutation): one randperm per epoch, not per step
        if n < self.global_batch:
            raise ValueError(f"{n} windows are fewer than one global batch of {self.global_batch}")

    def permutation(self, epoch):
        """The epoch's order of window indices: int64 [n], identical on every rank."""
        if self._cached[0] != epoch:
            g = torch.Generator()
            g.manual_seed(self.seed * 1_000_003 + epoch)
            self._cached = (epoch, torch.randperm(self.n, generator=g))
        return self._cached[1]

    def steps_per_epoch(self):
        """Global batches per epoch; the last partial one is dropped (drop_last)."""
        return self.n // self.global_batch

    def batch(self, epoch, position):
        """This rank's window indices (a list of batch_size ints) for the global batch starting at
        `position` in the epoch's permutation; position must be a multiple of batch_size x world_size."""
        chunk = self.permutation(epoch)[position: position + self.global_batch]
        return chunk[self.rank:: self.world_size].tolist()

    def advance(self, epoch, position):
        """(epoch, position) of the global batch after the one at (epoch, position)."""
        position += self.global_batch
        if position + self.global_batch > self.n:
            return epoch + 1, 0
        return epoch, position
