"""One scanner for keys in every container kkb ships, with one pattern table.

What a file holds is looked at through *views* (:func:`views`): the file's own bytes, all of them;
every member of a zip or tar archive (all of tarfile's compressions, ``.npz`` too, nested, bounded by
:mod:`builder.bundle.archives`); the text of a NumPy ``str`` array (``.npy``, alone or in an ``.npz``:
numpy stores it as UTF-32, which a byte scan for ASCII misses), decoded; and the decompressed bytes
of a gzip/zlib/bz2/xz stream (a compressed ``.joblib`` or ``.pkl``). Pickles are read as bytes and
never unpickled (a pickled object array's strings are UTF-8 in the pickle). Parquet, Feather/Arrow
metadata and a safetensors header are plain bytes of the file, so the file's own view holds them.

Each view is searched for :data:`PATTERNS` (Kaggle legacy keys and ``KGAT_`` tokens, AWS access keys,
GitHub and Hugging Face tokens, private keys) and for the literal values of the credentials in use
(:func:`builder.project.credentials.secret_values`). A pattern is found by a fast ``bytes.find`` of its
anchor, then its regular expression around each hit, so a multi-GB checkpoint costs a few reads, not
a regex pass. A finding names the file, the member and what it holds, never the value.
"""

from __future__ import annotations

import ast
import bz2
import contextlib
import lzma
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.bundle.archives import MEMBER_LIMIT, Member, is_archive, members
from builder.project.credentials import Secret

CHUNK = 8 * 1024 * 1024
WINDOW = 512  # bytes searched around an anchor, and kept between chunks
# A file's own bytes are searched for the patterns all through up to this size; past it, the first and last
# chunks (where headers and footers keep metadata: safetensors, parquet, arrow, zip) and every decoded view.
# The values of the credentials in use are searched all through, whatever the size (a plain find is cheap).
PATTERN_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class KeyPattern:
    """A kind of key: literal anchors found fast, the expression checked around them, what a message calls it."""

    anchors: tuple[bytes, ...]
    regex: re.Pattern[bytes]
    what: str


PATTERNS: tuple[KeyPattern, ...] = (
    KeyPattern((b"KAGGLE_KEY",), re.compile(rb"KAGGLE_KEY\s*[=:]"), "sets KAGGLE_KEY"),
    KeyPattern((b"KAGGLE_API_TOKEN",), re.compile(rb"KAGGLE_API_TOKEN\s*[=:]"), "sets KAGGLE_API_TOKEN"),
    KeyPattern((b"PRIVATE KEY-----",), re.compile(rb"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"), "holds a private key"),
    # kaggle.json's key, also as an escaped JSON string inside other JSON (a safetensors or parquet metadata value)
    KeyPattern((b'"key',), re.compile(rb'"key\\?"\s*:\s*\\?"[0-9a-f]{32}\\?"'), "holds a Kaggle API key"),
    KeyPattern((b"KGAT_",), re.compile(rb"(?<![0-9A-Za-z_])KGAT_[0-9A-Za-z]{16,}"), "holds a Kaggle API token (KGAT_…)"),
    KeyPattern((b"AKIA", b"ASIA"), re.compile(rb"(?<![0-9A-Z])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
               "holds an AWS access key"),
    KeyPattern((b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"),
               re.compile(rb"(?<![0-9A-Za-z_])(?:gh[pousr]_[0-9A-Za-z]{36,}|github_pat_[0-9A-Za-z_]{22,})"),
               "holds a GitHub token"),
    KeyPattern((b"hf_",), re.compile(rb"(?<![0-9A-Za-z_])hf_[0-9A-Za-z]{34}(?![0-9A-Za-z])"), "holds a Hugging Face token"),
)

NPY_MAGIC = b"\x93NUMPY"
PICKLE_MAGIC = b"\x80"  # protocol 2 and later
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".gz", ".z", ".bz2", ".xz", ".lzma")


@dataclass(frozen=True)
class Finding:
    """Where a key is (``weights/a.npz: member names.npy``) and what it is (``holds a GitHub token``)."""

    where: str
    what: str
    pattern: bool = True  # a kind of key (PATTERNS), not the value of a credential in use


def find_key(path: Path, relative: str, secrets: Sequence[Secret] = (), patterns: bool = True) -> Finding | None:
    """The first key in ``path`` (shipped as ``relative``): a :data:`PATTERNS` match, or one of ``secrets``."""
    needles = [(secret, secret.value.encode()) for secret in secrets if secret.value]
    found: Finding | None = None
    for where, data, searched in views(path, relative):
        for secret, needle in needles:  # a credential in use is named as such, wherever a pattern matched first
            if needle in data:
                return Finding(where, f"holds {secret.what}", pattern=False)
        what = matching_pattern(data) if patterns and searched and found is None else None
        if what is not None:
            found = Finding(where, what)
    return found


def matching_pattern(data: bytes) -> str | None:
    """What the first key of :data:`PATTERNS` in ``data`` is, or None."""
    for pattern in PATTERNS:
        for anchor in pattern.anchors:
            start = data.find(anchor)
            while start != -1:
                if pattern.regex.search(data, max(0, start - 64), start + WINDOW):
                    return pattern.what
                start = data.find(anchor, start + 1)
    return None


def views(path: Path, relative: str) -> Iterator[tuple[str, bytes, bool]]:
    """(where, bytes, searched for the patterns) for everything in the file: an archive's members first (naming
    the member says more), then the file's own bytes in overlapping chunks (see :data:`PATTERN_LIMIT`), then
    its decoded text (a str array, a compressed pickle)."""
    if is_archive(relative):
        with path.open("rb") as handle:
            for member in members(relative, handle):
                for where, data in member_views(member, f"{relative}: {member.where}"):
                    yield where, data, True
    size, tail, offset = path.stat().st_size, b"", 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            searched = size <= PATTERN_LIMIT or offset < CHUNK or offset + len(chunk) > size - CHUNK
            yield relative + ":", tail + chunk, searched
            tail, offset = chunk[-WINDOW:], offset + len(chunk)
    if relative.lower().endswith((".npy", *PICKLE_SUFFIXES)):
        with path.open("rb") as handle:
            head = handle.read(MEMBER_LIMIT)
        for where, data in _decoded(head, relative + ":"):
            yield where, data, True


def member_views(member: Member, where: str) -> Iterator[tuple[str, bytes]]:
    """A member's bytes, and their decoded text where it has some (a str array, a compressed stream)."""
    yield where, member.data
    yield from _decoded(member.data, where)


def _decoded(data: bytes, where: str) -> Iterator[tuple[str, bytes]]:
    text = npy_text(data)
    if text is not None:
        yield where, text
    inflated = decompressed(data)
    if inflated is not None:
        yield where, inflated
        data = inflated
    if data.startswith(PICKLE_MAGIC):  # a numpy str array inside a pickle is raw UTF-32: every 4th byte is its ASCII
        for offset in range(4):
            yield where, data[offset::4]


def decompressed(data: bytes) -> bytes | None:
    """The first :data:`MEMBER_LIMIT` bytes of a gzip, zlib, bz2 or xz/lzma stream (joblib's compressors), else None."""
    with contextlib.suppress(OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        if data.startswith((b"\x1f\x8b", b"\x78")):
            return zlib.decompressobj(zlib.MAX_WBITS | 32).decompress(data, MEMBER_LIMIT)
        if data.startswith(b"BZh"):
            return bz2.BZ2Decompressor().decompress(data, max_length=MEMBER_LIMIT)
        if data.startswith((b"\xfd7zXZ", b"]\x00\x00")):
            return lzma.LZMADecompressor().decompress(data, max_length=MEMBER_LIMIT)
    return None


def npy_text(data: bytes) -> bytes | None:
    """The UTF-8 text of a ``.npy`` holding a ``str`` (UTF-32) array, else None (other dtypes are bytes already)."""
    if not data.startswith(NPY_MAGIC) or len(data) < 10:
        return None
    major = data[6]
    size_bytes = 2 if major == 1 else 4
    start = 8 + size_bytes
    length = int.from_bytes(data[8:start], "little")
    try:
        header = ast.literal_eval(data[start:start + length].decode("latin-1"))
        descr = header["descr"]
    except (ValueError, SyntaxError, KeyError, TypeError):
        return None
    if not isinstance(descr, str) or descr[1:2] != "U":
        return None
    encoding = "utf-32-be" if descr.startswith(">") else "utf-32-le"
    body = data[start + length:]
    body = body[:len(body) - len(body) % 4]
    return body.decode(encoding, errors="replace").encode("utf-8", errors="replace")
