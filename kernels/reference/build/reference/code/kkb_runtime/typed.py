"""``kkb_kernel.json`` as frozen dataclasses: one reader (:func:`read`), one writer (:func:`write`).

The build writes every value the kernel reads, so the reader holds no default: a key the dataclass has and the
object lacks is refused naming it (the file was built by another kkb), and so is a key the dataclass does not
have (nothing the build wrote is ignored). Values are checked against the field's type as they are read: a
string where a number belongs is refused the same way, never carried to the runner that reads it.

What the types may be: ``str``, ``int``, ``float`` (a JSON integer too), ``bool``, ``None``, ``Literal``, a
``StrEnum``, ``tuple[X, ...]`` and ``tuple[X, Y]`` (JSON lists), ``Mapping[str, X]``, a union of those, another
frozen dataclass, and :data:`JsonValue` (a value kkb carries as it is: a serialised pipeline, a factory's keyword
arguments). Field metadata says what JSON's shape needs besides the types:

* :data:`FLAT`: the field's dataclass shares its owner's object (a card's keys and what the build recorded for it
  are one object in ``kkb_kernel.json``);
* :data:`OMITTED`: ``None`` is written by leaving the key out, and a missing key reads as ``None`` (a key
  ``kkb_kernel.json`` holds only when it is set);
* :data:`ITEMS`: how the entries of a tuple field are named in a message (``card 'effnet'``, by their ``name``);
* :data:`LOCAL`: no key of the file (where it was read from); the field keeps its default.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Literal, TypeAlias, TypeVar, Union, cast

CONFIG_FILE = "kkb_kernel.json"

JsonValue: TypeAlias = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007

FLAT = "kkb_flat"
OMITTED = "kkb_omitted"
ITEMS = "kkb_items"
LOCAL = "kkb_local"  # a field that is no key of the file (where it was read from): neither read nor written
# Which dataclass to read for a field declared with a base class: the one the object names (a card's ``kind``).
Variants = Mapping[type, Callable[[Mapping[str, object]], type]]

T = TypeVar("T")
_JSON_SCALARS = {str, int, float, bool, type(None)}


class ConfigMalformed(ValueError):
    """``kkb_kernel.json`` does not hold what this kkb reads: a key missing, a key it does not know, a value of
    another type. The kernel was built by another kkb: build it again."""


def flat() -> dict[str, object]:
    return {FLAT: True}


def omitted() -> dict[str, object]:
    return {OMITTED: True}


def items(label: str) -> dict[str, object]:
    return {ITEMS: label}


def local() -> dict[str, object]:
    return {LOCAL: True}


def read(cls: type[T], raw: object, where: str = "", variants: Variants | None = None) -> T:
    """``raw`` (what ``json.loads`` gave) as ``cls``; ``where`` names it in a message (``card 'effnet'``)."""
    return cast(T, _Reader(variants or {}).value(cls, raw, where))


def write(value: object) -> JsonValue:
    """A dataclass (and what it holds) as JSON values: what :func:`read` reads back as the same dataclass."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, JsonValue] = {}
        for field in dataclasses.fields(value):
            if field.metadata.get(LOCAL):
                continue
            item = getattr(value, field.name)
            if field.metadata.get(FLAT):
                written = write(item)
                out.update(written if isinstance(written, dict) else {})
            elif item is None and field.metadata.get(OMITTED):
                continue
            else:
                out[field.name] = write(item)
        return out
    if isinstance(value, enum.Enum):
        return cast(JsonValue, value.value)
    if isinstance(value, (tuple, list)):
        return [write(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): write(item) for key, item in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} is no value of {CONFIG_FILE}")


def keys_of(cls: type) -> list[str]:
    """The keys an object of dataclass ``cls`` has in ``kkb_kernel.json`` (its flat parts' too), sorted."""
    found: list[str] = []
    hints = _hints(cls)
    for field in dataclasses.fields(cls):
        if field.metadata.get(LOCAL):
            continue
        found += keys_of(cast(type, hints[field.name])) if field.metadata.get(FLAT) else [field.name]
    return sorted(found)


def _place(where: str) -> str:
    return f"{where} in {CONFIG_FILE}" if where else CONFIG_FILE


def _rebuild(message: str) -> ConfigMalformed:
    return ConfigMalformed(f"{message}: it was built by another kkb; build the kernel again")


_HINTS: dict[type, dict[str, object]] = {}


def _hints(cls: type) -> dict[str, object]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _is_json(hint: object) -> bool:
    """:data:`JsonValue` as ``get_type_hints`` hands it back (a union of the scalars, a list and a dict)."""
    if typing.get_origin(hint) is not Union:
        return False
    args = typing.get_args(hint)
    return _JSON_SCALARS <= set(args) and {typing.get_origin(arg) for arg in args} >= {list, dict}


def _describe(hint: object) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


class _Reader:
    def __init__(self, variants: Variants) -> None:
        self.variants = variants

    def value(self, hint: object, raw: object, where: str) -> object:
        if _is_json(hint):
            return raw
        origin = typing.get_origin(hint)
        if origin in (Union, types.UnionType):
            return self.union(hint, raw, where)
        if origin is Literal:
            if raw not in typing.get_args(hint):
                raise self.wrong(hint, raw, where)
            return raw
        if origin is tuple:
            return self.sequence(hint, raw, where)
        if origin in (dict, Mapping):
            return self.mapping(hint, raw, where)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.dataclass(hint, raw, where)
        return self.scalar(hint, raw, where)

    def scalar(self, hint: object, raw: object, where: str) -> object:
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            if raw not in [member.value for member in hint]:
                raise self.wrong(hint, raw, where)
            return hint(raw)
        if hint is type(None) and raw is None:
            return None
        if hint is bool and isinstance(raw, bool):
            return raw
        if hint is int and isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if hint is float and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if hint is str and isinstance(raw, str):
            return raw
        raise self.wrong(hint, raw, where)

    def union(self, hint: object, raw: object, where: str) -> object:
        for arg in typing.get_args(hint):
            try:
                return self.value(arg, raw, where)
            except ConfigMalformed:
                continue
        raise self.wrong(hint, raw, where)

    def sequence(self, hint: object, raw: object, where: str) -> tuple[object, ...]:
        args = typing.get_args(hint)
        if not isinstance(raw, list) or (args[-1] is not Ellipsis and len(raw) != len(args)):
            raise self.wrong(hint, raw, where)
        kinds = [args[0]] * len(raw) if args[-1] is Ellipsis else list(args)
        return tuple(self.value(kind, item, f"{where}[{index}]") for index, (kind, item) in enumerate(zip(kinds, raw, strict=True)))

    def mapping(self, hint: object, raw: object, where: str) -> dict[str, object]:
        if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
            raise self.wrong(hint, raw, where)
        kind = typing.get_args(hint)[1]
        return {key: self.value(kind, item, f"{where}.{key}") for key, item in raw.items()}

    def dataclass(self, cls: type, raw: object, where: str) -> object:
        if not isinstance(raw, dict):
            raise self.wrong(cls, raw, where)
        chosen = self.variants[cls](raw) if cls in self.variants else cls
        values, used, missing = self.fields(chosen, raw, where)
        if missing:
            raise _rebuild(f"{_place(where)} lacks {', '.join(sorted(missing))}")
        unknown = sorted(set(raw) - used)
        if unknown:
            raise _rebuild(f"{_place(where)} has {', '.join(unknown)}, which this kkb does not read")
        return chosen(**values)

    def fields(self, cls: type, raw: dict[str, object], where: str) -> tuple[dict[str, object], set[str], list[str]]:
        """The values of ``cls``'s fields in ``raw`` (its flat parts read from ``raw`` too), the keys they took and
        the keys ``raw`` lacks."""
        hints = _hints(cls)
        values: dict[str, object] = {}
        used: set[str] = set()
        missing: list[str] = []
        for field in dataclasses.fields(cls):
            if field.metadata.get(LOCAL):
                continue
            hint = hints[field.name]
            if field.metadata.get(FLAT):
                part = self.variants[cast(type, hint)](raw) if hint in self.variants else cast(type, hint)
                found, took, lacking = self.fields(part, raw, where)
                used |= took
                missing += lacking
                if not lacking:
                    values[field.name] = part(**found)
                continue
            if field.name not in raw:
                if field.metadata.get(OMITTED):
                    values[field.name] = None
                else:
                    missing.append(field.name)
                continue
            used.add(field.name)
            values[field.name] = self.field(field, hint, raw[field.name], where)
        return values, used, missing

    def field(self, field: dataclasses.Field[object], hint: object, raw: object, where: str) -> object:
        key = f"{where}.{field.name}" if where else field.name
        label = field.metadata.get(ITEMS)
        if label and isinstance(raw, list):
            kind = typing.get_args(hint)[0]
            return tuple(self.value(kind, item, f"{label} '{item.get('name', index) if isinstance(item, dict) else index}'")
                         for index, item in enumerate(raw))
        return self.value(hint, raw, key)

    def wrong(self, hint: object, raw: object, where: str) -> ConfigMalformed:
        shown = repr(raw) if isinstance(raw, (str, int, float, bool)) or raw is None else type(raw).__name__
        return _rebuild(f"{_place(where)} is {shown[:80]}, not {_describe(hint)}")


__all__ = ["CONFIG_FILE", "FLAT", "ITEMS", "LOCAL", "OMITTED", "ConfigMalformed", "JsonValue", "Variants", "flat", "items", "keys_of",
           "local", "omitted", "read", "write"]
