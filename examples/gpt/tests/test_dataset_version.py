#!/usr/bin/python3
"""The GPT example trains from a dataset version in a gpugeek store: /usr/share/common-licenses pushed with
`gpugeek data push`, tagged, then read by dataset_version.py (every chunk checked against its SHA-256).
Training from the version gives exactly the losses of training from the raw files (the same bytes), a
later push to the branch does not change what the tag reads, and a damaged object stops training with a
clear error instead of training on wrong bytes."""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness  # first: puts examples/gpt on sys.path
import data
import dataset_version
from harness import step_losses

REPO = os.path.dirname(os.path.dirname(harness.GPT_DIR))
TRAIN_ARGS = ["--steps", "12", "--batch-size", "4", "--seq-len", "32", "--log-every", "3", "--seed", "7"]


class DatasetVersionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = os.environ.get("GPUGEEK_BINARY") or os.path.join(REPO, "build", "gpugeek")
        if not os.path.exists(cls.binary):
            raise unittest.SkipTest(f"no gpugeek binary at {cls.binary}; build it or set GPUGEEK_BINARY")
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpt-dataset-")
        cls.store = os.path.join(cls.tmp.name, "store")
        # common-licenses holds symbolic links (GFDL -> GFDL-1.3, ...): -L stores what they lead to.
        cls.gpugeek("push", "-L", data.LICENCE_DIR, "--dataset", "licences", "-m", "Debian common licences")
        cls.gpugeek("tag", "--dataset", "licences", "v1")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def gpugeek(cls, *args):
        r = subprocess.run([cls.binary, "data", args[0], "--store", cls.store, *args[1:]], capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"gpugeek data {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def train(self, *extra):
        out = tempfile.mkdtemp(dir=self.tmp.name)
        r = subprocess.run([sys.executable, os.path.join(harness.GPT_DIR, "train.py"), "--out", out, *TRAIN_ARGS,
                            *extra], capture_output=True, text=True, timeout=300, env=harness.solo_env())
        return r.returncode, r.stdout + r.stderr

    def test_the_version_reads_the_files_byte_for_byte(self):
        version = dataset_version.DatasetVersion(self.store, "licences", "v1")
        for name in data.LICENCE_FILES:
            with open(os.path.join(data.LICENCE_DIR, name), "rb") as f:
                self.assertEqual(version.read(name), f.read(), name)
        self.assertTrue(data.load_corpus(version=version).equal(data.load_corpus()))

    def test_training_from_the_version_matches_training_from_the_files(self):
        rc, from_files = self.train()
        self.assertEqual(rc, 0, from_files)
        rc, from_version = self.train("--dataset", "licences@v1", "--data-store", self.store)
        self.assertEqual(rc, 0, from_version)
        commit = dataset_version.DatasetVersion(self.store, "licences", "v1").commit
        self.assertIn(f"dataset=licences commit={commit}", from_version)
        losses = step_losses(from_version.splitlines())
        self.assertEqual(sorted(losses), [1, 3, 6, 9, 12])
        self.assertEqual(losses, step_losses(from_files.splitlines()))

    def test_a_tag_keeps_its_bytes_after_the_branch_moves(self):
        edited = os.path.join(self.tmp.name, "edited")
        shutil.copytree(data.LICENCE_DIR, edited)
        with open(os.path.join(edited, "GPL-3"), "ab") as f:
            f.write(b"\nan appended line\n")
        self.gpugeek("push", "-L", edited, "--dataset", "licences", "-m", "edited GPL-3")
        main = dataset_version.DatasetVersion(self.store, "licences", "main")
        v1 = dataset_version.DatasetVersion(self.store, "licences", "v1")
        self.assertNotEqual(main.commit, v1.commit)
        self.assertTrue(main.read("GPL-3").endswith(b"an appended line\n"))
        with open(os.path.join(data.LICENCE_DIR, "GPL-3"), "rb") as f:
            self.assertEqual(v1.read("GPL-3"), f.read())

    def test_a_damaged_object_or_unknown_revision_is_an_error(self):
        store = os.path.join(self.tmp.name, "damaged")
        shutil.copytree(self.store, store)
        version = dataset_version.DatasetVersion(store, "licences", "v1")
        digest = version.files["MPL-2.0"][0][0]
        path = os.path.join(store, "objects", digest[:2], digest[2:])
        os.chmod(path, 0o644)
        with open(path, "r+b") as f:
            f.write(b"X")
        with self.assertRaisesRegex(dataset_version.DatasetVersionError, f"object {digest} is damaged"):
            version.read("MPL-2.0")
        rc, out = self.train("--dataset", "licences@v1", "--data-store", store)
        self.assertNotEqual(rc, 0)
        self.assertIn("is damaged", out)
        rc, out = self.train("--dataset", "licences@v9", "--data-store", self.store)
        self.assertEqual(rc, 2, out)
        self.assertIn("dataset 'licences' has no branch, tag or commit 'v9'", out)


if __name__ == "__main__":
    unittest.main()
