"""What kkb reads from and writes to a sandbox's folders never leads outside them: kkb follows no link the kernel made.

A step of a notebook nobody has read can leave a symbolic link where kkb later reads (its submission swapped for a
link to ``/proc/self/environ``: kkb's own environment) or writes (the executed notebook's path pointing at a file
of this machine), or a FIFO that blocks whoever opens it. Two rules keep kkb out of that:

- while a run goes, kkb reads the files it watches (the calls a program records, a supervisor's record) only with
  :func:`read_regular`: opened without following a link, without blocking, a regular file or nothing;
- when the run has ended (none of its processes left: the namespaces' own end, or kkb's kill of the whole tree),
  :func:`seal` removes every symbolic link and special file the run left in the sandbox, and names them: after it,
  nothing kkb reads, copies or writes there can lead out, and nothing can change it any more. kkb's own outputs (the
  executed notebook) are written after the seal, beside the sandbox root, in a folder the kernel never had.

The overlay's upper layers (the kernel's changes to the system folders, discarded with the sandbox) are not read and
not walked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SKIPPED = ("upper", "upper-tmpfs", "newroot")  # under the private folder: never read by kkb, removed with the sandbox
READ_LIMIT = 64 << 20  # what kkb reads of one file it watches while a run goes
_SOCKET = "(a socket)"


def read_regular(path: Path, limit: int = READ_LIMIT) -> bytes | None:
    """The first ``limit`` bytes of ``path`` when it is a regular file, opened without following a link or blocking;
    None for a link, a FIFO, a device, a folder or nothing there."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(handle, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(handle)


def read_regular_text(path: Path, limit: int = READ_LIMIT) -> str:
    """:func:`read_regular` as text ("" where it gives nothing)."""
    data = read_regular(path, limit)
    return data.decode("utf-8", errors="replace") if data is not None else ""


def in_working(path: str, working_dir: Path) -> Path | None:
    """A file a run's record names (a step's ``output``), where kkb may read it: under the run's working folder, as
    ``/kaggle/working/...`` or at the folder's own path; None for any other path (a record is the kernel's writing, and
    could name any file of this machine)."""
    text = os.path.normpath(path) if path else ""
    for base in ("/kaggle/working", os.path.normpath(working_dir)):
        if text.startswith(base + os.sep):
            return Path(working_dir) / os.path.relpath(text, base)
    return None


def seal(root: Path, private: str = ".sandbox") -> tuple[str, ...]:
    """After a run: every symbolic link and special file (FIFO, socket, device) under ``root`` removed; what each was,
    in words (``working/submission.csv -> /proc/self/environ``), sorted. Call it only when no process of the run is
    left."""
    root = Path(root)
    removed: list[str] = []
    skipped = {os.path.join(root, private, name) for name in SKIPPED}
    for folder, folders, files in os.walk(root, followlinks=False):
        folders[:] = [name for name in folders if os.path.join(folder, name) not in skipped]
        for name in [*folders, *files]:
            path = os.path.join(folder, name)
            said = _left(path)
            if said is None:
                continue
            try:
                os.unlink(path)
            except OSError:
                continue  # a read-only mount point in the portable mode's copy: nothing kkb reads
            if said != _SOCKET:  # a socket is the kernel's own channel to kkb (Jupyter's), nothing planted
                removed.append(f"{os.path.relpath(path, root)} {said}")
    return tuple(sorted(removed))


def _left(path: str) -> str | None:
    """What a file is when it is no regular file or folder (a link: where it points), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            return f"-> {os.readlink(path)}"
        except OSError:
            return "-> ?"
    if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return None
    kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else _SOCKET[1:-1] if stat.S_ISSOCK(info.st_mode)
            else "a device node" if stat.S_ISBLK(info.st_mode) or stat.S_ISCHR(info.st_mode) else "a special file")
    return f"({kind})"


__all__ = ["in_working", "read_regular", "read_regular_text", "seal"]
