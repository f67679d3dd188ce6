#!/usr/bin/python3
"""gpugeek_data.py (Python) and gpugeek's sharded datasets and sampler (C++) agree exactly.

`gpugeek data shard` writes a dataset; gpugeek_data reads every record back with its digests checked, and
`gpugeek data order` prints, for several (world, rank, seed, epoch, consumed, policy), exactly the list
gpugeek_data.rank_samples computes. Standard library only (no torch). The binary is $GPUGEEK_BINARY (CTest
sets it) or build/gpugeek; without one, only the pure-Python tests run.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

GPT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, GPT_DIR)
REPO = os.path.dirname(os.path.dirname(GPT_DIR))

import gpugeek_data as gd  # noqa: E402


def binary():
    path = os.environ.get("GPUGEEK_BINARY") or os.path.join(REPO, "build", "gpugeek")
    if not os.path.exists(path):
        raise unittest.SkipTest(f"no gpugeek binary at {path}; build it or set GPUGEEK_BINARY")
    return path


class SamplerTest(unittest.TestCase):
    def test_pinned_values_match_the_cpp_tests(self):
        # The same numbers src/data/sampler_test.cc pins.
        rng = gd.SplitMix64(0)
        self.assertEqual([rng.next() for _ in range(3)],
                         [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F])
        self.assertEqual(gd.permutation(10, 42, 0), [4, 6, 7, 0, 9, 5, 1, 2, 3, 8])
        self.assertEqual(gd.epoch_order([3, 2, 4, 1, 5], 42, 0, 2),
                         [14, 1, 0, 13, 2, 12, 10, 11, 4, 8, 6, 3, 5, 7, 9])
        rng = gd.SplitMix64(1)
        self.assertEqual([rng.bounded(7) for _ in range(8)], [2, 0, 1, 0, 5, 2, 0, 3])

    def test_ranks_are_disjoint_complete_and_equal(self):
        for n in (0, 1, 7, 31, 64, 97):
            order = gd.permutation(n, 11, 2)
            for world in range(1, 65):
                for policy in ("pad", "drop"):
                    ranks = [gd.rank_samples(order, 0, world, r, policy) for r in range(world)]
                    self.assertEqual({len(r) for r in ranks}, {gd.per_rank_count(n, world, policy)})
                    real = [s for r in ranks for s, pad in r if not pad]
                    pads = sum(pad for r in ranks for _, pad in r)
                    self.assertEqual(len(real), len(set(real)))
                    if policy == "pad":
                        self.assertEqual(set(real), set(range(n)))
                        self.assertEqual(pads, (world - n % world) % world)
                    else:
                        self.assertEqual(set(real), set(order[:n - n % world]))

    def test_state_json(self):
        s = gd.SamplerState(2**64 - 1, 3, 40)
        self.assertEqual(gd.SamplerState.from_json(json.loads(json.dumps(s.to_json())), 100), s)
        with self.assertRaisesRegex(ValueError, "consumed: 40 is past"):
            gd.SamplerState.from_json(s.to_json(), 39)
        with self.assertRaisesRegex(ValueError, "x: unknown key"):
            gd.SamplerState.from_json({"seed": 1, "epoch": 0, "consumed": 0, "x": 1}, 9)
        self.assertEqual(gd.SamplerState(1, 0, 8).advanced(2, 4, 10).consumed, 10)


class AgreementTest(unittest.TestCase):
    def setUp(self):
        self.bin = binary()
        self.tmp = tempfile.TemporaryDirectory()
        src = os.path.join(self.tmp.name, "in")
        os.makedirs(src)
        # 203 lines of varied length (some empty) in 3 files; 512-byte shards make many shards.
        self.lines = []
        for f in range(3):
            lines = [("x" * ((f * 131 + i * 7) % 23)) + f"-{f}-{i}" if i % 17 else "" for i in range(67 + f)]
            self.lines += lines
            with open(os.path.join(src, f"part{f}.txt"), "w") as out:
                out.write("\n".join(lines) + "\n")
        self.out = os.path.join(self.tmp.name, "ds")
        run = subprocess.run([self.bin, "data", "shard", src, "--out", self.out, "--shard-size", "512",
                              "--records", "line", "--json"], capture_output=True, text=True, check=False)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.summary = json.loads(run.stdout)

    def tearDown(self):
        self.tmp.cleanup()

    def test_python_reads_what_cpp_wrote(self):
        ds = gd.ShardedDataset(self.out, verify=True)
        self.assertEqual(len(ds), len(self.lines))
        self.assertEqual(len(ds.shards), self.summary["shards"])
        # The writer's rule: a record joins the open shard while the file, footer included, stays within 512 bytes.
        want, size, n = [], 0, 0
        for line in self.lines:
            if n and size + len(line) + 8 * (n + 2) + 16 > 512:
                want.append(n)
                size, n = 0, 0
            size, n = size + len(line), n + 1
        want.append(n)
        self.assertEqual(ds.record_counts(), want)
        self.assertEqual(len(want), 10)
        self.assertEqual([ds.record(k).decode() for k in range(len(ds))], self.lines)

    def test_python_detects_a_corrupt_shard(self):
        path = os.path.join(self.out, "shard-00001.bin")
        with open(path, "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 1]))
        with self.assertRaisesRegex(gd.DatasetError, "shard-00001.bin: SHA-256"):
            gd.ShardedDataset(self.out, verify=True)

    def test_orders_agree(self):
        counts = gd.ShardedDataset(self.out, verify=False).record_counts()
        n = sum(counts)
        cases = [(1, 0, 0, 0, 0, "pad", 4), (4, 3, 7, 0, 0, "pad", 4), (4, 1, 7, 1, 12, "drop", 4),
                 (7, 6, 123, 2, 100, "pad", 2), (64, 63, 5, 0, 0, "pad", 4), (64, 10, 5, 3, n - 3, "drop", 4),
                 (13, 12, 2**64 - 1, 9, n - 1, "pad", 1), (3, 2, 99, 4, n, "pad", 4), (8, 5, 1, 1, 40, "drop", 100)]
        for world, rank, seed, epoch, consumed, policy, window in cases:
            with self.subTest(world=world, rank=rank, seed=seed, epoch=epoch, consumed=consumed, policy=policy):
                run = subprocess.run([self.bin, "data", "order", "--index", self.out, "--world", str(world),
                                      "--rank", str(rank), "--seed", str(seed), "--epoch", str(epoch),
                                      "--consumed", str(consumed), "--policy", policy, "--window-shards",
                                      str(window), "--json"], capture_output=True, text=True, check=False)
                self.assertEqual(run.returncode, 0, run.stderr)
                got = json.loads(run.stdout)
                want = gd.rank_samples(gd.epoch_order(counts, seed, epoch, window), consumed, world, rank, policy)
                self.assertEqual(list(zip(got["samples"], got["is_padding"])), want)
                self.assertEqual(got["count"], gd.per_rank_count(n - consumed, world, policy))


if __name__ == "__main__":
    unittest.main()
