"""Every path a user gives, resolved once, at the door.

The command line and the Python API take paths as people type them: ``.``, ``kernels/x``, ``../data``, ``~/answers.csv``.
Each entry point passes its settings through :func:`resolved` before anything runs, so everything below it sees
absolute paths only, taken against the folder the command was started in (``~`` expanded), whatever folder a
later step works in. A symlink is kept as given (``kkb build link`` builds ``link``); ``..`` is taken as the
shell takes it after ``cd``, lexically. Files named in ``kernel.toml`` are relative to the kernel folder, which is
absolute from here on, so they are too.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def absolute(path: Path | str) -> Path:
    """``path`` against the current folder, ``~`` expanded, ``.`` and ``..`` taken lexically."""
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def resolved(settings: T) -> T:
    """``settings`` (a dataclass) with every path in it absolute: fields holding a ``Path`` (or a ``str`` where the
    field is typed as a path, as an API caller may pass one), the paths in tuples, and dataclasses nested in it."""
    if not dataclasses.is_dataclass(settings) or isinstance(settings, type):
        return settings
    hints = _path_fields(type(settings))
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        new = _resolved_value(value, field.name in hints)
        if new is not value:
            changes[field.name] = new
    return dataclasses.replace(settings, **changes) if changes else settings


def _resolved_value(value: Any, typed_as_path: bool) -> Any:
    if isinstance(value, Path) or (typed_as_path and isinstance(value, str)):
        return absolute(value)
    if isinstance(value, tuple) and value:
        items = tuple(_resolved_value(item, False) for item in value)  # a str in a tuple is a name (NAME=FILE)
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return resolved(value)
    return value


def _path_fields(cls: type) -> set[str]:
    """The fields whose annotation names ``Path`` (``Path``, ``Path | None``, a tuple of them)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that cannot be evaluated here: only real Path values are resolved
        return set()
    return {name for name, hint in hints.items() if "Path" in repr(hint) and "Callable" not in repr(hint)}


__all__ = ["absolute", "resolved"]
