"""What ``kernel.toml``'s values may be, and the typed error a validator raises when one is not.

The models of :mod:`builder.project.spec` check their fields with these tables and helpers. A check that
fails raises :func:`spec_error` with a :class:`SpecErrorType`: a pydantic custom error whose type keys
the hint shown with it (:data:`builder.project.spec_errors.HINTS`), so a hint never depends on the
message's wording.
"""

from __future__ import annotations

import difflib
import re
import shlex
import string
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from builder.kkb_runtime.postprocess import STAGES as POSTPROCESS_STAGES
from builder.kkb_runtime.vocabulary import PostprocessKind, StrEnum
from builder.project.ids import kernel_slug


class SpecErrorType(StrEnum):
    """The errors of kernel.toml that carry a hint of their own (``spec_errors.HINTS``)."""

    SLUG_MISMATCH = "kkb_slug_mismatch"  # [kernel] slug is not the title's
    TITLE_SLUG_TOO_SHORT = "kkb_title_slug_too_short"  # the title gives a slug under 5 characters
    RUN_UNSPLITTABLE = "kkb_run_unsplittable"  # a step's run string is no command line (an open quote)
    RUN_PLACEHOLDER = "kkb_run_placeholder"  # an unknown or malformed {placeholder} in a run string
    UNKNOWN_MODEL = "kkb_unknown_model"  # --model NAME names no [[models]] card
    UNKNOWN_TTA = "kkb_unknown_tta"  # a TTA name that is neither built in nor 'package.module:function'
    INTERNET_ON = "kkb_internet_on"  # [kernel] internet = true
    INPUT_KIND = "kkb_input_kind"  # [[inputs]] kind is not dataset, model or notebook
    INPUT_UNVERSIONED = "kkb_input_unversioned"  # a model input without its version
    INPUT_FRAMEWORK = "kkb_input_framework"  # a model input's framework segment is not Kaggle's
    INPUTS_NOT_UNIQUE = "kkb_inputs_not_unique"  # two [[inputs]] with one name or one mount path
    INPUT_REFERENCE = "kkb_input_reference"  # an input reference of the wrong shape



class StrictModel(BaseModel):
    """Every table of ``kernel.toml``: unknown keys refused (with "did you mean"), frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

def spec_error(kind: SpecErrorType, message: str) -> PydanticCustomError:
    """The error a validator raises: pydantic reports ``message`` as it is (no context: braces stay braces)."""
    return PydanticCustomError(kind.value, message)


def close_match(value: str, choices: Sequence[str]) -> str | None:
    """The one choice close to ``value`` (a typo), if any."""
    return next(iter(difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)), None)


def did_you_mean(value: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for a typo of one of ``choices``, else nothing."""
    close = close_match(value, choices)
    return f" (did you mean '{close}'?)" if close else ""


# Kaggle's accelerator names as of 2026 (kaggle-cli docs/kernels.md). The server passes the
# string through unvalidated, so a typo here would silently give a CPU session: check it.
MACHINE_SHAPES = (
    "NvidiaTeslaT4",
    "NvidiaTeslaT4Highmem",
    "NvidiaTeslaP100",
    "NvidiaTeslaA100",
    "NvidiaL4",
    "NvidiaL4X1",
    "NvidiaH100",
    "NvidiaRtxPro6000",
    "TpuV38",
    "Tpu1VmV38",
    "TpuV5E8",
    "TpuV6E8",
)
# `enable_gpu` alone gives a P100, which the current image's torch no longer supports (sm_60).
DEFAULT_GPU_SHAPE = "NvidiaTeslaT4"
DEFAULT_TPU_SHAPE = "TpuV5E8"
# [kernel] accelerator's words for a default shape (none: a CPU session).
ACCELERATOR_SHAPES: dict[str, str | None] = {"gpu": DEFAULT_GPU_SHAPE, "tpu": DEFAULT_TPU_SHAPE, "none": None}
ACCELERATORS = tuple(ACCELERATOR_SHAPES)
# Compile only for the GPU the kernel will get: a full TORCH_CUDA_ARCH_LIST multiplies apex's build time.
CUDA_ARCH = {"NvidiaTeslaT4": "7.5", "NvidiaTeslaT4Highmem": "7.5", "NvidiaTeslaP100": "6.0",
             "NvidiaTeslaA100": "8.0", "NvidiaL4": "8.9", "NvidiaL4X1": "8.9", "NvidiaH100": "9.0",
             "NvidiaRtxPro6000": "12.0"}
RETIRED_SHAPES = ("NvidiaTeslaP100", "TpuV38")

SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
OWNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
# 'package.module:function' in the code dataset.
REFERENCE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
# What kkb_runtime.steps fills in a step's `run` string.
STEP_PLACEHOLDERS = ("out", "code", "weights", "data", "python")
# kkb_runtime.cards.image.tta.BUILTIN_NAMES (not imported: the runtime package imports pandas).
TTA_NAMES = ("hflip", "vflip", "hvflip", "transpose", "rot90", "rot180", "rot270")
TTA_WEIGHT_NAMES = ("identity", "random", *TTA_NAMES)

INPUT_KINDS = ("dataset", "model", "notebook")
# kernel-metadata.json's list for each kind, and the form of a reference in it.
INPUT_SOURCES = {"dataset": "dataset_sources", "model": "model_sources", "notebook": "kernel_sources"}
INPUT_FORMS = {"dataset": "owner/slug or owner/slug/VERSION",
               "model": "owner/model/framework/variation/VERSION",
               "notebook": "owner/kernel-slug or owner/kernel-slug/VERSION"}
# Kaggle's model frameworks as they appear in model_sources and mount paths (kagglesdk ModelFramework, lower-case).
MODEL_FRAMEWORKS = ("tensorflow1", "tensorflow2", "tflite", "tfjs", "pytorch", "jax", "flax", "pax", "maxtext",
                    "gemmacpp", "ggml", "gguf", "coral", "scikitlearn", "mxnet", "onnx", "keras", "transformers",
                    "api", "other", "tensorrtllm", "triton", "vllm")
_REF_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

MAX_WAIT_SECONDS = 48 * 3600  # no wait of push/submit is unbounded: a 12 h run plus a day of queueing at most


def relative_path(value: str) -> str:
    """A path or glob inside the kernel folder: relative, POSIX, and never climbing out."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"'{value}' must be a relative path inside the kernel folder (no '..', no absolute path)")
    return value


def check_title_slug(title: str) -> str:
    derived = kernel_slug(title)
    if len(derived) < 5:  # the kaggle client refuses kernel slugs under five characters
        raise spec_error(SpecErrorType.TITLE_SLUG_TOO_SHORT,
                         f"'{title}' gives the kernel slug '{derived}'; Kaggle needs a slug of at least 5 characters")
    return title


def check_slug_of_title(slug: str | None, title: str) -> None:
    derived = kernel_slug(title)
    if slug is not None and slug != derived:
        raise spec_error(SpecErrorType.SLUG_MISMATCH, f"slug '{slug}' does not match the title: Kaggle derives the slug "
                                                      f"from the title, and '{title}' gives '{derived}'")


def check_username(value: str | None) -> str | None:
    if value is not None and not OWNER_RE.match(value):
        raise ValueError(f"'{value}' is not a Kaggle username")
    return value


def check_competition_slug(value: str) -> str:
    if not SLUG_RE.match(value):
        raise ValueError(f"'{value}' is not a competition slug (lowercase letters, digits and '-', no 'c/' prefix)")
    return value


def check_id(value: str | None, what: str, *, shortest: int, slug_name: str = "slug", strict_owner: bool = True) -> str | None:
    """An ``owner/slug`` id of a dataset, model or kernel (``strict_owner``: the owner a Kaggle username)."""
    if value is None:
        return None
    owner, _, slug = value.partition("/")
    owner_ok = bool(OWNER_RE.match(owner)) if strict_owner else bool(owner)
    if not owner_ok or not SLUG_RE.match(slug) or not shortest <= len(slug) <= 50:
        raise ValueError(f"'{value}' is not {what}: write 'owner/{slug_name}', slug of {shortest}-50 lowercase letters, "
                         "digits and '-'")
    return value


def check_competition_paths(values: list[str]) -> list[str]:
    """``[evaluation_api] gateway_paths``: relative to the competition folder."""
    for value in values:
        if not value or PurePosixPath(value).is_absolute() or ".." in PurePosixPath(value).parts:
            raise ValueError(f"'{value}' must be a path relative to the competition folder, e.g. 'test.csv'")
    return values


def check_folder(value: str | None) -> str | None:
    # Where `kaggle competitions download` unpacked it: relative to the kernel folder, absolute, or ~/...
    if value is not None and not value.strip():
        raise ValueError("must name a folder (relative to the kernel folder, absolute, or ~/...)")
    return value


def check_file_name(value: str) -> str:
    if "/" in value or "\\" in value or not value:
        raise ValueError(f"'{value}' must be a file name; Kaggle reads it from /kaggle/working")
    return value


def check_some_columns(values: list[str]) -> list[str]:
    # Only a value written in kernel.toml gets here (leaving the key out keeps the default).
    if not values:
        raise ValueError("an empty list names no column to predict; list them, e.g. [\"target\"], or leave target_columns out")
    return values


def check_accelerator(value: str) -> str:
    if value in ACCELERATORS or value in MACHINE_SHAPES:
        return value
    guess = did_you_mean(value, [*MACHINE_SHAPES, *ACCELERATORS])
    raise ValueError(f"unknown accelerator '{value}'{guess}; use gpu, tpu, none or one of: {', '.join(MACHINE_SHAPES)}")


def check_framework(value: str) -> str:
    if value in MODEL_FRAMEWORKS:
        return value
    guess = did_you_mean(value.lower(), MODEL_FRAMEWORKS)
    raise ValueError(f"unknown framework '{value}'{guess}; Kaggle's are: {', '.join(MODEL_FRAMEWORKS)}")


def check_tta_names(names: list[str]) -> list[str]:
    for name in names:
        if name not in TTA_NAMES and not REFERENCE_RE.match(name):
            raise spec_error(SpecErrorType.UNKNOWN_TTA, f"unknown TTA '{name}'{did_you_mean(name, TTA_NAMES)}; "
                                                        f"use {', '.join(TTA_NAMES)} or 'package.module:function'")
    return names


def check_env_names(env: dict[str, str]) -> dict[str, str]:
    """A step's own environment: variable names, none of those kkb sets for every step."""
    for name in env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise ValueError(f"'{name}' is not an environment variable name (letters, digits and '_')")
        if name.startswith("KKB_") or name in ("PYTHONPATH", "KAGGLE_IS_COMPETITION_RERUN"):
            raise ValueError(f"'{name}' is set by kkb for every step; a step cannot override it")
    return env


def check_run_string(value: str) -> str:
    """A step's ``run``: a command line whose placeholders kkb fills."""
    # The same parsing as kkb_runtime.steps.step_command, so a mistake shows here and not in the kernel.
    try:
        parts = shlex.split(value)
    except ValueError as exc:
        raise spec_error(SpecErrorType.RUN_UNSPLITTABLE, f"cannot split {value!r} into a command line: {exc}") from None
    known = ", ".join("{" + name + "}" for name in STEP_PLACEHOLDERS)
    for part in parts:
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(part) if field is not None]
        except ValueError as exc:
            raise spec_error(SpecErrorType.RUN_PLACEHOLDER, f"{part!r}: {exc}; write {{{{ and }}}} for a literal brace") from None
        for field in fields:
            if field not in STEP_PLACEHOLDERS:
                close = close_match(field, STEP_PLACEHOLDERS)
                guess = f" (did you mean '{{{close}}}'?)" if close else ""
                raise spec_error(SpecErrorType.RUN_PLACEHOLDER,
                                 f"unknown placeholder '{{{field}}}'{guess}; the placeholders are {known}")
    return value


def check_requirements(values: list[str]) -> list[str]:
    """``[install] requirements``: each one a pip requirement."""
    from packaging.requirements import InvalidRequirement, Requirement

    for value in values:
        try:
            Requirement(value)
        except InvalidRequirement as exc:
            raise ValueError(f"'{value}' is not a pip requirement: {exc}") from None
    return values


def check_input_kind(value: str) -> str:
    if value in INPUT_KINDS:
        return value
    aliases = {"kernel": "notebook", "datasets": "dataset", "models": "model", "notebooks": "notebook",
               "competition": None}
    guess = aliases.get(value) or close_match(value, INPUT_KINDS)
    hint = f" (did you mean '{guess}'?)" if guess else ""
    extra = "; the competition's data comes from [competition]" if value == "competition" else ""
    raise spec_error(SpecErrorType.INPUT_KIND, f"unknown input kind '{value}'{hint}; use {', '.join(INPUT_KINDS)}{extra}")


def check_unique(values: Sequence[str], what: str, kind: SpecErrorType | None = None) -> None:
    """``values`` (``what``: "[[steps]] names") hold no name twice."""
    duplicates = sorted({value for value in values if values.count(value) > 1})
    if duplicates:
        message = f"{what} must be unique; repeated: {', '.join(duplicates)}"
        raise spec_error(kind, message) if kind is not None else ValueError(message)


def predict_model_of(run: str) -> str | None:
    """The card a ``python -m kkb_runtime predict --model NAME`` run string runs, else None."""
    parts = shlex.split(run)
    if "kkb_runtime" not in parts or "predict" not in parts:
        return None
    for index, part in enumerate(parts):
        if part == "--model":
            return parts[index + 1] if index + 1 < len(parts) else ""
        if part.startswith("--model="):
            return part.partition("=")[2]
    return None


def check_stage_keys(kind: PostprocessKind, given: set[str], values: Mapping[str, object]) -> None:
    """A ``[[postprocess]]`` stage gives only the keys its kind takes, and what it needs: the runtime's table says which
    (``kkb_runtime.postprocess.STAGES``), so the spec and the kernel cannot disagree."""
    stage = POSTPROCESS_STAGES[kind]
    stray = sorted(key for key in given if key not in stage.keys)
    if stray:
        raise ValueError(f"kind = '{kind}' takes {', '.join(sorted(stage.keys))}, not {', '.join(stray)}")
    lacking = stage.lacks(values)
    if lacking:
        raise ValueError(lacking)


def parse_input_ref(kind: str, ref: str) -> tuple[str, ...]:
    """The parts of an input reference (a ``ValueError``, typed for its hint, naming the form expected)."""
    parts = tuple(ref.split("/"))
    form = INPUT_FORMS[kind]
    bad = spec_error(SpecErrorType.INPUT_REFERENCE, f"'{ref}' is not a {kind} reference: write {form}")
    if any(not _REF_PART.match(part) for part in parts):
        raise bad
    if kind == "model":
        if len(parts) == 4:
            raise spec_error(SpecErrorType.INPUT_UNVERSIONED,
                             f"model '{ref}' has no version: write {form} (Kaggle attaches one model version)")
        if len(parts) != 5 or not parts[4].isdigit():
            raise bad
        if parts[2] not in MODEL_FRAMEWORKS:
            guess = did_you_mean(parts[2].lower(), MODEL_FRAMEWORKS)
            raise spec_error(SpecErrorType.INPUT_FRAMEWORK, f"model '{ref}': unknown framework '{parts[2]}'{guess}; "
                                                            f"Kaggle's are: {', '.join(MODEL_FRAMEWORKS)}")
        return parts
    if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].isdigit()):
        raise bad
    return parts


__all__ = [
    "StrictModel",
    "ACCELERATORS", "ACCELERATOR_SHAPES", "CUDA_ARCH", "DEFAULT_GPU_SHAPE", "DEFAULT_TPU_SHAPE", "INPUT_FORMS", "INPUT_KINDS",
    "INPUT_SOURCES", "MACHINE_SHAPES", "MAX_WAIT_SECONDS", "MODEL_FRAMEWORKS", "OWNER_RE", "REFERENCE_RE", "RETIRED_SHAPES",
    "SLUG_RE", "STEP_PLACEHOLDERS", "TTA_NAMES", "TTA_WEIGHT_NAMES", "SpecErrorType", "check_accelerator",
    "check_competition_paths", "check_competition_slug", "check_env_names", "check_file_name", "check_folder", "check_framework", "check_id",
    "check_input_kind", "check_requirements", "check_run_string", "check_slug_of_title", "check_some_columns", "check_stage_keys", "check_title_slug",
    "check_tta_names", "check_unique", "check_username", "close_match", "did_you_mean", "parse_input_ref",
    "predict_model_of", "relative_path", "spec_error",
]
