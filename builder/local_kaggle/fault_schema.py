"""What a faults document may hold: one pydantic model per kind, ``extra="forbid"``, checked at every door.

A fault posted without a ``message`` once crashed the scoring worker and left a submission PENDING
forever: entries were stored as given and read with ``entry["message"]`` later. Now the admin
endpoint, ``faults.json`` and :class:`~builder.local_kaggle.faults.Faults`' Python methods all go
through :func:`validate_document` / :func:`validate_entry`, which refuse unknown kinds, unknown
fields (with a "did you mean"), statuses that are not HTTP errors, unknown phases and error
descriptions, and fill in every default. So the workers read complete entries only.

Decision on a missing ``message``: it is **defaulted**, never refused: an ``rpc`` fault answers with
the status' reason phrase (``"Internal server error"``...), a ``kernelFail`` fault fails with
``"RuntimeError: injected failure (local Kaggle fault)"``. The stored document shows the default.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from builder.errors import LocalKaggleError
from builder.kkb_runtime.vocabulary import Scenario, Verdict

KINDS = ("rpc", "datasetNotReady", "uploadBreak", "kernelFail", "staleMount")
REASONS = {400: "Bad request", 401: "Unauthenticated", 403: "Permission denied", 404: "Not found",
           409: "Conflict", 429: "Too many requests", 500: "Internal server error", 502: "Bad gateway",
           503: "Service unavailable", 504: "Gateway timeout"}
DEFAULT_KERNEL_MESSAGE = "RuntimeError: injected failure (local Kaggle fault)"
# Kaggle's error descriptions of a failed code submission (its public vocabulary).
DESCRIPTIONS = tuple(verdict.value for verdict in (Verdict.THREW, Verdict.TIMEOUT, Verdict.COMPUTE, Verdict.CSV_NOT_FOUND,
                                                  Verdict.SCORING_ERROR, Verdict.KAGGLE_ERROR))


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)

    times: int = Field(1, ge=1, description="how many times the fault fires before it is used up")


class RpcFault(_Entry):
    method: str = Field(min_length=1, description="'CreateDataset', 'datasets.DatasetApiService/CreateDataset' or '*'")
    status: int = Field(ge=400, le=599, description="the HTTP error to answer with")
    retryAfter: float | None = Field(None, ge=0)
    message: str = ""
    html: bool = Field(False, description="answer with an HTML page, as Kaggle's front end does when it throttles")
    afterCommit: bool = Field(False, description="do what the call asks first, then answer the error")

    def complete(self) -> dict[str, Any]:
        entry = self.model_dump(exclude_none=True)
        entry["message"] = self.message or REASONS.get(self.status, "Injected failure")
        return entry


class DatasetNotReadyFault(_Entry):
    dataset: str = Field("*", min_length=1, description="'owner/slug' or '*'")
    polls: int = Field(3, ge=0)

    def complete(self) -> dict[str, Any]:
        return self.model_dump()


class UploadBreakFault(_Entry):
    fraction: float = Field(0.5, ge=0.0, lt=1.0, description="share of the bytes kept before the transfer is cut")

    def complete(self) -> dict[str, Any]:
        return self.model_dump()


class KernelFailFault(_Entry):
    kernel: str = Field("*", min_length=1, description="'owner/slug' or '*'")
    phase: Scenario | Literal["any"] = Scenario.COMMIT
    message: str = DEFAULT_KERNEL_MESSAGE
    description: Literal[DESCRIPTIONS] = Verdict.THREW.value  # type: ignore[valid-type]

    def complete(self) -> dict[str, Any]:
        entry = self.model_dump()
        entry["message"] = self.message or DEFAULT_KERNEL_MESSAGE
        return entry


class StaleMountFault(_Entry):
    source: str = Field("*", min_length=1, description="a dataset or notebook source 'owner/slug', or '*'")

    def complete(self) -> dict[str, Any]:
        return self.model_dump()


MODELS: dict[str, type[RpcFault | DatasetNotReadyFault | UploadBreakFault | KernelFailFault | StaleMountFault]] = {
    "rpc": RpcFault, "datasetNotReady": DatasetNotReadyFault, "uploadBreak": UploadBreakFault,
    "kernelFail": KernelFailFault, "staleMount": StaleMountFault,
}


def validate_entry(kind: str, entry: Any, where: str | None = None) -> dict[str, Any]:
    """One entry, complete with its defaults; a :class:`LocalKaggleError` that names it when invalid."""
    where = where or f"faults.{kind}"
    if kind not in MODELS:
        raise LocalKaggleError(f"unknown fault kind {kind!r}{_guess(kind, KINDS)}", hint=f"known: {', '.join(KINDS)}")
    if not isinstance(entry, dict):
        raise LocalKaggleError(f"{where} must be an object, not {type(entry).__name__}")
    try:
        return MODELS[kind].model_validate(entry).complete()
    except ValidationError as exc:
        raise LocalKaggleError(f"{where}: {_first_problem(exc, kind)}", hint=_fields_hint(kind)) from None


def validate_document(document: Any) -> dict[str, list[dict[str, Any]]]:
    """A whole faults document (the admin POST body, faults.json), every kind present, every entry complete."""
    if not isinstance(document, dict):
        raise LocalKaggleError("the faults document must be a JSON object", hint=f"keys: {', '.join(KINDS)}")
    unknown = sorted(set(document) - set(KINDS))
    if unknown:
        guesses = "".join(_guess(name, KINDS) for name in unknown[:1])
        raise LocalKaggleError(f"unknown fault kinds {unknown}{guesses}", hint=f"known: {', '.join(KINDS)}")
    doc: dict[str, list[dict[str, Any]]] = {}
    for kind in KINDS:
        entries = document.get(kind, [])
        if not isinstance(entries, list):
            raise LocalKaggleError(f"faults.{kind} must be a list of objects")
        doc[kind] = [validate_entry(kind, entry, f"faults.{kind}[{index}]") for index, entry in enumerate(entries)]
    return doc


def _first_problem(exc: ValidationError, kind: str) -> str:
    error = exc.errors()[0]
    field = str(error["loc"][0])  # the entries are flat: the rest of a loc names a union's member (phase's enum)
    if error["type"] == "extra_forbidden":
        return f"unknown field {field!r}{_guess(field, list(MODELS[kind].model_fields))}"
    if error["type"] == "missing":
        return f"{field!r} is required"
    return f"{field!r}: {_union_message(exc, error)} (got {error.get('input')!r})"


def _union_message(exc: ValidationError, first: ErrorDetails) -> str:
    """A union's members' expected values as one list ('commit', 'rerun' or 'any'), else pydantic's message."""
    expected = [str(error["ctx"]["expected"]) for error in exc.errors()
                if error["loc"][:1] == first["loc"][:1] and "expected" in error.get("ctx", {})]
    if len(first["loc"]) < 2 or len(expected) < 2:
        return str(first["msg"])
    values = [value.strip() for text in expected for value in text.replace(" or ", ",").split(",") if value.strip()]
    return f"Input should be {', '.join(values[:-1])} or {values[-1]}"


def _fields_hint(kind: str) -> str:
    return f"a {kind} fault takes: {', '.join(MODELS[kind].model_fields)}"


def _guess(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
