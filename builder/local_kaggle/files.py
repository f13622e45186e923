"""File trees: turning uploaded blobs into a dataset version, zipping trees, signed download URLs."""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from builder.local_kaggle import names
from builder.local_kaggle.blobs import Blob, Blobs
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import ApiError, Json

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


class UploadRejected(Exception):
    """An upload cannot become a dataset version; the message is what Kaggle puts in ``error``."""


def uploaded_files(blobs: Blobs, user: str, body: Json, kind: str) -> list[tuple[str, Blob]]:
    """The ``(folder prefix, blob)`` pairs a create/version request names: its ``files`` and its
    ``directories`` trees (ApiUploadDirectoryInfo), every token resolved as ``user``'s upload of ``kind``
    (``DATASET``, ``MODEL``) and every directory name checked by ``names.py``."""

    def blob(entry: Any) -> Blob:
        token = entry.get("token") if isinstance(entry, dict) else None
        if not token:
            raise UploadRejected("Every file needs an upload token")
        try:
            return blobs.resolve(token, user, kind)
        except ApiError as exc:
            raise UploadRejected(exc.message) from None

    pairs = [("", blob(entry)) for entry in body.get("files") or []]

    def walk(directories: list[Json], prefix: str) -> None:
        for directory in directories:
            if not isinstance(directory, dict):
                raise ApiError(400, "Every entry of directories must be an object")
            name = f"{prefix}/{names.file_name(str(directory.get('name', '')), 'directory name')}".strip("/")
            pairs.extend((name, blob(entry)) for entry in directory.get("files") or [])
            walk(directory.get("directories") or [], name)

    walk(body.get("directories") or [], "")
    return pairs


def store_version(uploads: list[tuple[str, Blob]], folder: Path) -> None:
    """The uploads as the version folder ``folder`` (its ``files/``): laid out in a staging folder and renamed
    into place, so a rejected upload leaves nothing behind and a reader never sees half a version."""
    staging = folder.with_name(f".{folder.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        materialize(uploads, staging / "files")
    except UploadRejected:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


def materialize(blobs: Iterable[tuple[str, Blob]], dest: Path) -> None:
    """Lay out uploads under ``dest``: ``(folder prefix, blob)`` pairs; archives are unpacked into a folder
    named after them (``fold0.zip`` → ``fold0/``), as Kaggle does for ``--dir-mode zip|tar`` uploads.

    Every path is planned and checked (unique, no file where a folder goes, every name through
    ``names.py``: a bad one is a 400) before anything is written.
    """
    plan: list[tuple[str, Blob, str | None]] = []   # (destination, blob, member name inside an archive)
    for prefix, blob in blobs:
        if prefix.strip("/"):
            names.relative_path(prefix.strip("/"), "directory name")
        names.file_name(blob.name, "file name")
        stem = _archive_stem(blob.name)
        if stem is None:
            plan.append((_join(prefix, blob.name), blob, None))
        else:
            root = _join(prefix, names.file_name(stem, "folder name (the archive's name without its suffix)"))
            plan.extend((f"{root}/{rel}", blob, member) for rel, member in _members(blob))
    _check_unique([rel for rel, _, _ in plan])
    dest.mkdir(parents=True, exist_ok=True)
    archives: dict[str, list[tuple[str, str]]] = {}
    for rel, blob, member in plan:
        if member is None:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(blob.path, dest / rel)
        else:
            archives.setdefault(blob.token + "/" + blob.name, []).append((rel, member))
    by_key = {blob.token + "/" + blob.name: blob for _, blob, member in plan if member is not None}
    for key, members in archives.items():  # one pass over each archive, not one per member
        _extract(by_key[key], members, dest)


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


def remove_tree(root: Path) -> None:
    """Delete a run's sandbox; the sandbox removes write permission from its inputs, so give it back first."""
    if not root.exists():
        return
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            try:
                path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR | stat.S_IRUSR)
            except OSError:
                pass
    shutil.rmtree(root, ignore_errors=True)


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


def _check_unique(paths: list[str]) -> None:
    seen: set[str] = set()
    for rel in paths:
        if rel in seen:
            raise UploadRejected("Path must be unique")
        seen.add(rel)
    for rel in paths:  # a file "d" next to an unpacked "d/" is the same path twice
        if any(str(parent) in seen for parent in PurePosixPath(rel).parents if str(parent) != "."):
            raise UploadRejected("Path must be unique")


def _safe(name: str, archive: str) -> str:
    return names.relative_path(name, "archive entry", archive=archive)


def _members(blob: Blob) -> list[tuple[str, str]]:
    """``(safe relative path, member name)`` of every file in an archive; links and devices are refused."""
    try:
        if blob.name.lower().endswith(".zip"):
            with zipfile.ZipFile(blob.path) as zf:
                return [(_safe(info.filename, blob.name), info.filename) for info in zf.infolist() if not info.is_dir()]
        with tarfile.open(blob.path) as tf:
            members = []
            for member in tf.getmembers():
                if member.isdir():
                    continue
                if not member.isfile():  # links and devices have no place in a dataset
                    raise UploadRejected(f"Archive {blob.name} contains a link or special file: {member.name}")
                members.append((_safe(member.name, blob.name), member.name))
            return members
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise UploadRejected(f"Archive {blob.name} cannot be unpacked: {exc}") from None


def _extract(blob: Blob, members: list[tuple[str, str]], dest: Path) -> None:
    """Write each ``(relative path, member name)`` of one archive under ``dest``."""
    def target(rel: str) -> Path:
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    if blob.name.lower().endswith(".zip"):
        with zipfile.ZipFile(blob.path) as zf:
            for rel, member in members:
                with zf.open(member) as src, target(rel).open("wb") as out:
                    shutil.copyfileobj(src, out)
        return
    wanted = dict((member, rel) for rel, member in members)
    with tarfile.open(blob.path) as tf:
        for info in tf:
            wanted_as = wanted.get(info.name)
            if wanted_as is None or not info.isfile():
                continue
            extracted = tf.extractfile(info)
            if extracted is None:
                raise UploadRejected(f"Archive {blob.name}: {info.name} is not a regular file")
            with extracted, target(wanted_as).open("wb") as out:
                shutil.copyfileobj(extracted, out)
