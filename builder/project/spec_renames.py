"""``kernel.toml`` keys kkb renamed: the old spelling is still read, with a warning naming the key to write.

Durations end in ``_seconds`` everywhere (``timeout_seconds``, ``startup_limit_seconds``); ``[push]``'s waits were
once ``_s``. An old key is renamed before validation (so every error names the new one) and warned about once per
process as a :class:`SpecDeprecation`, which the command line shows as a ``warning:`` line.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

# table -> {old key: new key}
RENAMED: dict[str, dict[str, str]] = {
    "push": {"dataset_timeout_s": "dataset_timeout_seconds", "run_timeout_s": "run_timeout_seconds",
             "score_timeout_s": "score_timeout_seconds"},
}


class SpecDeprecation(FutureWarning):
    """A ``kernel.toml`` spelling kkb still reads; the message names the key to write instead."""


def renamed(table: str, raw: Any) -> Any:
    """``raw`` (a table of ``kernel.toml``) with its old keys under their new names, each warned about."""
    if not isinstance(raw, Mapping) or not RENAMED.get(table, {}).keys() & raw.keys():
        return raw
    out = dict(raw)
    for old, new in RENAMED[table].items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"[{table}] sets both {old} and {new}: keep {new} ({old} is its old spelling)")
        warnings.warn(f"kernel.toml: [{table}] {old} is deprecated: write {new} = {out[old]!r} (the same value, in "
                      f"seconds)", SpecDeprecation, stacklevel=2)
        out[new] = out.pop(old)
    return out


__all__ = ["RENAMED", "SpecDeprecation", "renamed"]
