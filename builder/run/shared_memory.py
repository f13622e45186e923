"""A sandbox's ``/dev/shm``: memory the run's processes do not map, which Kaggle's container counts all the same.

Files in a tmpfs are pages of RAM. In Kaggle's container ``/dev/shm`` is charged to the container's memory cgroup, so
1.5 GB written there under a 800 MB limit ends the run as any allocation would; summed PSS sees only the pages a
process maps. Each namespaced sandbox has its own ``/dev/shm`` (a tmpfs sized to the run's memory limit by both
launchers), reached from the host through any of the run's processes (``/proc/<pid>/root/dev/shm``): what it holds is
added to the run's memory, less what the processes map of it already (``Pss_Shmem``), so a DataLoader's shared tensors
still count once.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable


@functools.cache
def _host_shm() -> int | None:
    try:
        return os.stat("/dev/shm").st_dev
    except OSError:
        return None


def sandbox_shm_bytes(pids: Iterable[int]) -> int:
    """Bytes held in the ``/dev/shm`` of the sandboxes the processes ``pids`` run in (the host's own never counts)."""
    seen: set[int] = set()
    total = 0
    for pid in pids:
        folder = f"/proc/{pid}/root/dev/shm"
        try:
            device = os.stat(folder).st_dev
            if device == _host_shm() or device in seen:
                continue
            usage = os.statvfs(folder)
        except OSError:
            continue
        seen.add(device)
        total += (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    return total


__all__ = ["sandbox_shm_bytes"]
