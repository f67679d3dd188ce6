"""Reads a dataset version straight from a gpugeek version store (src/data/version_store.h), no checkout.

A store is a folder: refs/<dataset>/branches/<name> and refs/<dataset>/tags/<name> each hold a commit's
SHA-256; objects/ab/cdef... hold objects named by the SHA-256 of their bytes. A commit (JSON) names the
tree of the top folder; a tree lists a folder's entries, each a file (its chunks: [sha256, bytes] pairs in
file order) or a sub-folder (its tree's digest). Every object read here is checked against its name, so
a damaged store raises DatasetVersionError instead of training on wrong bytes. Standard library only.

    version = DatasetVersion(store, "licences", "v1")   # a full commit digest, a branch or a tag
    version.commit, version.paths()                      # '/'-separated paths, sorted
    version.read("GPL-3")                                # the file's bytes
"""

import hashlib
import json
import os
import re

_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


class DatasetVersionError(ValueError):
    """A missing dataset, revision or object, or an object whose bytes do not match its digest."""


class DatasetVersion:
    def __init__(self, store, dataset, rev="main"):
        if not _NAME.fullmatch(dataset):
            raise DatasetVersionError(f"dataset name {dataset!r} is not valid")
        self.store, self.dataset = store, dataset
        self.commit = self._resolve(rev)
        commit = self._json(self.commit, "commit")
        if commit.get("dataset") != dataset:
            raise DatasetVersionError(f"commit {self.commit} is in dataset {commit.get('dataset')!r}, not {dataset!r}")
        self.files = {}  # path -> [(digest, bytes), ...]
        self._walk(commit["tree"], "")

    def _resolve(self, rev):
        # As gpugeek resolves: a full digest first (branch and tag names are never 6-64 hex digits).
        if _HEX64.fullmatch(rev) and os.path.exists(os.path.join(self.store, "objects", rev[:2], rev[2:])):
            return rev
        if _NAME.fullmatch(rev):
            for kind in ("branches", "tags"):
                path = os.path.join(self.store, "refs", self.dataset, kind, rev)
                if os.path.exists(path):
                    with open(path) as f:
                        digest = f.read().strip()
                    if not _HEX64.fullmatch(digest):
                        raise DatasetVersionError(f"{path} does not hold a commit digest")
                    return digest
        raise DatasetVersionError(f"dataset {self.dataset!r} has no branch, tag or commit {rev!r}")

    def _object(self, digest, max_bytes=1 << 30):
        path = os.path.join(self.store, "objects", digest[:2], digest[2:])
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except FileNotFoundError:
            raise DatasetVersionError(f"no object {digest} in {self.store}") from None
        if len(data) > max_bytes or hashlib.sha256(data).hexdigest() != digest:
            raise DatasetVersionError(f"object {digest} is damaged: its bytes hash to something else")
        return data

    def _json(self, digest, kind):
        try:
            obj = json.loads(self._object(digest, 256 << 20))
        except ValueError as e:
            raise DatasetVersionError(f"object {digest} is not a {kind}: {e}") from None
        if not isinstance(obj, dict) or obj.get("type") != kind:
            raise DatasetVersionError(f"object {digest} is not a {kind}")
        return obj

    def _walk(self, tree_digest, prefix):
        for e in self._json(tree_digest, "tree")["entries"]:
            path = prefix + e["name"]
            if "tree" in e:
                self._walk(e["tree"], path + "/")
            else:
                self.files[path] = [(d, n) for d, n in e["chunks"]]

    def paths(self):
        """Every file's path in the version, sorted."""
        return sorted(self.files)

    def read(self, path):
        """The file's bytes, every chunk checked against its digest. KeyError for a path not in the version."""
        parts = [self._object(d, n) for d, n in self.files[path]]
        return b"".join(parts)
