"""What a user sees when ``kernel.toml`` is wrong: the file, the dotted key, the message, one hint.

A hint is found by the error's *type*, never by its wording: kkb's own checks raise typed errors
(:class:`~builder.project.spec_values.SpecErrorType`, keys of :data:`HINTS`); pydantic's own errors (a
string too short, a number out of range, a value not in a list) get the hint of where they are
(:data:`LOCATION_HINTS`); an unknown key gets a "did you mean" from the model's own field names.
"""

from __future__ import annotations

import enum
import hashlib
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from builder.errors import SpecError
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import UNKNOWN_KIND, keys_of, kinds_taking, kinds_words
from builder.project.examples import example_spec_hint
from builder.project.spec_values import MAX_WAIT_SECONDS, SpecErrorType, close_match
from builder.project.table_hints import misnamed_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SPEC_FILE = "kernel.toml"

_PLACEHOLDER_HINT = ("placeholders are filled in each argument: {out} {code} {weights} {data} {python}; "
                     "see kernels/minimal/kernel.toml")
_TTA_HINT = "a TTA function of your own goes in the code dataset and is named 'package.module:function'"

# One hint per typed error (the test checks that every SpecErrorType has one).
HINTS: dict[SpecErrorType, str] = {
    SpecErrorType.SLUG_MISMATCH: "remove [kernel] slug (kkb derives it from the title) or change the title",
    SpecErrorType.TITLE_SLUG_TOO_SHORT: "use a title with at least 5 letters or digits; Kaggle derives the kernel slug from it",
    SpecErrorType.RUN_UNSPLITTABLE: "close the quote, or escape it with a backslash; the run string is split like a shell "
                                    "command line",
    SpecErrorType.RUN_PLACEHOLDER: _PLACEHOLDER_HINT,
    SpecErrorType.UNKNOWN_MODEL: "make --model NAME match a [[models]] name = ... in kernel.toml",
    SpecErrorType.UNKNOWN_TTA: _TTA_HINT,
    SpecErrorType.INTERNET_ON: "set [kernel] internet = false; ship packages as wheels instead (kkb wheels)",
    SpecErrorType.INPUT_KIND: "kind is dataset (dataset_sources), model (model_sources) or notebook (kernel_sources)",
    SpecErrorType.INPUT_UNVERSIONED: "add the version number, as on the model's page: owner/model/framework/variation/VERSION",
    SpecErrorType.INPUT_FRAMEWORK: "use the framework segment of the model's Kaggle path, e.g. pytorch or transformers",
    SpecErrorType.INPUTS_NOT_UNIQUE: "give each [[inputs]] its own name = ..., and attach each source once",
    SpecErrorType.INPUT_REFERENCE: "copy the reference from the input's Kaggle URL or from kernel-metadata.json",
}

# pydantic's own errors, by where they are: (table, field or None for any) -> hint; the first match wins.
LOCATION_HINTS: tuple[tuple[str, str | None, str], ...] = (
    ("kernel", "title", "use a title of 5 to 50 characters; Kaggle derives the kernel slug from it"),
    ("steps", "run", _PLACEHOLDER_HINT),
    ("models", "tta", _TTA_HINT),
    ("inputs", None, "see docs/commands/build.md, 'Attaching inputs kkb does not build'"),
    ("push", None, f"a wait is a number of seconds, more than 0 and at most {MAX_WAIT_SECONDS} (48 h), e.g. 3600"),
    ("evaluation_api", None, "see kernels/evalapi/kernel.toml: predict = 'module:function' in your code, "
                             "module = 'kaggle_evaluation.<comp>_inference_server'"),
)
DEFAULT_HINT = "see kernels/minimal/kernel.toml for a valid example"


def read_spec_toml(kernel_dir: Path) -> tuple[Path, dict[str, Any], str]:
    """``kernel_dir/kernel.toml`` read as TOML, with the sha256 of the bytes read (the build records which file it
    built from without reading it again): a missing folder or file, bad encoding or bad syntax is a SpecError."""
    path = kernel_dir / SPEC_FILE
    if not kernel_dir.is_dir():
        raise SpecError(f"{kernel_dir}: no such kernel folder", hint=f"pass the folder that holds kernel.toml; {example_spec_hint()}")
    if not path.is_file():
        raise SpecError(f"{path}: file not found", hint=f"every kernel project needs a kernel.toml; {example_spec_hint()}")
    try:
        data = path.read_bytes()
        text = data.decode("utf-8-sig")  # a BOM (Windows editors) is not TOML
        misnamed_table(text, str(path))  # [models.defaults] and the like: the table kkb knows, not a TOML error
        return path, tomllib.loads(text), "sha256:" + hashlib.sha256(data).hexdigest()
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                        hint="save kernel.toml with UTF-8 encoding") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}", hint="fix the TOML syntax at the line shown") from None


def spec_error_of(exc: ValidationError, source: Path | str, root: type[BaseModel]) -> SpecError:
    """Every error of ``exc`` as ``<source>: <dotted key>: <message>``, with the hints joined once each."""
    lines: list[str] = []
    hints: list[str] = []
    for error in exc.errors():
        loc, kind = without_card_tag(error["loc"])
        key = dotted(loc)
        if error["type"] == "extra_forbidden":
            line, hint = _unknown_key(root, loc, kind)
            lines.append(f"{source}: {line}")
            hints.append(hint)
        elif error["type"] == UNKNOWN_KIND:
            lines.append(f"{source}: {dotted((*loc, 'kind'))}: {error['msg']}")
            hints.append(f"kind is one of {kinds_words()} (no kind: an image card)")
        elif error["type"] == "missing":
            lines.append(f"{source}: {key}: required key is missing{allowed_values(root, error['loc'])}")
            hints.append(f"add {key} to {Path(str(source)).name}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{source}: {key}: {message}" if key else f"{source}: {message}")
            hints.append(hint_for(error))
    unique_hints = [hint for index, hint in enumerate(hints) if hint and hint not in hints[:index]]
    return SpecError("\n".join(lines), hint="; ".join(unique_hints) or None)


def without_card_tag(loc: Sequence[int | str]) -> tuple[tuple[int | str, ...], CardKind | None]:
    """``('models', 0, 'gbdt', 'max_len')`` (pydantic names the union member) as the user wrote it, and the card's kind."""
    if len(loc) > 2 and loc[0] == "models" and isinstance(loc[1], int) and loc[2] in CardKind.values():
        return (*loc[:2], *loc[3:]), CardKind(str(loc[2]))
    return tuple(loc), None


def _unknown_key(root: type[BaseModel], loc: Sequence[int | str], kind: CardKind | None) -> tuple[str, str]:
    """The line and the hint of a key the table does not take: a card's key of another kind says which kind takes it,
    and the did-you-mean looks among the keys of the card's own kind only."""
    key, name = dotted(loc), str(loc[-1])
    known = keys_of(kind) if kind is not None and len(loc) == 3 else known_keys(root, loc[:-1])
    owners = kinds_taking(name) if kind is not None and len(loc) == 3 else []
    if owners:
        return (f"{key}: `{name}` is a key of {' and '.join(map(str, owners))} cards; this card is `kind = \"{kind}\"`",
                f"remove {name}, or make the card kind = '{owners[0]}'")
    close = close_match(name, known)
    return (f"{key}: unknown key", f"did you mean '{dotted((*loc[:-1], close))}'?" if close else
            f"known keys here: {', '.join(known)}")


def hint_for(error: ErrorDetails) -> str:
    """The hint of a typed error, else the hint of its location, else the example to copy."""
    if error["type"] in SpecErrorType.values():
        return HINTS[SpecErrorType(error["type"])]
    loc = tuple(str(part) for part in error["loc"])
    for table, field, hint in LOCATION_HINTS:
        if loc[:1] == (table,) and (field is None or loc[-1:] == (field,)):
            return hint
    return DEFAULT_HINT


def dotted(loc: Sequence[int | str]) -> str:
    """('models', 0, 'arch') -> 'models[0].arch'; the first part is the TOML table."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def known_keys(root: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys of the table at ``loc`` (list indexes skipped), for a "did you mean"."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model is not None else None
        if field is None:
            return []
        model = _model_of(field.annotation)
    return sorted(model.model_fields) if model is not None else []


def allowed_values(root: type[BaseModel], loc: Sequence[int | str]) -> str:
    """``"; one of: a, b, c"`` for a key whose values are a closed set (an enum or a Literal), else ``""``."""
    parent: type[BaseModel] | None = root
    for part in [part for part in loc[:-1] if not isinstance(part, int)]:
        field = parent.model_fields.get(str(part)) if parent is not None else None
        parent = _model_of(field.annotation) if field is not None else None
    field = parent.model_fields.get(str(loc[-1])) if parent is not None and loc else None
    annotation = field.annotation if field is not None else None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [str(member.value) for member in annotation]
    elif typing.get_origin(annotation) is typing.Literal:
        values = [str(value) for value in typing.get_args(annotation)]
    else:
        return ""
    return f"; one of: {', '.join(values)}"


def _model_of(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


__all__ = ["DEFAULT_HINT", "HINTS", "LOCATION_HINTS", "SPEC_FILE", "allowed_values", "dotted", "hint_for", "known_keys", "read_spec_toml",
           "without_card_tag",
           "spec_error_of"]
