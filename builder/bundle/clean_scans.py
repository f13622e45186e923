"""Content the secret scan already found clean, so that an unchanged rebuild reads no file for keys again.

A build reads every selected file whole for keys (:func:`builder.bundle.files.refuse_credentials`): weights of a
few GB were read by every build, and so by every dry run, unchanged or not. This record keeps the sha256 of each
source content found clean, under a digest of what it was scanned for (the pattern table and the credential values
in use): a new key in the environment or a new pattern empties it. A source's content is known by the build's own
stat-keyed hashes (:class:`~builder.bundle.files.HashCache`), so a file edited since is read again. The staged
datasets are still read for the credential values in use (kkb writes files there too). The record holds hashes of
contents and one digest, never a value.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from builder.bundle.secret_scan import PATTERNS
from builder.project.credentials import Secret

# Part of the digest: a scan that reads more (a new container, a new view) bumps it, and every record is void.
SCHEMA = "kkb.clean-scans/1"


def scan_digest(secrets: Sequence[Secret]) -> str:
    """What a clean scan was a scan for: the pattern table and the credential values (hashed, with kkb's prefix)."""
    text = "\n".join([SCHEMA, *(pattern.regex.pattern.decode("latin-1") for pattern in PATTERNS),
                      *sorted(secret.value for secret in secrets if secret.value)])
    return hashlib.sha256(text.encode()).hexdigest()


class CleanScans:
    """The sha256 of contents found free of every key, for one digest (:func:`scan_digest`)."""

    def __init__(self, digest: str, clean: set[str] | None = None) -> None:
        self.digest = digest
        self.clean = clean or set()
        self.used: set[str] = set()  # what this build's files are: the record keeps only these

    def known_clean(self, sha: str) -> bool:
        if sha not in self.clean:
            return False
        self.used.add(sha)
        return True

    def add(self, sha: str) -> None:
        self.clean.add(sha)
        self.used.add(sha)

    @classmethod
    def load(cls, path: Path, secrets: Sequence[Secret]) -> CleanScans:
        digest = scan_digest(secrets)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls(digest)
        if not isinstance(data, dict) or data.get("digest") != digest or not isinstance(data.get("clean"), list):
            return cls(digest)  # scanned for something else: nothing is known clean
        return cls(digest, {str(sha) for sha in data["clean"]})

    def save(self, path: Path) -> None:
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({"schema": SCHEMA, "digest": self.digest, "clean": sorted(self.used)}))
        os.replace(partial, path)


__all__ = ["CleanScans", "scan_digest"]
