"""A feature function shared by several cards runs once per kernel run.

Each step is a process of its own, so the cards that name the same ``feature_function`` share its
table through a cache folder the notebook makes for the run (:func:`feature_cache`, under
``/kaggle/temp``: never part of the kernel's output, removed when the steps are done; its path reaches
the steps as ``$KKB_FEATURE_CACHE``). The first card computes the table and writes it with pandas'
pickle (dtypes kept: categoricals stay categoricals for the boosters); the next cards over the same
rows read it. A step without the variable (run by hand, or in an evaluation-API kernel) computes
its own table.

What happened is written in the step's record (``features``: the function, computed or read, by
whom, how long), and :func:`sharing` turns the steps' records into one line per feature function
for the dry run's report.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

CACHE_VARIABLE = "KKB_FEATURE_CACHE"


@contextlib.contextmanager
def feature_cache(root: Path) -> Iterator[Path]:
    """A cache folder for this run's steps (``root/temp/kkb-features-PID``), named to them through the
    environment while they run, removed after."""
    folder = root / "temp" / f"kkb-features-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    saved = os.environ.get(CACHE_VARIABLE)
    os.environ[CACHE_VARIABLE] = str(folder)
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = saved
        shutil.rmtree(folder, ignore_errors=True)


def cache_key(function: str, ids: Sequence[str]) -> str:
    """The function and the rows it ran on (the fast commit's first rows are other rows than the whole test)."""
    digest = hashlib.sha256(function.encode())
    for row_id in ids:
        digest.update(b"\0" + str(row_id).encode())
    return digest.hexdigest()[:24]


def shared_features(function: str, ids: Sequence[str], who: Mapping[str, str], compute: Callable[[], pd.DataFrame],
                    environ: Mapping[str, str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The feature table, computed here or read from the step that computed it, and the step's record of which.

    ``who``: ``{"step": ..., "card": ...}`` of this step, written beside a table it computes."""
    import pandas as pd
    folder = environ.get(CACHE_VARIABLE)
    started = time.perf_counter()
    if folder and Path(folder).is_dir():
        key = cache_key(function, ids)
        table, note = Path(folder) / f"{key}.pkl", Path(folder) / f"{key}.json"
        if table.is_file() and note.is_file():
            frame = pd.read_pickle(table)  # written by an earlier step of this run (below), never by anyone else
            source = json.loads(note.read_text())
            return frame, {"function": function, "computed": False, "computed_by": source["step"],
                           "card": who["card"], "seconds": round(time.perf_counter() - started, 4)}
        frame = compute()
        seconds = round(time.perf_counter() - started, 4)
        partial = table.with_name(f".{table.name}.{os.getpid()}")
        frame.to_pickle(partial)
        os.replace(partial, table)
        note.write_text(json.dumps({"function": function, **who, "seconds": seconds, "rows": len(frame)}))
        return frame, {"function": function, "computed": True, "computed_by": who["step"], "card": who["card"],
                       "seconds": seconds}
    frame = compute()
    return frame, {"function": function, "computed": True, "computed_by": who["step"], "card": who["card"],
                   "seconds": round(time.perf_counter() - started, 4), "shared": False}


def sharing(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per feature function the steps used: the steps that computed it (once, when shared) and read it,
    and the cards of those steps."""
    out: dict[str, dict[str, Any]] = {}
    for step in steps:
        record = step.get("features")
        if not isinstance(record, Mapping) or not record.get("function"):
            continue
        entry = out.setdefault(str(record["function"]), {"function": str(record["function"]), "computed_by": [],
                                                          "read_by": [], "cards": [], "compute_seconds": 0.0})
        entry["cards"].append(str(record.get("card") or step.get("name")))
        if record.get("computed"):
            entry["computed_by"].append(str(step.get("name")))
            entry["compute_seconds"] = round(entry["compute_seconds"] + float(record.get("seconds") or 0.0), 4)
        else:
            entry["read_by"].append(str(step.get("name")))
    for entry in out.values():
        entry["line"] = sharing_line(entry)
    return list(out.values())


def sharing_line(entry: Mapping[str, Any]) -> str:
    computed, read = list(entry["computed_by"]), list(entry["read_by"])
    times = "once" if len(computed) == 1 else f"{len(computed)} times"
    line = f"features {entry['function']}: computed {times} ({', '.join(computed)}, {entry['compute_seconds']:.2f} s)"
    return line + (f", shared with {', '.join(read)}" if read else ", used by no other step")


__all__ = ["CACHE_VARIABLE", "cache_key", "feature_cache", "shared_features", "sharing", "sharing_line"]
