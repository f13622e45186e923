"""Memory as Kaggle's container counts it: shared pages once, the whole run ended past the limit.

Real processes, no notebook: a parent that shares an mmap with forked workers, and one that grows.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from builder.kkb_runtime.vocabulary import MemoryAccounting
from builder.run import memory
from builder.run.limits import memory_enforcement
from builder.run.memory import (
    ACCOUNTANTS,
    AVAILABLE,
    DESCRIPTIONS,
    CgroupAccountant,
    MemoryWatch,
    PssAccountant,
    RssAccountant,
    cgroup_events,
    choose_accounting,
)

MIB = 1024**2
needs_pss = pytest.mark.skipif(not memory.pss_readable(), reason="/proc/<pid>/smaps_rollup cannot be read here")

# A parent that fills a 240 MiB shared mapping (a DataLoader's shared table), then forks three workers that
# read every page of it; "ready" once all of them hold it.
SHARED = """
import mmap, os, sys, time
size = 240 * 1024 * 1024
table = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
table.write(b"x" * size)
workers = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        total = sum(table[offset] for offset in range(0, size, 4096))
        time.sleep(60)
        os._exit(0)
    workers.append(pid)
time.sleep(3)
print("ready", flush=True)
time.sleep(60)
"""

GROWS = """
import time
held = []
for _ in range(40):
    held.append(b"x" * (32 * 1024 * 1024))
    time.sleep(0.05)
print("never killed", flush=True)
"""


def test_every_accounting_has_one_entry_in_each_registry() -> None:
    assert set(ACCOUNTANTS) == set(AVAILABLE) == set(DESCRIPTIONS) == set(MemoryAccounting)


@needs_pss
def test_forked_workers_sharing_an_mmap_are_counted_once() -> None:
    process = subprocess.Popen([sys.executable, "-c", SHARED], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
        assert len(tree) == 4
        pss, rss = PssAccountant().sample(tree), RssAccountant().sample(tree)
    finally:
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
        process.kill()
        process.wait()
    assert 240 * MIB <= pss < 400 * MIB, pss  # the table once, plus four small interpreters
    assert rss >= 4 * 240 * MIB  # what the old accounting summed: the table four times


@needs_pss
def test_a_run_growing_past_the_limit_is_ended_whole_and_the_peak_kept() -> None:
    process = subprocess.Popen([sys.executable, "-c", GROWS], stdout=subprocess.PIPE, text=True)
    killed: list[bool] = []

    def kill() -> None:
        killed.append(True)
        process.kill()

    watch = MemoryWatch(process.pid, 300 * MIB, kill, kind=MemoryAccounting.PSS, sample_seconds=0.02).start()
    out, _ = process.communicate(timeout=60)
    watch.close()

    assert killed == [True] and process.returncode == -9 and "never killed" not in out
    assert watch.exceeded and watch.exceeded_at is not None and watch.exceeded_at > 300 * MIB
    assert watch.peak >= watch.exceeded_at and watch.kind == MemoryAccounting.PSS


@needs_pss
def test_a_run_under_the_limit_is_left_alone() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; x = b'x' * (64 * 1024**2); time.sleep(0.5)"])
    watch = MemoryWatch(process.pid, 512 * MIB, process.kill, kind=MemoryAccounting.PSS, sample_seconds=0.02).start()
    process.wait(timeout=60)
    watch.close()
    assert process.returncode == 0 and not watch.exceeded and 64 * MIB <= watch.peak < 512 * MIB


# A root whose child starts a grandchild, prints its pid and exits when told: the grandchild is orphaned.
ORPHANS = """
import subprocess, sys, time
child = ("import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
         "print(g.pid, flush=True); sys.stdin.readline()")
subprocess.Popen([sys.executable, '-c', child]).wait()
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="no /proc here")
def test_the_tree_follows_grandchildren_and_keeps_an_orphan_its_parent_left() -> None:
    root = subprocess.Popen([sys.executable, "-c", ORPHANS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert root.stdin is not None and root.stdout is not None
    grandchild = -1
    try:
        watch = MemoryWatch(root.pid, None, lambda: None, kind=MemoryAccounting.NONE)
        grandchild = int(root.stdout.readline())
        deadline = time.monotonic() + 10
        while len(watch.tree()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        child = next(pid for pid in watch.seen if pid not in (root.pid, grandchild))
        root.stdin.write("exit\n")
        root.stdin.flush()
        while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        # The child is gone; its orphan still counts, as the container still holds it; an unrelated process never.
        assert {process.pid for process in watch.tree()} == {root.pid, grandchild}
        assert {root.pid, child, grandchild} <= set(watch.seen) and os.getpid() not in watch.seen
    finally:
        for pid in (grandchild, root.pid):
            with contextlib.suppress(psutil.Error, ValueError):
                psutil.Process(pid).kill()
        root.wait()


@needs_pss
def test_far_below_the_limit_the_memory_is_read_rarely_but_at_once_when_the_resident_total_grows() -> None:
    grows = "import sys\nsys.stdin.readline()\nx = b'x' * (256 * 1024**2)\nprint('grown', flush=True)\nsys.stdin.readline()\n"
    process = subprocess.Popen([sys.executable, "-c", grows], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    try:
        watch = MemoryWatch(process.pid, 64 * 1024 * MIB, process.kill, kind=MemoryAccounting.PSS)
        watch.tick()
        before = watch.peak
        # Far below the limit a reading of a few milliseconds is repeated after 0.4-2 s, never sooner ...
        assert watch.interval(before, 0.002) == 0.4 and watch.interval(before, 0.025) == 2.0
        # ... and near it as often as the duty cycle allows.
        assert watch.interval(63 * 1024 * MIB, 0.002) == 0.1 and watch.interval(63 * 1024 * MIB, 0.025) == 0.5
        process.stdin.write("grow\n")
        process.stdin.flush()
        assert process.stdout.readline() == "grown\n"
        watch.tick()  # long before the next reading is due: the resident total grew by 256 MiB
        assert watch.peak >= before + 200 * MIB
    finally:
        process.kill()
        process.wait()


def test_growth_up_to_an_earlier_high_waits_for_its_reading_and_past_the_limit_reads_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second step loading the same libraries again grows to the first one's high: read when due, not at once.
    A resident total past the limit is read at once, whenever due (PSS may be past it too)."""
    resident = [100 * MIB]
    monkeypatch.setattr(memory, "resident_bytes", lambda processes: resident[0])
    watch = MemoryWatch(os.getpid(), 2 * 1024 * MIB, lambda: None, kind=MemoryAccounting.PSS)
    readings: list[int] = []

    def read(processes: list[psutil.Process]) -> int:
        readings.append(resident[0])
        return 50 * MIB

    monkeypatch.setattr(watch.accountant, "sample", read)
    for total in (100, 900, 150, 890, 1200, 1950, 2100):  # MiB, one tick each, long before a reading is due
        resident[0] = total * MIB
        watch.tick(processes=[])
    assert [reading // MIB for reading in readings] == [100, 900, 1200, 1950, 2100]  # the last: past the limit alone


def test_a_cgroup_accountant_sets_the_limit_and_reads_the_oom_killer(tmp_path: Path) -> None:
    """Against a folder laid out like a cgroup (the real one needs a delegated controller: skipped below)."""
    accountant = CgroupAccountant(tmp_path, 512 * MIB)
    folder = accountant.folder
    assert (folder / "memory.max").read_text() == str(512 * MIB)
    assert (folder / "memory.swap.max").read_text() == "0" and (folder / "memory.oom.group").read_text() == "1"
    accountant.attach([4242])
    assert (folder / "cgroup.procs").read_text() == "4242"
    (folder / "memory.current").write_text("123456\n")
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert accountant.sample([]) == 123456 and accountant.killed_by_limit()
    assert cgroup_events(folder / "memory.events")["max"] == 3


@pytest.mark.skipif(memory.delegated_cgroup() is None, reason="no delegated cgroup v2 memory controller here")
def test_a_real_cgroup_ends_a_run_past_its_limit() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); " + GROWS.replace("\n", ";")])
    watch = MemoryWatch(process.pid, 200 * MIB, process.kill, kind=MemoryAccounting.CGROUP).start()
    process.wait(timeout=60)
    watch.close()
    assert watch.kind == MemoryAccounting.CGROUP and process.returncode == -9 and watch.exceeded


def test_the_choice_falls_back_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "delegated_cgroup", lambda root=memory.CGROUP_ROOT: None)
    monkeypatch.setattr(memory, "pss_readable", lambda: False)
    choice = choose_accounting(GIB := 1024**3)
    assert choice.kind == MemoryAccounting.NONE
    assert choice.skipped == ("cgroup: no delegated cgroup v2 memory controller here",
                              "pss: /proc/<pid>/smaps_rollup cannot be read here")
    assert memory_enforcement(GIB).how == ("1.0 GiB, none: not enforced while the run goes: the summed RSS is judged "
                                           "afterwards (not used: cgroup: no delegated cgroup v2 memory controller here; "
                                           "pss: /proc/<pid>/smaps_rollup cannot be read here)")
    assert not memory_enforcement(GIB).enforced and memory_enforcement(None).how == "no memory limit"
    monkeypatch.setenv("KKB_MEMORY_ACCOUNTING", "none")
    monkeypatch.setattr(memory, "pss_readable", lambda: True)
    assert choose_accounting(GIB).kind == MemoryAccounting.NONE


def test_the_report_names_the_accounting_that_ran() -> None:
    assert memory_enforcement(2 * 1024**3, MemoryAccounting.PSS).how == (
        "2.0 GiB, pss: the run's summed PSS (shared pages once), read every 0.1-2 s and at once when the resident total "
        "reaches a new high; the whole run is killed past it")


def test_the_watch_remembers_the_tree_it_saw() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"])
    try:
        watch = MemoryWatch(process.pid, None, lambda: None, kind=MemoryAccounting.NONE)
        deadline = time.monotonic() + 10
        while len(watch.tree()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(watch.seen) == 2 and watch.limit is None and watch.sample() > 0
    finally:
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
        process.kill()
        process.wait()
