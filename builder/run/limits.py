"""The machine's memory and disk, as the dry run enforces them, and how honestly it can.

Kaggle kills a session that uses more RAM than its machine shape has and stops one whose output
outgrows what ``/kaggle/working`` keeps; both end as "Notebook Exceeded Allowed Compute". Locally:

- **Memory**: the whole run's memory, counted as the container's cgroup counts it (a delegated cgroup
  v2 controller, else the sampled sum of PSS over the kernel's process tree: shared pages once), is
  limited to the shape's RAM (``--memory`` overrides); past it the whole run is ended, as Kaggle's OOM
  killer ends the container (:mod:`builder.run.memory`). Address space is never limited.
- **Disk**: ``/kaggle/working`` is measured while the run goes and the run is killed when it passes
  :data:`WORKING_LIMIT_BYTES`, what Kaggle's starter notebooks say it keeps (20 GB).

Anything not enforced is said so in the report (:func:`memory_enforcement`), never silently skipped.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import MemoryAccounting
from builder.run.memory import DESCRIPTIONS, choose_accounting

GB = 1000**3
GIB = 1024**3
# "You can write up to 20GB to the current directory (/kaggle/working/) that gets preserved as output"
# (Kaggle's starter cell; older notebooks say 5GB). See docs: kaggle-runtime notes, section 1.2.
WORKING_LIMIT_BYTES = 20 * GB
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Enforcement:
    """What the sandbox enforces for one limit, in words for the report."""

    limit_bytes: int | None
    enforced: bool
    how: str


def parse_size(text: str, what: str = "--memory") -> int:
    """``16G``, ``16GiB``, ``512M``, ``2000000000`` → bytes (K/M/G/T are powers of 1024)."""
    match = _SIZE.match(str(text))
    if not match:
        raise DryRunError(f"{what}: '{text}' is not a size", hint="e.g. 16G, 512M or a number of bytes")
    number, unit = float(match.group(1)), match.group(2).upper()
    value = int(number * 1024 ** ("KMGT".find(unit) + 1)) if unit else int(number)
    if value <= 0:
        raise DryRunError(f"{what}: '{text}' must be positive")
    return value


def memory_enforcement(limit_bytes: int | None, accounting: MemoryAccounting | None = None) -> Enforcement:
    """How the memory limit was applied (``accounting``: what the run used; None: what this machine would use)."""
    if not limit_bytes:
        return Enforcement(None, False, "no memory limit")
    choice = choose_accounting(limit_bytes)
    kind = accounting or choice.kind
    how = f"{size_text(limit_bytes)}, {kind}: {DESCRIPTIONS[kind]}"
    if accounting is None and choice.skipped:
        how += f" (not used: {'; '.join(choice.skipped)})"
    elif kind != MemoryAccounting.CGROUP and not sys.platform.startswith("linux"):
        how += f" (no PSS on {sys.platform})"
    return Enforcement(limit_bytes, kind != MemoryAccounting.NONE, how)


def working_enforcement(limit_bytes: int | None) -> Enforcement:
    if not limit_bytes:
        return Enforcement(None, False, "no limit on /kaggle/working")
    return Enforcement(limit_bytes, True, "measured every 2 s while the run goes; the run is killed past it")


def size_text(value: int) -> str:
    if value >= GIB:
        return f"{value / GIB:.1f} GiB"
    return f"{value / 1024**2:.0f} MiB"


def duration_text(seconds: float) -> str:
    """A run time in the unit a person reads it in: ``41.0 s``, ``12.5 min``, ``8.99 h``."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
