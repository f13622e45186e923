"""The Python API's settings checked at the door: each field of the type its annotation names, or refused naming it.

A settings dataclass (``kkb.DryRunSettings``, ``kkb.BuildSettings``, ...) is what a notebook or a script hands kkb;
Python does not check dataclass fields. A ``rerun_scale="2"``, a ``kernel_dir=None`` or a ``progress`` that is no
function would otherwise fail deep inside (a ``TypeError`` far from the cause) or, worse, be taken for something else.
:func:`check_settings` compares every field with its annotation (``Path`` takes a ``str`` too, as paths are resolved
at the door; a ``float`` takes an ``int``; an enum takes its values) and raises :class:`~builder.errors.KkbError`
naming the class, the field, what was given and what to give.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from builder.errors import KkbError

_ABSENT = object()


def check_settings(settings: object, expected: type | None = None, error: type[KkbError] = KkbError) -> None:
    """Every field of ``settings`` (a dataclass instance; of class ``expected`` when given) of its annotated type;
    ``error``: the family raised (the settings' stage's own)."""
    if expected is not None and not isinstance(settings, expected):
        given = f"a {type(settings).__name__}" if dataclasses.is_dataclass(settings) else _what(settings)
        raise error(f"expected a {expected.__name__}, got {given}",
                       hint=f"pass kkb.{expected.__name__}(kernel_dir=...) (the settings object of this call)")
    if not dataclasses.is_dataclass(settings) or isinstance(settings, type):
        return
    cls = type(settings)
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that cannot be evaluated here: nothing to check against
        return
    for field in dataclasses.fields(settings):
        hint, value = hints.get(field.name, _ABSENT), getattr(settings, field.name)
        if hint is _ABSENT or _matches(value, hint):
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                check_settings(value, error=error)
            continue
        raise error(f"{cls.__name__}.{field.name}: {_what(value)} is not {_described(hint)}",
                       hint=f"set {field.name} to {_described(hint)}")


def _matches(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if origin is Literal:
        return any(value == arg and type(value) is type(arg) or value is arg for arg in args)
    if origin is not None:
        return _matches_generic(value, origin, args)
    if hint is Path:
        return isinstance(value, (str, os.PathLike))
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return isinstance(value, hint) or any(value == member.value for member in hint)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # a form this check does not know: not refused


def _matches_generic(value: Any, origin: Any, args: tuple[Any, ...]) -> bool:
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(item, args[0]) for item in value)
        return not args or (len(args) == len(value) and all(_matches(item, arg) for item, arg in zip(value, args, strict=True)))
    if origin in (list, collections.abc.Sequence):
        return isinstance(value, (list, tuple)) and all(_matches(item, args[0]) for item in value) if args else True
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping):
            return False
        return not args or all(_matches(key, args[0]) and _matches(item, args[1]) for key, item in value.items())
    if origin is collections.abc.Callable:
        return callable(value)
    return isinstance(value, origin) if isinstance(origin, type) else True


def _values(hint: Any) -> list[Any]:
    """The values a Literal or an enum allows ([] for any other type)."""
    if typing.get_origin(hint) is Literal:
        return list(typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [member.value for member in hint]
    return []


def _what(value: Any) -> str:
    shown = repr(value)
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return "None" if value is None else f"{shown if len(shown) <= 40 else shown[:37] + '...'} ({article} {name})"


def _described(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        kept = [arg for arg in args if arg is not type(None)]
        values = [value for arg in kept for value in _values(arg)]
        if kept and all(_values(arg) for arg in kept):  # Scenario | Literal["both"]: one list of the values
            named = ["one of " + ", ".join(repr(value) for value in values)]
        else:
            named = [_described(arg) for arg in kept]
        return " or ".join(named) + (" or None" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin is tuple:
        return f"a tuple of {_described(args[0])}" if len(args) == 2 and args[1] is Ellipsis else "a tuple"
    if origin in (dict, collections.abc.Mapping):
        return f"a mapping of {_described(args[0])} to {_described(args[1])}" if args else "a mapping"
    if origin is collections.abc.Callable:
        return "a function"
    if hint is Path:
        return "a path (a pathlib.Path or a str)"
    if hint is float:
        return "a number"
    if hint is int:
        return "a whole number (an int)"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in hint)
    name = getattr(hint, "__name__", str(hint))
    return f"a {name}" if name not in ("str", "bool") else {"str": "a string (a str)", "bool": "True or False"}[name]


__all__ = ["check_settings"]
