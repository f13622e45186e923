"""The members of the archives a bundle holds (zip, npz, tar, tar.gz/bz2/xz), for the credential scans.

``weights/backup.zip`` holding ``.kaggle/kaggle.json`` must be refused like the file itself: the scanner of
:mod:`builder.bundle.secret_scan` looks at every member's name and (bounded) content through :func:`members`.
Archives inside archives are opened too, down to :data:`MAX_DEPTH`. Every read is bounded, so a
decompression bomb costs at most :data:`MEMBER_LIMIT` bytes per member and :data:`ARCHIVE_LIMIT` per archive;
content beyond the limits is not scanned (the names always are). A file that only looks like an archive
(a ``.zip`` that is not one) has no members: the scans read its bytes as any other file's.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

ZIP_SUFFIXES = (".zip", ".npz")  # numpy's .npz is a zip of .npy files
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
MAX_DEPTH = 3  # an archive in an archive in an archive
MEMBER_LIMIT = 64 * 1024 * 1024  # bytes of one member read for the scans (and to open a nested archive)
ARCHIVE_LIMIT = 512 * 1024 * 1024  # bytes read from one archive's members, all together


@dataclass(frozen=True)
class Member:
    """One file inside an archive: its path through the archives (``inner.tar``, ``.kaggle/kaggle.json``)
    and its bytes (up to the limits; ``complete`` says whether they are all of them)."""

    chain: tuple[str, ...]
    data: bytes
    complete: bool

    @property
    def name(self) -> str:
        return PurePosixPath(self.chain[-1]).name

    @property
    def where(self) -> str:
        """``member inner.tar → .kaggle/kaggle.json``: how a message names it."""
        return "member " + " → ".join(self.chain)


def is_archive(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(ZIP_SUFFIXES) or lower.endswith(TAR_SUFFIXES)


def members(name: str, handle: IO[bytes], depth: int = 1) -> Iterator[Member]:
    """The files of the archive ``name`` read from ``handle`` (nested archives opened, up to the depth)."""
    budget = [ARCHIVE_LIMIT]
    yield from _members(name, handle, (), depth, budget)


def _members(name: str, handle: IO[bytes], chain: tuple[str, ...], depth: int, budget: list[int]) -> Iterator[Member]:
    for inner, data, complete in _entries(name, handle, budget):
        member = Member(chain + (inner,), data, complete)
        yield member
        if depth < MAX_DEPTH and complete and is_archive(inner):
            yield from _members(inner, io.BytesIO(data), member.chain, depth + 1, budget)


def _entries(name: str, handle: IO[bytes], budget: list[int]) -> Iterator[tuple[str, bytes, bool]]:
    """(member name, its first bytes, whether those are all) for each file member; nothing for a broken archive."""
    lower = name.lower()
    with contextlib.suppress(zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError):
        if lower.endswith(ZIP_SUFFIXES):
            with zipfile.ZipFile(handle) as bundle:
                for info in bundle.infolist():
                    if not info.is_dir():
                        with bundle.open(info) as stream:
                            yield info.filename, *_bounded(stream, budget)
        else:
            with tarfile.open(fileobj=handle, mode="r:*") as bundle:
                for tar_info in bundle:
                    member = bundle.extractfile(tar_info) if tar_info.isfile() else None
                    if member is not None:
                        yield tar_info.name, *_bounded(member, budget)


def _bounded(stream: IO[bytes], budget: list[int]) -> tuple[bytes, bool]:
    limit = min(MEMBER_LIMIT, max(budget[0], 0))
    data = stream.read(limit + 1)
    complete = len(data) <= limit
    data = data[:limit]
    budget[0] -= len(data)
    return data, complete
