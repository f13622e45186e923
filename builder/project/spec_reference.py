"""``kernel.toml``'s reference, read off the spec's models: every key, its type, default and the card kinds taking it.

The docs site's reference page is generated from this walk (``docs/hooks.py`` at build time), and the docs'
tests check each ``toml`` block's keys against the same walk, so neither can drift from the loader. The walk is
generic: a nested model is a table, a list of models an array of tables, a union of models (a discriminated
union such as one card model per ``kind``) contributes each member's keys, marked with the discriminator values
of the members that take them. A field's description is its ``Field(description=…)``, else the comment lines
written above it in the model's source.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from builder.project.spec import KernelSpec

_COMMENTED_FIELD = re.compile(r"^\s+([A-Za-z_]\w*)\s*:")
_QUOTED = re.compile(r'"([a-z][\w-]*)"')
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class SpecKey:
    """One key of ``kernel.toml``: where it lives, its type, default and which kinds take it."""

    table: str  # "kernel", "models", "install.source_packages", ...
    array: bool  # an array of tables ([[models]]) rather than a table ([kernel])
    key: str
    type: str
    default: str  # "required", or the default as TOML would write it
    kinds: tuple[str, ...]  # the discriminator values of the union members taking it; () = every one
    description: str

    @property
    def header(self) -> str:
        return f"[[{self.table}]]" if self.array else f"[{self.table}]"


def _strip_optional(annotation: Any) -> Any:
    args = typing.get_args(annotation)
    if _is_union(annotation) and type(None) in args:
        rest = [arg for arg in args if arg is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007 (a runtime-built union)
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _unannotated(annotation: Any) -> Any:
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    """The models a table's annotation holds: one, or a union's members (None dropped)."""
    annotation = _unannotated(_strip_optional(_unannotated(annotation)))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if _is_union(annotation):
        members = [_unannotated(arg) for arg in typing.get_args(annotation)]
        if members and all(isinstance(arg, type) and issubclass(arg, BaseModel) for arg in members):
            return members
    return []


def _table_of(annotation: Any) -> tuple[list[type[BaseModel]], bool]:
    """(the models, is it an array of tables) for a field holding tables, else ([], False)."""
    inner = _unannotated(_strip_optional(_unannotated(annotation)))
    if typing.get_origin(inner) is list:
        models = _models_of(typing.get_args(inner)[0])
        return models, bool(models)
    return _models_of(inner), False


def type_name(annotation: Any) -> str:
    """A TOML-minded name of a field's type: ``string``, ``array of string``, ``"a" | "b"``, ``table of number``."""
    annotation = _unannotated(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(f'"{member.value}"' for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if origin is Literal:
        return " | ".join(f'"{arg}"' if isinstance(arg, str) else str(arg) for arg in args)
    if _is_union(annotation):
        return " or ".join(type_name(arg) for arg in args if arg is not type(None))
    if origin is list:
        return f"array of {type_name(args[0])}"
    if origin is tuple:
        parts = [type_name(arg) for arg in args if arg is not Ellipsis]
        return f"array of {parts[0]}" if Ellipsis in args else f"array [{', '.join(parts)}]"
    if origin is dict:
        return f"table of {type_name(args[1])}"
    return "any value" if annotation is Any else getattr(annotation, "__name__", str(annotation))


def _toml_value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml_value(item)}" for key, item in value.items()) + "}"
    return str(value)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]  # pydantic's factories here take no argument
    else:
        value = field.default
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, BaseModel):
        return "(table)"
    return _toml_value(value)


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """The comment lines written above each field in the source of ``model`` and its bases."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                pending.append(stripped.lstrip("#").strip())
                continue
            match = _COMMENTED_FIELD.match(line)
            if match and pending and match.group(1) in cls.__annotations__:
                found[match.group(1)] = " ".join(pending)
            pending = []
    return found


def _discriminator(members: list[type[BaseModel]]) -> str | None:
    """The field every member of a union types as a ``Literal`` (``kind``): the union's discriminator."""
    common = set.intersection(*(set(member.model_fields) for member in members))
    for name in members[0].model_fields:
        if name in common and all(typing.get_origin(_unannotated(member.model_fields[name].annotation)) is Literal
                                  for member in members):
            return name
    return None


def _kinds(member: type[BaseModel], discriminator: str | None) -> tuple[str, ...]:
    """A union member's values of the discriminator (its kinds); its class name where there is none."""
    if discriminator is None:
        return (member.__name__,)
    values = typing.get_args(_unannotated(member.model_fields[discriminator].annotation))
    return tuple(str(value.value if isinstance(value, enum.Enum) else value) for value in values)


def _mixin_kinds(model: type[BaseModel], name: str) -> tuple[str, ...]:
    """One model for every kind: a key a mixin declares, whose docstring opens with ``kind = "x"``, is x's."""
    for cls in model.__mro__[1:]:
        if name in getattr(cls, "__annotations__", {}):
            opening = (cls.__doc__ or "").strip().split(": ", 1)[0]
            return tuple(_QUOTED.findall(opening)) if opening.startswith("``kind = ") else ()
    return ()


def _describe(field: FieldInfo, comments: dict[str, str], name: str) -> str:
    return (field.description or comments.get(name, "")).strip()


def walk(model: type[BaseModel] = KernelSpec, table: str = "", array: bool = False) -> Iterator[SpecKey]:
    """Every key under ``model`` (its tables and arrays of tables included), in the models' field order."""
    yield from _walk_members([model], table, array)


def _walk_members(members: list[type[BaseModel]], table: str, array: bool) -> Iterator[SpecKey]:
    union = len(members) > 1
    discriminator = _discriminator(members) if union else None
    keys: dict[str, SpecKey] = {}
    nested: dict[str, tuple[list[type[BaseModel]], bool]] = {}
    for member in members:
        comments = _comments(member)
        for name, field in member.model_fields.items():
            key = field.alias or name
            if isinstance(field.json_schema_extra, dict) and "derived_from" in field.json_schema_extra:
                continue  # not a key of its own: set from another (its docs are there)
            models, is_array = _table_of(field.annotation)
            if models:
                nested.setdefault(key, (models, is_array))
                continue
            kinds = _kinds(member, discriminator) if union else _mixin_kinds(member, name)
            entry = SpecKey(table, array, key, type_name(field.annotation), default_text(field), kinds,
                            _describe(field, comments, name))
            seen = keys.get(key)
            keys[key] = entry if seen is None else _merged(seen, entry)
    yield from keys.values()
    for key, (models, is_array) in nested.items():
        yield from _walk_members(models, f"{table}.{key}" if table else key, is_array)


def _merged(seen: SpecKey, entry: SpecKey) -> SpecKey:
    """One key several union members take: their kinds together; their defaults where they differ."""
    kinds = tuple(dict.fromkeys(seen.kinds + entry.kinds))
    default = seen.default if seen.default == entry.default else f"{seen.default}; {entry.default} ({', '.join(entry.kinds)})"
    return SpecKey(seen.table, seen.array, seen.key, seen.type, default, kinds, seen.description or entry.description)


def keys_by_table(model: type[BaseModel] = KernelSpec) -> dict[str, dict[str, SpecKey]]:
    """``{"models": {"arch": SpecKey, ...}, ...}``: what the docs' tests check a ``toml`` block against."""
    tables: dict[str, dict[str, SpecKey]] = {}
    for entry in walk(model):
        tables.setdefault(entry.table, {})[entry.key] = entry
    return tables


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference(model: type[BaseModel] = KernelSpec) -> str:
    """The reference as Markdown: one table of keys per ``kernel.toml`` table, in the spec's order.

    A table whose keys depend on the card kind (``[[models]]``) gets a column naming the kinds taking each key.
    """
    out: list[str] = []
    for entries in keys_by_table(model).values():
        first = next(iter(entries.values()))
        by_kind = any(entry.kinds for entry in entries.values())
        title = f"`{first.header}`" if first.table else "top level"
        out += ["", f"## {title}", "", "| key | type | default |" + (" card kinds |" if by_kind else "") + " what it is |",
                "|---|---|---|" + ("---|" if by_kind else "") + "---|"]
        for entry in entries.values():
            kinds = (" " + (", ".join(f"`{kind}`" for kind in entry.kinds) or "every kind") + " |") if by_kind else ""
            out.append(f"| `{entry.key}` | {_cell(entry.type)} | `{_cell(entry.default)}` |{kinds} {_cell(entry.description)} |")
    return "\n".join(out).strip() + "\n"


__all__ = ["SpecKey", "default_text", "keys_by_table", "render_reference", "type_name", "walk"]
