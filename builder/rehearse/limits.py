"""The machine's memory and disk, as the dry run enforces them, and how honestly it can.

Kaggle kills a session that uses more RAM than its machine shape has and stops one whose output
outgrows what ``/kaggle/working`` keeps; both end as "Notebook Exceeded Allowed Compute". Locally:

- **Memory**: every process of the run gets ``RLIMIT_DATA`` = the shape's RAM (``--memory`` overrides)
  through the sandbox launcher, so an allocation past it fails with ``MemoryError`` as the OOM killer
  would have stopped it. It is a per-process limit: several processes that together pass the limit
  are not stopped (a cgroup would be), so the sampled sum of their RSS is judged afterwards too. A
  cgroup v2 limit would be exact; kkb reports when the machine would allow it but does not use it yet.
- **Disk**: ``/kaggle/working`` is measured while the run goes and the run is killed when it passes
  :data:`WORKING_LIMIT_BYTES`, what Kaggle's starter notebooks say it keeps (20 GB).

Anything not enforced is said so in the report (:func:`memory_enforcement`), never silently skipped.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from builder.errors import DryRunError

GB = 1000**3
GIB = 1024**3
# "You can write up to 20GB to the current directory (/kaggle/working/) that gets preserved as output"
# (Kaggle's starter cell; older notebooks say 5GB). See docs: kaggle-runtime notes, section 1.2.
WORKING_LIMIT_BYTES = 20 * GB
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)
CGROUP_ROOT = Path("/sys/fs/cgroup")


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


def memory_enforcement(limit_bytes: int | None) -> Enforcement:
    """How the memory limit is applied on this machine (the launcher sets RLIMIT_DATA everywhere on POSIX)."""
    if not limit_bytes:
        return Enforcement(None, False, "no memory limit")
    if not sys.platform.startswith("linux"):  # macOS ignores RLIMIT_DATA for mmap'd memory: numpy's arrays
        return Enforcement(limit_bytes, False, f"not enforced on {sys.platform}: peak RSS is judged afterwards only")
    how = "RLIMIT_DATA per process (a step past it gets MemoryError); the sum over processes is judged from sampled RSS"
    if cgroup_v2_memory():
        how += "; cgroup v2 memory is delegated here but not used yet"
    else:
        how += "; no delegated cgroup v2 memory controller here"
    return Enforcement(limit_bytes, True, how)


def cgroup_v2_memory() -> bool:
    """True when a cgroup v2 memory controller is mounted and this process's cgroup is writable."""
    controllers = CGROUP_ROOT / "cgroup.controllers"
    try:
        if "memory" not in controllers.read_text().split():
            return False
        relative = Path("/proc/self/cgroup").read_text().strip().splitlines()[-1].split(":", 2)[2].lstrip("/")
    except (OSError, IndexError):
        return False
    own = CGROUP_ROOT / relative
    return os.access(own / "cgroup.subtree_control", os.W_OK)


def working_enforcement(limit_bytes: int | None) -> Enforcement:
    if not limit_bytes:
        return Enforcement(None, False, "no limit on /kaggle/working")
    return Enforcement(limit_bytes, True, "measured every 2 s while the run goes; the run is killed past it")


def size_text(value: int) -> str:
    if value >= GIB:
        return f"{value / GIB:.1f} GiB"
    return f"{value / 1024**2:.0f} MiB"
