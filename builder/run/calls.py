"""Which call a sandboxed program is in: what names a function that ran out of time, or a crash.

The program (inside the sandbox) wraps each piece of user code it runs in :func:`calling`; each start and end is
one JSON line appended to the file ``$KKB_RUN_CALLS`` names. kkb (outside) reads the file while the program runs
(:func:`open_calls`): the innermost call still open is the one to name when its time is up or the process dies.
Outside a sandboxed run (no ``$KKB_RUN_CALLS``) :func:`calling` records nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from builder.run.sandbox_files import read_regular_text

CALLS_VARIABLE = "KKB_RUN_CALLS"


@dataclass(frozen=True)
class Call:
    """One piece of user code: what it is (``the feature function``), its card, the function or file it runs."""

    what: str
    card: str | None = None
    function: str | None = None  # "package.module:function"
    file: str | None = None  # a file it loads, relative to the kernel folder
    hint: str | None = None  # what to do when it crashed or hung
    started: float = 0.0  # time.monotonic() in the program (one clock for every process of the machine)

    @property
    def subject(self) -> str:
        """The function, else the file, else what it is: the name a message gives."""
        return self.function or self.file or self.what


@contextmanager
def calling(what: str, *, card: str | None = None, function: str | None = None, file: str | None = None,
            hint: str | None = None) -> Iterator[None]:
    """Record the call around the body (nothing outside a sandboxed run)."""
    record = os.environ.get(CALLS_VARIABLE)
    if not record:
        yield
        return
    entry = {"what": what, "card": card, "function": function, "file": file, "hint": hint}
    _append(Path(record), {"start": time.monotonic(), **entry})
    try:
        yield
    finally:  # a crash (a signal) never gets here: the call stays open, and kkb names it
        _append(Path(record), {"end": time.monotonic(), **entry})


def _append(path: Path, entry: dict[str, object]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()


def open_calls(path: Path) -> list[Call]:
    """The calls started and not ended, outermost first (an unreadable line is skipped)."""
    stack: list[Call] = []
    lines = read_regular_text(path).splitlines()  # the program writes it: a link or a FIFO there is read as nothing
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        call = Call(str(entry.get("what")), entry.get("card"), entry.get("function"), entry.get("file"), entry.get("hint"),
                    float(entry.get("start") or 0.0))
        if "start" in entry:
            stack.append(call)
        elif stack:
            stack.pop()
    return stack


__all__ = ["CALLS_VARIABLE", "Call", "calling", "open_calls"]
