"""The user's error in a failed step's output: the exception and where in the user's own code it was raised.

A step that dies on an exception in the user's code (a feature or encode function, a factory, ``predict.py``) prints
Python's traceback, mostly frames of kkb's runtime and the libraries. :func:`user_error` reads it back as one line:
``KeyError: 'x' (tabkernel/features.py, line 22, in make: return table["x"])``, the innermost frame in the code
dataset (``kkb_runtime`` excluded), so the step's error, the notebook's log and the dry run's verdict name the
user's file, line and code first; :func:`raised` words an exception caught in the notebook's own process (a
post-processing function's) the same way.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b|^[A-Z]\w+:")
RUNTIME_PACKAGE = "kkb_runtime"


def user_error(output: str, code_dir: Path) -> str | None:
    """The last traceback in ``output`` as ``Type: message (file, line N, in function: code)``, its frame the innermost
    one in ``code_dir`` (outside kkb's runtime); the exception line alone when no frame is the user's; None without a
    traceback."""
    lines = output.splitlines()
    # The last traceback that ended the program: not one Python printed and went on from ("Exception ignored in").
    start = max((index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")
                 and not (index and lines[index - 1].startswith("Exception ignored in"))), default=None)
    if start is None:
        return None
    frame, exception = None, None
    for index in range(start + 1, len(lines)):
        match = _FRAME.match(lines[index])
        if match:
            where = _in_code(match.group("file"), Path(code_dir))
            if where is not None:
                code = lines[index + 1].strip() if index + 1 < len(lines) and not _FRAME.match(lines[index + 1]) else ""
                frame = f"{where}, line {match.group('line')}, in {match.group('function')}" + (f": {code}" if code else "")
        elif not lines[index].startswith((" ", "\t")) and _EXCEPTION.match(lines[index]):
            exception = lines[index].strip()
            break  # what follows is not this traceback's
    if exception is None:
        return None
    return f"{exception} ({frame})" if frame else exception


def raised(error: BaseException, code_dir: Path | None) -> str:
    """An exception of the user's code caught in this process, the same way: ``Type: message (file, line N, in f: code)``,
    the innermost frame in ``code_dir``."""
    said = f"{type(error).__name__}: {error}"
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if code_dir is not None and _in_code(frame.filename, Path(code_dir)) is not None]
    if not frames or code_dir is None:
        return said
    frame = frames[-1]
    code = f": {frame.line.strip()}" if frame.line else ""
    return f"{said} ({_in_code(frame.filename, Path(code_dir))}, line {frame.lineno}, in {frame.name}{code})"


def _in_code(file: str, code_dir: Path) -> str | None:
    """``file`` relative to the code dataset, None when it is elsewhere or kkb's runtime."""
    try:
        relative = Path(file).relative_to(code_dir)
    except ValueError:
        return None
    return None if relative.parts[:1] == (RUNTIME_PACKAGE,) else relative.as_posix()


__all__ = ["raised", "user_error"]
