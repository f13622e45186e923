"""Other work on this machine, for the tests of what a busy machine does to a run: spinning processes on one CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def first_cpu() -> int:
    """The first CPU this process may run on (its children inherit the affinity)."""
    return min(os.sched_getaffinity(0))


def burner(cpu: int, seconds: float | None = None, own_session: bool = False) -> subprocess.Popen[bytes]:
    """A process spinning on ``cpu``: for ``seconds`` of its own CPU time, or until killed (``None``)."""
    spin = "while True:\n    pass\n" if seconds is None else (
        f"import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end:\n    pass\n")
    return subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n{spin}"],
                            start_new_session=own_session)


@contextmanager
def busy_loops(count: int, cpu: int | None = None, own_sessions: bool = True) -> Iterator[None]:
    """``count`` processes spinning on ``cpu`` (default: the first this process may use) while the body runs.

    ``own_sessions``: each in a session of its own, as other users' work is (Linux's autogroup shares a CPU between
    sessions first: loops in the test's own session would only compete with the test's own processes)."""
    loops = [burner(first_cpu() if cpu is None else cpu, own_session=own_sessions) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
