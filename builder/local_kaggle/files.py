"""File trees: turning uploaded blobs into a dataset version, zipping trees, signed download URLs."""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from builder.local_kaggle.blobs import Blob
from builder.local_kaggle.store import Store

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


class UploadRejected(Exception):
    """An upload cannot become a dataset version; the message is what Kaggle puts in ``error``."""


def materialize(blobs: Iterable[tuple[str, Blob]], dest: Path) -> None:
    """Lay out uploads under ``dest``: ``(folder prefix, blob)`` pairs; archives are unpacked into a folder
    named after them (``fold0.zip`` → ``fold0/``), as Kaggle does for ``--dir-mode zip|tar`` uploads."""
    seen: set[str] = set()
    dest.mkdir(parents=True, exist_ok=True)
    for prefix, blob in blobs:
        stem = _archive_stem(blob.name)
        if stem is None:
            rel = _join(prefix, blob.name)
            _claim(seen, rel)
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(blob.path, target)
        else:
            root = _join(prefix, stem)
            for rel in _unpack(blob, dest / root):
                _claim(seen, f"{root}/{rel}")
    # A file "d" next to an unpacked "d/" is the same path twice.
    for rel in seen:
        for parent in PurePosixPath(rel).parents:
            if str(parent) != "." and str(parent) in seen:
                raise UploadRejected("Path must be unique")


def tree(folder: Path) -> list[tuple[str, Path]]:
    """Every file under ``folder`` as ``(posix relative path, path)``, sorted."""
    if not folder.is_dir():
        return []
    return sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file())


def zip_tree(folder: Path, archive: Path) -> Path:
    """Zip ``folder``'s files (paths relative to it) once; later calls reuse the archive."""
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, path in tree(folder):
            zf.write(path, rel)
    tmp.replace(archive)
    return archive


def storage_url(store: Store, base_url: str, path: Path) -> str:
    """A signed GET URL for a stored file; its last segment is the file's name (the client saves under it)."""
    rel = store.relative(path)
    return f"{base_url}/storage/{store.sign(rel)}/{quote(rel)}"


def _archive_stem(name: str) -> str | None:
    lower = name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def _join(prefix: str, name: str) -> str:
    return f"{prefix.strip('/')}/{name}" if prefix.strip("/") else name


def _claim(seen: set[str], rel: str) -> None:
    if rel in seen:
        raise UploadRejected("Path must be unique")
    seen.add(rel)


def _safe(name: str, archive: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise UploadRejected(f"Archive {archive} contains an unsafe path: {name}")
    if not path.parts:
        raise UploadRejected(f"Archive {archive} contains an empty path")
    return path.as_posix()  # pathlib already dropped "." parts


def _unpack(blob: Blob, dest: Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    try:
        if blob.name.lower().endswith(".zip"):
            with zipfile.ZipFile(blob.path) as zf:
                for info in zf.infolist():
                    if info.is_dir():
                        continue
                    rel = _safe(info.filename, blob.name)
                    target = dest / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, target.open("wb") as out:
                        shutil.copyfileobj(src, out)
                    names.append(rel)
        else:
            with tarfile.open(blob.path) as tf:
                for member in tf.getmembers():
                    if member.isdir():
                        continue
                    if not member.isfile():  # links and devices have no place in a dataset
                        raise UploadRejected(f"Archive {blob.name} contains a link or special file: {member.name}")
                    rel = _safe(member.name, blob.name)
                    target = dest / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    src = tf.extractfile(member)
                    assert src is not None
                    with src, target.open("wb") as out:
                        shutil.copyfileobj(src, out)
                    names.append(rel)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise UploadRejected(f"Archive {blob.name} cannot be unpacked: {exc}") from None
    return names
