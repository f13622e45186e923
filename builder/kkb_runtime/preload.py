"""Work the run starts in a background thread (the sample's read, with pandas' import) and the wait for it.

Anything that changes the installed packages waits first (:func:`settle`): a module imported while pip rewrites
its folder could load half of an old and half of a new version. Standard library only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_RUNNING: list[threading.Thread] = []


def in_background(work: Callable[[], None], name: str) -> threading.Thread:
    """``work`` started in a daemon thread (it keeps its own errors: see ``kkb_runtime.SampleRead``)."""
    thread = threading.Thread(target=work, name=name, daemon=True)
    _RUNNING.append(thread)
    thread.start()
    return thread


def settle() -> None:
    """Wait for the background work started so far."""
    while _RUNNING:
        _RUNNING.pop().join()
