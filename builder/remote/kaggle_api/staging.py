"""Folders to upload whose sub-folders are archives at stable paths, so that a killed upload resumes.

The client sends a dataset's (or a model variation's) sub-folder as one ``<name>.tar`` that it writes under
``mkdtemp()``: a new path on every run. Its resume state is keyed by the file's path, size and mtime, so after
``kill -9`` mid-upload the next run started that archive again from byte 0 and left the dead one behind.

kkb writes the same archive itself (the files the client would put in it, under the same names, with the
client's own ignore rules) into a folder named by the content, ``stage-<folder>-<content>``, next to the
client's resume state (``tempfile.gettempdir()``: the project's private ``.kkb/tmp/<server>`` during a push),
and hands the client that folder. Kaggle receives what it always did, a top-level ``<name>.tar`` blob per
sub-folder, but the rerun after a kill finds the very same file and the client resumes it from the byte Kaggle
has. A stage goes once its upload returns, or when the content it holds is superseded or past the client's
resume window.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from builder.errors import RemoteError

STAGE_PREFIX = "stage-"
# ResumableFileUpload.RESUMABLE_UPLOAD_EXPIRY_SECONDS: the client resumes nothing older than this.
RESUME_WINDOW_S = 6 * 24 * 3600
# Metadata and the manifest name the content; every other top-level file is staged as it is.
_KEY_FILES = ("dataset-metadata.json", "model-instance-metadata.json", "model-metadata.json", "manifest.json")


@contextlib.contextmanager
def stable_upload_folder(folder: Path, root: Path | None = None) -> Iterator[Path]:
    """``folder`` as the client should upload it: itself when it has no sub-folders, else its stage.

    The stage stays when the upload fails or the process dies (the next run resumes from it) and is removed
    when the upload returns."""
    folder = Path(folder)
    if not any(entry.is_dir() for entry in folder.iterdir()):
        yield folder  # top-level files resume by their own, stable, paths
        return
    root = Path(root or tempfile.gettempdir())
    stage = _stage(folder, root)
    yield stage
    shutil.rmtree(stage, ignore_errors=True)


def remove_dead_stages(root: Path, now: float | None = None) -> list[Path]:
    """Stages no upload can resume any more (older than the client's resume window) and half-written ones."""
    now = time.time() if now is None else now
    removed = []
    for stage in sorted(Path(root).glob(STAGE_PREFIX + "*")):
        if not stage.is_dir() or stage.is_symlink():
            continue
        if ".partial-" in stage.name or stage.stat().st_mtime < now - RESUME_WINDOW_S:
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
    return removed


def _stage(folder: Path, root: Path) -> Path:
    origin = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    stage = root / f"{STAGE_PREFIX}{origin}-{_content_key(folder)}"
    for superseded in root.glob(f"{STAGE_PREFIX}{origin}-*"):
        if superseded != stage and superseded.is_dir() and not superseded.is_symlink():
            shutil.rmtree(superseded, ignore_errors=True)  # the content it held is no longer what is pushed
    if stage.is_dir():
        os.utime(stage)  # in use again: the resume window counts from now
        return stage
    partial = stage.with_name(f"{stage.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        for entry in sorted(folder.iterdir()):
            if entry.is_dir():
                _archive(entry, partial / f"{entry.name}.tar")
            elif entry.is_file():
                _link_or_copy(entry, partial / entry.name)
        os.replace(partial, stage)  # only a complete stage carries the name the next run looks for
    except BaseException as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise RemoteError(f"archiving {folder} for the upload in {root}: the disk is full ({exc.strerror}); "
                              "nothing was uploaded", hint=f"free space there (df -h {root}); the archive needs "
                                                           f"about the size of {folder}") from None
        raise
    return stage


def _content_key(folder: Path) -> str:
    """What the folder holds: its manifest's hashes where kkb wrote one (a rebuild that rewrote unchanged files
    keeps the key, so the stage is resumed), the path, size and mtime of every file the manifest does not list."""
    digest = hashlib.sha256()
    listed: set[str] = set()
    for name in _KEY_FILES:
        if (folder / name).is_file():
            raw = (folder / name).read_bytes()
            digest.update(name.encode() + b"\0" + raw + b"\0")
            listed.add(name)
            if name == "manifest.json":
                listed |= _manifest_paths(raw)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative not in listed:
            info = path.stat()
            digest.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _manifest_paths(raw: bytes) -> set[str]:
    with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
        return {str(entry["path"]) for entry in json.loads(raw)["files"] if entry.get("sha256")}
    return set()


def _archive(source: Path, target: Path) -> None:
    """The tar the client's ``DirectoryArchive`` writes (files only, relative names, its ignore rules), in a
    fixed order and with a fixed mtime, so that the same content gives the same file."""
    from kaggle.api.kaggle_api_extended import DEFAULT_IGNORE_PATTERNS, should_ignore  # the adapter imports kaggle lazily

    newest = 0
    with tarfile.open(target, "w") as archive:
        for top, dirs, files in os.walk(source):
            dirs[:] = sorted(d for d in dirs if not should_ignore(os.path.relpath(os.path.join(top, d), source), True,
                                                                  DEFAULT_IGNORE_PATTERNS))
            for name in sorted(files):
                path = os.path.join(top, name)
                relative = os.path.relpath(path, source)
                if not should_ignore(relative, False, DEFAULT_IGNORE_PATTERNS):
                    archive.add(path, relative)
                    newest = max(newest, int(os.stat(path).st_mtime))
    os.utime(target, (newest, newest))


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)  # the same inode: the same size and mtime the resume state recorded
    except OSError:
        shutil.copy2(source, target)
