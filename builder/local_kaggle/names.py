"""The one gate for names that arrive in a request and may become part of a path under the data folder.

An audit created a dataset whose directory was called ``../../x`` and the server wrote there. Every
name the client controls now passes through this module before it touches the disk, the same way
whatever it names:

* **slugs** (owners, datasets, kernels, competitions): Kaggle's ``[a-z0-9]`` runs joined by ``-``;
* **file names** (blob names, dataset directory names, a file asked for in a download): one path
  segment, no ``/`` or ``\\``, not ``.``/``..``, no control characters, at most 255 bytes;
* **relative paths** (archive members, a file inside a dataset version): segments that are each a
  valid file name; archive members may use ``\\`` (zips made on Windows) and ``./`` (tar's habit);
* and, as a last line, :func:`inside`: a path resolved under a root must stay under it (symlinks).

A refusal is an :class:`~builder.local_kaggle.wire.ApiError` 400 that says which name, what it is
and why, e.g. ``Invalid directory name '..': '.' and '..' are not names``.
"""

from __future__ import annotations

import re
from pathlib import Path

from builder.local_kaggle.wire import ApiError

# Kaggle's slugs: lowercase letters, digits and '-', no leading or trailing '-'.
SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
MAX_SLUG = 100
MAX_NAME_BYTES = 255
MAX_PATH_DEPTH = 32
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_slug(value: str) -> bool:
    return bool(value) and len(value) <= MAX_SLUG and bool(SLUG.match(value))


def slug(value: str, what: str) -> str:
    """``value`` when it is a Kaggle slug; otherwise a 400 naming ``what`` (``"dataset slug"``...)."""
    if not is_slug(value):
        raise ApiError(400, f"Invalid {what} {value!r}: use lower-case letters, digits and '-' "
                            f"(not at the start or end), at most {MAX_SLUG} characters")
    return value


def file_name(value: str, what: str) -> str:
    """``value`` when it is one safe path segment; otherwise a 400 naming ``what`` (``"blob name"``...)."""
    problem = _segment_problem(value)
    if problem:
        raise ApiError(400, f"Invalid {what} {value!r}: {problem}")
    return value


def relative_path(value: str, what: str, *, archive: str | None = None) -> str:
    """``value`` as a clean posix path of safe segments (``a/b.csv``); otherwise a 400 naming ``what``.

    For a member of the archive named ``archive`` (zip or tar) ``\\`` counts as ``/`` and ``.`` segments
    are dropped, since archivers write ``dir\\file`` and ``./file``; ``..`` and absolute paths are
    refused either way.
    """
    where = f" in {archive}" if archive else ""
    text = value.replace("\\", "/") if archive else value
    if text.startswith("/") or re.match(r"^[A-Za-z]:[/\\]", value):  # "/x", or a Windows drive: "C:\\x"
        raise ApiError(400, f"Invalid {what} {value!r}{where}: an absolute path")
    parts = [part for part in text.split("/") if not (archive and part in (".", ""))]
    if not parts:
        raise ApiError(400, f"Invalid {what} {value!r}{where}: an empty path")
    if len(parts) > MAX_PATH_DEPTH:
        raise ApiError(400, f"Invalid {what} {value!r}{where}: more than {MAX_PATH_DEPTH} levels deep")
    for part in parts:
        problem = _segment_problem(part)
        if problem:
            raise ApiError(400, f"Invalid {what} {value!r}{where}: {problem}")
    return "/".join(parts)


def inside(root: Path, rel: str, what: str) -> Path:
    """``root / rel`` resolved, refused (400) unless it is still under ``root`` (e.g. through a symlink)."""
    base = root.resolve()
    target = (base / relative_path(rel, what)).resolve()
    if target != base and base not in target.parents:
        raise ApiError(400, f"Invalid {what} {rel!r}: it leads outside its folder")
    return target


def _segment_problem(value: str) -> str | None:
    if not value:
        return "an empty name"
    if value in (".", ".."):
        return "'.' and '..' are not names"
    if "/" in value or "\\" in value:
        return "a name cannot contain '/' or '\\'"
    if _CONTROL.search(value):
        return "a name cannot contain control characters"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes"
    return None
