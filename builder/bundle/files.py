"""Dataset bundles: which files go in, the refusal of credentials, manifests and content hashes.

Credentials are refused twice: by name and by pattern when the files are selected
(:func:`refuse_credentials`), and by content once a dataset is staged (:func:`refuse_secret_values`),
both in every container through one scanner (:mod:`builder.bundle.secret_scan`: archives, npz/npy,
compressed pickles, nested, bounded reads): every file is read whole for the key and token values of
the credentials in use, which the caller passes in (``project.credentials.secret_values``). A refusal names the file and what it holds,
never the value. Files are rescanned at every build: a cached "clean" would have to be keyed by the
secrets too, and a key changes.

A bundle is a folder Kaggle can take as a dataset: the selected files at their paths, a
``dataset-metadata.json`` and a ``manifest.json`` (path, size and sha256 of every file, plus one
content hash for the whole dataset). The content hash covers content only, so it changes when and
only when a file's bytes, name or presence change, and ``kkb push`` can skip unchanged datasets.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from builder.bundle.archives import Member, is_archive, members
from builder.bundle.clean_scans import CleanScans
from builder.bundle.secret_scan import find_key
from builder.errors import BundleError
from builder.project.credentials import Secret
from builder.project.layout import DATASET_METADATA, MANIFEST_FILE

METADATA_FILE = DATASET_METADATA
LICENSE = "CC0-1.0"
CHUNK = 4 * 1024 * 1024

# Never bundled, whatever the globs say: VCS data, caches, kkb's own state.
IGNORED_PARTS = {".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache",
                 ".ruff_cache", ".kkb", ".venv", "venv", ".idea", ".vscode", ".DS_Store"}
IGNORED_SUFFIXES = {".pyc", ".pyo"}

# A file that looks like a credential stops the build: a public or shared dataset is forever.
CREDENTIAL_NAMES = {"kaggle.json", "access_token", "access_token.txt", "credentials.json", ".env", ".netrc",
                    ".pypirc", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"}
CREDENTIAL_SUFFIXES = {".pem", ".key", ".p12", ".pfx"}


@dataclass(frozen=True)
class FileEntry:
    path: str  # POSIX, relative to the dataset root
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    dataset: str
    files: tuple[FileEntry, ...]
    # Weight files that were symlinks: {path in the dataset: the file it pointed to}. Not in the content hash
    # (the bytes are), so moving a checkpoint without changing it uploads nothing.
    links: tuple[tuple[str, str], ...] = ()

    @property
    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for entry in self.files:
            digest.update(f"{entry.path}\0{entry.sha256}\n".encode())
        return "sha256:" + digest.hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_json(self) -> str:
        data: dict[str, Any] = {"dataset": self.dataset, "content_hash": self.content_hash, "files": [vars(entry) for entry in self.files]}
        if self.links:
            data["links"] = dict(self.links)
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: Path) -> Manifest | None:
        try:
            raw = json.loads(path.read_text())
            return cls(raw["dataset"], tuple(FileEntry(**entry) for entry in raw["files"]),
                       tuple(sorted((raw.get("links") or {}).items())))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _ignored(relative: Path) -> bool:
    return any(part in IGNORED_PARTS for part in relative.parts) or relative.suffix in IGNORED_SUFFIXES


def select_files(kernel_dir: Path, include: Sequence[str], exclude: Sequence[str], what: str,
                 allow_links: bool = False) -> dict[str, Path]:
    """``{relative posix path: source}`` for the globs, with every pattern required to match.

    ``allow_links`` (weights, never code): a file named literally in ``include`` may be a symlink to a
    file outside the kernel folder, where people keep large checkpoints; a broken link is refused.
    """
    root = kernel_dir.resolve()
    selected: dict[str, Path] = {}
    for pattern in include:
        if allow_links and not _GLOB.search(pattern) and (root / pattern).is_symlink():
            selected[pattern] = _linked_file(kernel_dir, root / pattern, pattern, what)
            continue
        matches = [path for path in sorted(root.glob(pattern)) if not _ignored(path.relative_to(root))]
        files = [f for match in matches for f in _files_under(match, root)]
        if not files:
            raise BundleError(f"{kernel_dir / 'kernel.toml'}: [{what}] include pattern '{pattern}' matches no file",
                              hint=f"fix the pattern or add the file under {kernel_dir}")
        for path in files:
            selected[path.relative_to(root).as_posix()] = path
    for pattern in exclude:
        for path in root.glob(pattern):
            for file in _files_under(path, root):
                selected.pop(file.relative_to(root).as_posix(), None)
    return dict(sorted(selected.items()))


_GLOB = re.compile(r"[*?\[]")


def _linked_file(kernel_dir: Path, link: Path, pattern: str, what: str) -> Path:
    with contextlib.suppress(OSError):
        looped = False
        try:
            link.resolve(strict=True)
        except RuntimeError:
            looped = True
        except OSError as exc:
            looped = exc.errno == errno.ELOOP
        if looped:
            raise BundleError(f"{kernel_dir / 'kernel.toml'}: [{what}] include '{pattern}' is a symlink loop "
                              f"(it points to {os.readlink(link)})", hint="point the link at the weight file itself")
    if not link.exists():
        raise BundleError(f"{kernel_dir / 'kernel.toml'}: [{what}] include '{pattern}' is a broken link "
                          f"(it points to {os.readlink(link)}, which does not exist)",
                          hint="fix the link or the path: the weights are read from where it points")
    if not link.is_file():
        raise BundleError(f"{kernel_dir / 'kernel.toml'}: [{what}] include '{pattern}' links to a folder ({link.resolve()})",
                          hint="link each weight file on its own, or copy the folder into the kernel folder")
    return link


def link_targets(files: dict[str, Path]) -> tuple[tuple[str, str], ...]:
    """The selected files that are symlinks, with the file each points to (for the manifest)."""
    return tuple((relative, str(path.resolve())) for relative, path in sorted(files.items()) if path.is_symlink())


def _files_under(path: Path, root: Path) -> Iterable[Path]:
    candidates = [path] if not path.is_dir() else sorted(p for p in path.rglob("*") if not p.is_dir())
    for candidate in candidates:
        relative = candidate.relative_to(root)
        if _ignored(relative):
            continue
        real = _resolved(candidate, relative)
        if root not in real.parents and real != root:
            raise BundleError(f"{relative}: resolves to {real}, outside the kernel folder {root}",
                              hint="copy the file into the kernel folder, or (weights only) name the link itself "
                                   "in [weights] include, without wildcards")
        yield candidate


def _resolved(path: Path, relative: Path) -> Path:
    """``path.resolve()``, with a symlink loop named (Python says only "Symlink loop from …")."""
    try:
        return path.resolve(strict=True)
    except (RuntimeError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno != errno.ELOOP and not path.is_symlink():
            raise
        target = os.readlink(path) if path.is_symlink() else "?"
        problem = "is a symlink loop" if isinstance(exc, RuntimeError) or exc.errno == errno.ELOOP else "is a broken link"
        raise BundleError(f"{relative}: {problem} (it points to {target}); a glob of kernel.toml matched it",
                          hint="remove the link or point it at a file, or leave it out with [code]/[weights] "
                               "exclude") from None


def refuse_credentials(files: dict[str, Path], what: str, secrets: Sequence[Secret] = (),
                       scans: CleanScans | None = None, hashes: HashCache | None = None) -> None:
    """Stop the build on anything that looks like a secret, naming the file and the member (never the secret):
    credential file names, in archives too, then in every container the file is
    (:func:`builder.bundle.secret_scan.views`) the values of ``secrets`` (named as the credential in use) and
    every key of :data:`builder.bundle.secret_scan.PATTERNS`. A content ``scans`` found clean for these
    secrets (its sha256 known from ``hashes``) is not read again; one found clean now is added."""
    for relative, path in files.items():
        if _credential_name(relative):
            raise BundleError(f"{relative}: looks like a credential file; refusing to put it in the {what} dataset",
                              hint=f"remove it from [{what}] include, or add it to [{what}] exclude")
        if is_archive(relative):  # first: a member's name says more than what it holds
            with path.open("rb") as handle:
                for member in members(relative, handle):
                    _refuse_member_name(member, relative, what)
        sha = hashes.lookup(path) if hashes is not None and scans is not None else None
        if sha is not None and scans is not None and scans.known_clean(sha):
            continue
        found = find_key(path, relative, secrets)
        if found is None and sha is not None and scans is not None:
            scans.add(sha)
        if found is not None:
            hint = ("read secrets from Kaggle Secrets or the environment, never from bundled files" if found.pattern else
                    f"remove the value from the file, or leave the file out with [{what}] exclude (a kernel reads "
                    "secrets from Kaggle Secrets, never from its files)")
            raise BundleError(f"{found.where} {found.what}; refusing to put it in the {what} dataset", hint=hint)


def _credential_name(relative: str) -> bool:
    name = PurePosixPath(relative).name
    return name in CREDENTIAL_NAMES or name.startswith(".env") or PurePosixPath(relative).suffix in CREDENTIAL_SUFFIXES


def _refuse_member_name(member: Member, relative: str, what: str) -> None:
    if _credential_name(member.chain[-1]):
        raise BundleError(f"{relative}: {member.where} looks like a credential file; refusing to put it in the "
                          f"{what} dataset",
                          hint=f"take it out of the archive, or the archive out of [{what}] include")


def refuse_secret_values(folder: Path, what: str, secrets: Sequence[Secret], fix: str, patterns: bool = False) -> None:
    """Stop the build when a file under ``folder`` (``what``, staged) holds one of ``secrets``, or with ``patterns``
    any key of :data:`builder.bundle.secret_scan.PATTERNS`; ``fix`` is the hint.

    Reads every file whole, and what it contains (:func:`builder.bundle.secret_scan.views`: archive members,
    decoded str arrays, decompressed pickles), in chunks that overlap, so a value split across two chunks is
    still found. Names the file, the member and what it holds (a credential in use first); never the value.
    """
    if not (patterns or any(secret.value for secret in secrets)) or not folder.is_dir():
        return
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        found = find_key(path, path.relative_to(folder).as_posix(), secrets, patterns=patterns)
        if found is not None:
            raise BundleError(f"{found.where} {found.what}; refusing to put it in the {what}",
                              hint=f"{fix} (a kernel reads secrets from Kaggle Secrets, never from its files)")


class HashCache:
    """sha256 by (size, mtime): a rebuild with nothing changed reads stat data, not file contents."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, list[Any]] = {}  # [size, mtime_ns, sha256]
        if path is not None and path.is_file():
            try:
                self.entries = json.loads(path.read_text())
            except ValueError:
                self.entries = {}

    def lookup(self, source: Path) -> str | None:
        stat = source.stat()
        hit = self.entries.get(str(source))
        return hit[2] if hit and hit[0] == stat.st_size and hit[1] == stat.st_mtime_ns else None

    def store(self, source: Path, sha256: str) -> None:
        stat = source.stat()
        self.entries[str(source)] = [stat.st_size, stat.st_mtime_ns, sha256]

    def save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps(self.entries, sort_keys=True))
            os.replace(partial, self.path)


def copy_and_hash(source: Path, target: Path) -> str:
    """One read of the source for both the copy and the hash."""
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as src, target.open("wb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def stage_files(files: dict[str, Path], stage: Path, cache: HashCache, previous: Path | None = None) -> None:
    """Copy ``files`` into ``stage``; unchanged files are hard-linked from the previous build instead."""
    previous_manifest = Manifest.read(previous / MANIFEST_FILE) if previous else None
    previous_hashes = {entry.path: entry.sha256 for entry in previous_manifest.files} if previous_manifest else {}
    for relative, source in files.items():
        target = stage / relative
        known = cache.lookup(source)
        if known is not None and previous is not None and previous_hashes.get(relative) == known and _link(previous / relative, target):
            continue
        cache.store(source, copy_and_hash(source, target))


def _link(existing: Path, target: Path) -> bool:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(existing, target)
        return True
    except OSError:
        return False


def manifest_for(stage: Path, dataset: str, cache: HashCache | None = None,
                 sources: dict[str, Path] | None = None) -> Manifest:
    """The manifest of everything staged (metadata and manifest files excluded)."""
    entries = []
    for path in sorted(p for p in stage.rglob("*") if p.is_file()):
        relative = path.relative_to(stage).as_posix()
        if relative in (MANIFEST_FILE, METADATA_FILE):
            continue
        source = (sources or {}).get(relative)
        sha = cache.lookup(source) if cache is not None and source is not None else None
        entries.append(FileEntry(relative, path.stat().st_size, sha or hash_file(path)))
    return Manifest(dataset, tuple(entries), link_targets(sources or {}))


def write_metadata(stage: Path, dataset: str, title: str, manifest: Manifest) -> None:
    metadata = {"id": dataset, "title": title, "licenses": [{"name": LICENSE}]}
    (stage / METADATA_FILE).write_text(json.dumps(metadata, indent=1, sort_keys=True) + "\n")
    (stage / MANIFEST_FILE).write_text(manifest.to_json())


def copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)


def swap_into_place(stage: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` with ``stage``; the old build goes only after the new one is in place."""
    old = out_dir.with_name(f".{out_dir.name}-old")
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.rename(old)
    stage.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
