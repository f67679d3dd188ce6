"""Sharded gpugeek datasets from Python: read the shards `gpugeek data shard` wrote, and give each
data-parallel rank its samples exactly as the C++ sampler does (src/data/sampler.h). Standard library only.

Format (src/data/shard_format.h): a folder of shard-00000.bin, ... and index.json. A shard file is its
records' bytes concatenated, then n + 1 uint64 little-endian offsets (offset i = where record i starts,
offset n = where the records end), then a 16-byte trailer: n as uint64 little-endian and b"GGSHARD1".

Sampler: the epoch order depends only on (shard record counts, seed, epoch, window_shards), never on the
world size: shuffle the shard order, then the samples of each window of `window_shards` shards, all with
one splitmix64 stream seeded from (seed, epoch), Fisher-Yates from the last position down with unbiased
bounded draws. A position (seed, epoch, consumed) says the first `consumed` entries of the order are taken;
the remainder is cut to a multiple of the world size W ("drop": its last R mod W entries dropped; "pad":
(W - R mod W) mod W entries flagged as padding appended, pad j repeating order[j mod N]) and rank r takes
entries r, r + W, r + 2W, ... of it. Every rank gets the same count, and a resume with a new world size
covers each remaining sample exactly once.

    ds = ShardedDataset("/data/shards")            # reads and validates index.json, checks digests
    order = epoch_order(ds.record_counts(), seed=1, epoch=0)
    for sample, is_padding in rank_samples(order, consumed, world, rank, "pad"):
        record = ds.record(sample)                  # bytes
"""

import hashlib
import json
import os
import re
import struct

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MAGIC = b"GGSHARD1"
TRAILER_BYTES = 16
INDEX_FILE = "index.json"
FORMAT = "gpugeek-shards"
VERSION = 1
MIN_SHARD_BYTES = 64
DEFAULT_WINDOW_SHARDS = 4
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class DatasetError(ValueError):
    """index.json or a shard file is missing, malformed or corrupt; the message names the field or file."""


def mix64(z):
    """splitmix64's output mix (Vigna's reference splitmix64.c), modulo 2^64."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + GOLDEN) & MASK
        return mix64(self.state)

    def bounded(self, bound):
        """Uniform in [0, bound), unbiased: draws below (2^64 - bound) mod bound are rejected."""
        threshold = ((1 << 64) - bound) % bound
        while True:
            r = self.next()
            if r >= threshold:
                return r % bound


def epoch_seed(seed, epoch):
    return mix64((seed + GOLDEN * (epoch + 1)) & MASK)


def _fisher_yates(items, rng):
    for i in range(len(items), 1, -1):
        j = rng.bounded(i)
        items[i - 1], items[j] = items[j], items[i - 1]


def epoch_order(shard_records, seed, epoch, window_shards=DEFAULT_WINDOW_SHARDS):
    """The epoch's order of global sample numbers (a list of N ints), as data::EpochOrder."""
    first, n = [], 0
    for count in shard_records:
        first.append(n)
        n += count
    rng = SplitMix64(epoch_seed(seed, epoch))
    shards = list(range(len(shard_records)))
    _fisher_yates(shards, rng)
    window = max(window_shards, 1)
    order = []
    for w in range(0, len(shards), window):
        block = []
        for s in shards[w:w + window]:
            block.extend(range(first[s], first[s] + shard_records[s]))
        _fisher_yates(block, rng)
        order.extend(block)
    return order


def permutation(n, seed, epoch):
    """A uniform permutation of range(n): epoch_order of one shard of n samples."""
    return epoch_order([n] if n else [], seed, epoch, 1)


def per_rank_count(remaining, world, policy):
    if policy == "pad":
        return -(-remaining // world)
    if policy == "drop":
        return remaining // world
    raise ValueError(f'policy "{policy}": expected pad or drop')


def rank_samples(order, consumed, world, rank, policy):
    """Rank `rank`'s entries of order[consumed:] as (sample, is_padding) pairs, as data::RankSamples."""
    if world <= 0:
        raise ValueError(f"world size {world}: a run has at least one rank")
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not below the world size {world}")
    n = len(order)
    if not 0 <= consumed <= n:
        raise ValueError(f"consumed {consumed} is past the epoch's {n} samples")
    remaining = n - consumed
    out = []
    for k in range(per_rank_count(remaining, world, policy)):
        at = rank + k * world
        if at < remaining:
            out.append((order[consumed + at], False))
        else:
            out.append((order[(at - remaining) % n], True))
    return out


class SamplerState:
    """(seed, epoch, consumed): the first `consumed` entries of the epoch's order are taken."""

    def __init__(self, seed=0, epoch=0, consumed=0):
        self.seed, self.epoch, self.consumed = seed, epoch, consumed

    def advanced(self, per_rank, world, n):
        left = n - min(self.consumed, n)
        consumed = n if per_rank and left // per_rank < world else self.consumed + per_rank * world
        return SamplerState(self.seed, self.epoch, consumed)

    def to_json(self):
        return {"seed": self.seed, "epoch": self.epoch, "consumed": self.consumed}

    @staticmethod
    def from_json(j, n):
        if not isinstance(j, dict):
            raise ValueError("sampler state: not a JSON object")
        for key in j:
            if key not in ("seed", "epoch", "consumed"):
                raise ValueError(f"sampler state: {key}: unknown key; expected seed, epoch and consumed")
        values = []
        for key in ("seed", "epoch", "consumed"):
            v = j.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MASK:
                raise ValueError(f"sampler state: {key}: {v!r} is not a non-negative integer")
            values.append(v)
        if values[2] > n:
            raise ValueError(f"sampler state: consumed: {values[2]} is past the epoch's {n} samples")
        return SamplerState(*values)

    def __eq__(self, other):
        return (self.seed, self.epoch, self.consumed) == (other.seed, other.epoch, other.consumed)


def shard_file_name(i):
    return f"shard-{i:05d}.bin"


def _bad(field, what):
    return DatasetError(f"index.json: {field}: {what}; rewrite the dataset with gpugeek data shard")


def _uint(j, key, where):
    field = f"{where}.{key}" if where else key
    if key not in j:
        raise _bad(field, "missing")
    v = j[key]
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MASK:
        raise _bad(field, f"{json.dumps(v)} is not a non-negative integer")
    return v


def parse_index(text):
    """index.json text -> dict, every field checked as data::ParseShardIndex does (DatasetError)."""
    try:
        j = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise DatasetError(f"index.json: {e}; rewrite the dataset with gpugeek data shard") from None
    if not isinstance(j, dict):
        raise _bad("(top level)", "not a JSON object")
    for key in j:
        if key not in ("format", "version", "total_records", "total_bytes", "shard_bytes", "shards"):
            raise _bad(key, "unknown key (a newer format?)")
    if j.get("format") != FORMAT:
        raise _bad("format", f'{json.dumps(j.get("format"))}, expected "{FORMAT}"')
    if _uint(j, "version", "") != VERSION:
        raise _bad("version", f"{j['version']}, this reader reads version {VERSION}")
    total_records, total_bytes = _uint(j, "total_records", ""), _uint(j, "total_bytes", "")
    if _uint(j, "shard_bytes", "") < MIN_SHARD_BYTES:
        raise _bad("shard_bytes", f"{j['shard_bytes']}, below the minimum of {MIN_SHARD_BYTES}")
    shards = j.get("shards")
    if not isinstance(shards, list):
        raise _bad("shards", "missing or not an array")
    records = size = 0
    for i, s in enumerate(shards):
        where = f"shards[{i}]"
        if not isinstance(s, dict):
            raise _bad(where, "not an object")
        for key in s:
            if key not in ("file", "bytes", "records", "first_record", "sha256"):
                raise _bad(f"{where}.{key}", "unknown key (a newer format?)")
        if s.get("file") != shard_file_name(i):
            raise _bad(f"{where}.file", f'{json.dumps(s.get("file"))}, expected "{shard_file_name(i)}"')
        nbytes, nrec, first = _uint(s, "bytes", where), _uint(s, "records", where), _uint(s, "first_record", where)
        if nrec == 0:
            raise _bad(f"{where}.records", "0; a shard holds at least one record")
        if nbytes < TRAILER_BYTES or (nbytes - TRAILER_BYTES) // 8 <= nrec:
            raise _bad(f"{where}.bytes", f"{nbytes}, too small for the footer of {nrec} records")
        if first != records:
            raise _bad(f"{where}.first_record", f"{first}, expected {records} (the records of the shards before it)")
        if not isinstance(s.get("sha256"), str) or not _SHA256.match(s["sha256"]):
            raise _bad(f"{where}.sha256", "not 64 lower-case hex digits")
        records += nrec
        size += nbytes
    if total_records != records:
        raise _bad("total_records", f"{total_records}, but the shards hold {records}")
    if total_bytes != size:
        raise _bad("total_bytes", f"{total_bytes}, but the shards' bytes add up to {size}")
    return j


class ShardedDataset:
    """Random access to a dataset folder's records (bytes). verify=True checks every shard's SHA-256 on open."""

    def __init__(self, directory, verify=True):
        self.directory = directory
        path = os.path.join(directory, INDEX_FILE)
        if not os.path.exists(path):
            raise DatasetError(f"{directory}: no index.json: not a dataset folder, or its writing did not finish")
        with open(path, "rb") as f:
            self.index = parse_index(f.read())
        self.shards = self.index["shards"]
        self._firsts = [s["first_record"] for s in self.shards]
        for s in self.shards:
            p = os.path.join(directory, s["file"])
            if not os.path.exists(p):
                raise DatasetError(f"{p}: missing; the dataset is incomplete")
            if os.path.getsize(p) != s["bytes"]:
                raise DatasetError(f"{p}: {os.path.getsize(p)} bytes, index.json says {s['bytes']}")
            if verify:
                self.verify_shard(s)

    def verify_shard(self, shard):
        p = os.path.join(self.directory, shard["file"])
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for piece in iter(lambda: f.read(1 << 20), b""):
                h.update(piece)
        if h.hexdigest() != shard["sha256"]:
            raise DatasetError(f"{p}: SHA-256 {h.hexdigest()}, index.json says {shard['sha256']}")

    def __len__(self):
        return self.index["total_records"]

    def record_counts(self):
        return [s["records"] for s in self.shards]

    def record(self, k):
        """Global record k's bytes, reading only the trailer, two offsets and the record."""
        if not 0 <= k < len(self):
            raise IndexError(f"record {k} is past the dataset's {len(self)} records")
        lo, hi = 0, len(self._firsts)
        while hi - lo > 1:  # the last shard whose first record is <= k
            mid = (lo + hi) // 2
            if self._firsts[mid] <= k:
                lo = mid
            else:
                hi = mid
        s = self.shards[lo]
        p = os.path.join(self.directory, s["file"])
        with open(p, "rb") as f:
            f.seek(s["bytes"] - TRAILER_BYTES)
            n, magic = struct.unpack("<Q8s", f.read(TRAILER_BYTES))
            if magic != MAGIC or n != s["records"]:
                raise DatasetError(f"{p}: bad trailer (corrupt, or not a gpugeek shard)")
            offsets_at = s["bytes"] - TRAILER_BYTES - 8 * (n + 1)
            f.seek(offsets_at + 8 * (k - s["first_record"]))
            begin, end = struct.unpack("<QQ", f.read(16))
            if not begin <= end <= offsets_at:
                raise DatasetError(f"{p}: record {k - s['first_record']} spans [{begin}, {end}), outside the records")
            f.seek(begin)
            return f.read(end - begin)
