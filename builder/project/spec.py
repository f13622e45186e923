"""``kernel.toml``: the kernel project's spec, validated at the boundary.

Everything the rest of kkb knows about a kernel project comes from :func:`load_spec`, which returns
frozen pydantic models (``extra="forbid"``). Any problem becomes a :class:`~builder.errors.SpecError`
that names the file, the key, what was wrong, and how to fix it; unknown keys get a "did you mean".
"""

from __future__ import annotations

import difflib
import re
import shlex
import string
import sys
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from builder.errors import SpecError
from builder.project.examples import example_spec_hint
from builder.project.ids import kernel_slug

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SPEC_FILE = "kernel.toml"

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
# Compile only for the GPU the kernel will get: a full TORCH_CUDA_ARCH_LIST multiplies apex's build time.
CUDA_ARCH = {"NvidiaTeslaT4": "7.5", "NvidiaTeslaT4Highmem": "7.5", "NvidiaTeslaP100": "6.0",
             "NvidiaTeslaA100": "8.0", "NvidiaL4": "8.9", "NvidiaL4X1": "8.9", "NvidiaH100": "9.0",
             "NvidiaRtxPro6000": "12.0"}
RETIRED_SHAPES = ("NvidiaTeslaP100", "TpuV38")

_SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_OWNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
# What kkb_runtime.steps fills in a step's `run` string.
STEP_PLACEHOLDERS = ("out", "code", "weights", "data", "python")
# kkb_runtime.tta.BUILTIN_NAMES (not imported: the runtime package imports pandas).
TTA_NAMES = ("hflip", "vflip", "hvflip", "transpose", "rot90", "rot180", "rot270")
_TTA_FUNCTION_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def _relative_path(value: str) -> str:
    """A path or glob inside the kernel folder: relative, POSIX, and never climbing out."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"'{value}' must be a relative path inside the kernel folder (no '..', no absolute path)")
    return value


RelativePath = Annotated[str, Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KernelSection(_Strict):
    title: str = Field(min_length=5, max_length=50)
    slug: str | None = None
    owner: str | None = None
    private: bool = True
    accelerator: str = "gpu"
    internet: bool = False
    kernel_type: Literal["notebook", "script"] = "notebook"
    docker_image_pinning: Literal["original", "latest"] | None = "original"
    docker_image: str | None = None
    timeout_seconds: int | None = Field(default=None, gt=0)

    @field_validator("title")
    @classmethod
    def _title_gives_a_slug(cls, value: str) -> str:
        derived = kernel_slug(value)
        if len(derived) < 5:  # the kaggle client refuses kernel slugs under five characters
            raise ValueError(f"'{value}' gives the kernel slug '{derived}'; Kaggle needs a slug of at least 5 characters")
        return value

    @field_validator("owner")
    @classmethod
    def _owner_shape(cls, value: str | None) -> str | None:
        if value is not None and not _OWNER_RE.match(value):
            raise ValueError(f"'{value}' is not a Kaggle username")
        return value

    @field_validator("accelerator")
    @classmethod
    def _known_accelerator(cls, value: str) -> str:
        if value in ("gpu", "tpu", "none") or value in MACHINE_SHAPES:
            return value
        close = difflib.get_close_matches(value, [*MACHINE_SHAPES, "gpu", "tpu", "none"], n=1, cutoff=0.6)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"unknown accelerator '{value}'{guess}; use gpu, tpu, none or one of: {', '.join(MACHINE_SHAPES)}")

    @model_validator(mode="after")
    def _slug_matches_title(self) -> KernelSection:
        derived = kernel_slug(self.title)
        if self.slug is not None and self.slug != derived:
            raise ValueError(
                f"slug '{self.slug}' does not match the title: Kaggle derives the slug from the title, "
                f"and '{self.title}' gives '{derived}'"
            )
        return self

    @property
    def kernel_slug(self) -> str:
        return self.slug or kernel_slug(self.title)

    @property
    def machine_shape(self) -> str | None:
        if self.accelerator == "gpu":
            return DEFAULT_GPU_SHAPE
        if self.accelerator == "tpu":
            return DEFAULT_TPU_SHAPE
        if self.accelerator == "none":
            return None
        return self.accelerator

    @property
    def uses_gpu(self) -> bool:
        shape = self.machine_shape
        return shape is not None and shape.startswith("Nvidia")

    @property
    def uses_tpu(self) -> bool:
        shape = self.machine_shape
        return shape is not None and shape.startswith("Tpu")


class CompetitionSection(_Strict):
    slug: str
    data: str | None = None
    sample_submission: str = "sample_submission.csv"
    test: str | None = None
    hidden_rows: int | None = Field(default=None, gt=0)
    time_limit_hours: float = Field(default=9.0, gt=0)
    # The file Kaggle looks for in /kaggle/working; only a competition that declares another name changes it.
    submission_file: str = "submission.csv"

    @field_validator("slug")
    @classmethod
    def _slug_shape(cls, value: str) -> str:
        if not _SLUG_RE.match(value):
            raise ValueError(f"'{value}' is not a competition slug (lowercase letters, digits and '-', no 'c/' prefix)")
        return value

    @field_validator("sample_submission", "test")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value)

    @field_validator("data")
    @classmethod
    def _anywhere(cls, value: str | None) -> str | None:
        # Where `kaggle competitions download` unpacked it: relative to the kernel folder, absolute, or ~/...
        if value is not None and not value.strip():
            raise ValueError("must name a folder (relative to the kernel folder, absolute, or ~/...)")
        return value

    def data_dir(self, kernel_dir: Path) -> Path | None:
        """``data`` resolved: ``~`` expanded, a relative path taken from the kernel folder."""
        return None if self.data is None else Path(kernel_dir) / Path(self.data).expanduser()


class FileSelection(_Strict):
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    dataset: str | None = None
    title: str | None = Field(default=None, min_length=6, max_length=50)

    @field_validator("include", "exclude")
    @classmethod
    def _patterns_inside(cls, values: list[str]) -> list[str]:
        return [_relative_path(value) for value in values]

    @field_validator("dataset")
    @classmethod
    def _dataset_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        owner, _, slug = value.partition("/")
        if not owner or not slug or not _SLUG_RE.match(slug) or not 6 <= len(slug) <= 50:
            raise ValueError(f"'{value}' is not a dataset id: write 'owner/slug', slug of 6-50 lowercase letters, digits and '-'")
        return value


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


class WeightsSelection(FileSelection):
    """``[weights]``: the files, and how they are published: a dataset (default) or a Kaggle Model.

    With ``publish = "model"`` the weights become versions of the Model variation
    ``<model>/<framework>/<variation>`` (``model`` defaults to ``<owner>/<kernel-slug>-weights``), attached
    through ``model_sources`` and mounted at ``/kaggle/input/models/<owner>/<model>/<framework>/<variation>/<N>``.
    """

    publish: Literal["dataset", "model"] = "dataset"
    model: str | None = None
    framework: str = "other"
    variation: str = Field(default="default", pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    license: str = "Apache 2.0"

    @field_validator("model")
    @classmethod
    def _model_id(cls, value: str | None) -> str | None:
        owner, _, slug = (value or "").partition("/")
        if value is not None and (not _OWNER_RE.match(owner) or not _SLUG_RE.match(slug) or not 3 <= len(slug) <= 50):
            raise ValueError(f"'{value}' is not a model id: write 'owner/model-slug', slug of 3-50 lowercase letters, digits and '-'")
        return value

    @field_validator("framework")
    @classmethod
    def _known_framework(cls, value: str) -> str:
        if value in MODEL_FRAMEWORKS:
            return value
        close = difflib.get_close_matches(value.lower(), MODEL_FRAMEWORKS, n=1, cutoff=0.6)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"unknown framework '{value}'{guess}; Kaggle's are: {', '.join(MODEL_FRAMEWORKS)}")

    @model_validator(mode="after")
    def _model_keys_need_model(self) -> WeightsSelection:
        if self.publish == "dataset" and self.model is not None:
            raise ValueError("model is set but publish = 'dataset': set publish = 'model' to publish the weights as a Kaggle Model")
        if self.publish == "model" and self.dataset is not None:
            raise ValueError("dataset is set but publish = 'model': name the Model with model = 'owner/slug' instead")
        return self


_REFERENCE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
TTA_WEIGHT_NAMES = ("identity", "random", *TTA_NAMES)


class RandomTta(_Strict):
    """N seeded random passes of an albumentations pipeline (``A.save``'d), before the card's own pipeline."""

    transforms: str
    passes: int = Field(gt=0, le=64)
    seed: int = 0

    @field_validator("transforms")
    @classmethod
    def _inside(cls, value: str) -> str:
        return _relative_path(value)


class ModelCard(_Strict):
    """What the kernel needs to rebuild one model offline. Completed at build time by ``builder.bundle.models``.

    ``arch`` (a timm architecture) or ``factory`` (``package.module:function`` in the code dataset,
    called with ``model_kwargs``, returning the ``nn.Module``). ``checkpoint`` is one file, a glob or a
    list: several are folds of one architecture, run one after another and averaged (``fold_weights``).
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    arch: str | None = None
    factory: str | None = None
    checkpoint: str | list[str]
    fold_weights: list[float] | None = None
    num_classes: int = Field(gt=0)
    in_chans: int = Field(default=3, gt=0)
    input_size: tuple[int, int] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    interpolation: str | None = None
    transforms: str | None = None
    tta: list[str] = Field(default_factory=list)
    tta_weights: dict[str, float] = Field(default_factory=dict)
    tta_random: RandomTta | None = None
    batch_size: int = Field(default=32, gt=0)
    num_workers: int = Field(default=2, ge=0)
    activation: Literal["softmax", "sigmoid", "none"] = "softmax"
    features: bool = False
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    half: bool = False
    safetensors: bool = True
    # Which entry of a training checkpoint holds the weights; None: timm's order (EMA first).
    checkpoint_key: str | None = None
    # Checkpoints saved by another wrapper: applied in this order, after module./_orig_mod. are stripped.
    strip_prefix: str | None = None
    key_rename: list[tuple[str, str]] = Field(default_factory=list)
    add_prefix: str | None = None
    # false: load what fits, listing the missing and unexpected keys in the build output (never shapes).
    strict: bool = True
    # true: this card's checkpoints may run pickled code (torch.load weights_only=False); recorded in the build.
    allow_pickle: bool = False
    amp: bool = True

    @field_validator("transforms")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value)

    @field_validator("checkpoint")
    @classmethod
    def _checkpoints_inside(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            if not value:
                raise ValueError("an empty list: name at least one checkpoint")
            return [_relative_path(item) for item in value]
        return _relative_path(value)

    @field_validator("factory")
    @classmethod
    def _factory_reference(cls, value: str | None) -> str | None:
        if value is not None and not _REFERENCE_RE.match(value):
            raise ValueError(f"'{value}' is not 'package.module:function' (a function of your code that returns the nn.Module)")
        return value

    @field_validator("key_rename")
    @classmethod
    def _patterns_compile(cls, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        for pattern, _ in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"'{pattern}' is not a regular expression: {exc}") from None
        return value

    @field_validator("tta")
    @classmethod
    def _known_tta(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in TTA_NAMES and not _TTA_FUNCTION_RE.match(name):
                close = difflib.get_close_matches(name, TTA_NAMES, n=1, cutoff=0.6)
                guess = f" (did you mean '{close[0]}'?)" if close else ""
                raise ValueError(f"unknown TTA '{name}'{guess}; use {', '.join(TTA_NAMES)} or 'package.module:function'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ModelCard:
        if (self.arch is None) == (self.factory is None):
            raise ValueError(f"[[models]] '{self.name}': set exactly one of arch (a timm architecture) "
                             "or factory ('package.module:function' returning the nn.Module)")
        if self.fold_weights is not None:
            if isinstance(self.checkpoint, str) and not any(ch in self.checkpoint for ch in "*?["):
                raise ValueError(f"[[models]] '{self.name}': fold_weights needs several checkpoints (a list or a glob)")
            if isinstance(self.checkpoint, list) and len(self.fold_weights) != len(self.checkpoint):
                raise ValueError(f"[[models]] '{self.name}': {len(self.fold_weights)} fold_weights for "
                                 f"{len(self.checkpoint)} checkpoints")
            if any(weight < 0 for weight in self.fold_weights) or not sum(self.fold_weights) > 0:
                raise ValueError(f"[[models]] '{self.name}': fold_weights must be >= 0 with a positive sum")
        views = {"identity", *self.tta, *(["random"] if self.tta_random else [])}
        unknown = sorted(set(self.tta_weights) - views)
        if unknown:
            raise ValueError(f"[[models]] '{self.name}': tta_weights names {', '.join(unknown)}, which this card does not "
                             f"run; its views: {', '.join(sorted(views))}")
        if any(weight < 0 for weight in self.tta_weights.values()):
            raise ValueError(f"[[models]] '{self.name}': tta_weights must be >= 0")
        return self

    @property
    def checkpoint_patterns(self) -> list[str]:
        return list(self.checkpoint) if isinstance(self.checkpoint, list) else [self.checkpoint]


class SourcePackage(_Strict):
    name: str
    path: str
    cpp_ext: bool = False
    cuda_ext: bool = False
    extra_env: dict[str, str] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        return _relative_path(value)


class InstallSection(_Strict):
    """Extra packages the kernel installs offline (``kkb wheels``, issue 7).

    * ``requirements`` / ``requirements_file``: what the install cell installs, as pip requirements.
      ``kkb wheels`` resolves them with every transitive dependency into a wheelhouse, for the image's
      ``python_version`` and ``platform`` (the newest manylinux the image satisfies; older manylinux tags
      are accepted too), leaving out what the Kaggle image already has (kkb's list plus ``exclude``,
      shell-style patterns such as ``nvidia-*``). A package named in ``requirements`` is shipped even if
      the image has it (you asked for that version); one in ``exclude`` never is.
    * ``wheelhouse``: *where* the wheels come from, as ``owner/slug``. By default kkb builds it:
      ``<owner>/<kernel-slug>-wheels``, which is a dataset (``kkb wheels``, in ``build/NAME/wheels/``)
      or, with ``on_kaggle = true``, the helper kernel of that name whose output holds wheels built in
      Kaggle's own image (``kkb wheels --on-kaggle``; attached through ``kernel_sources``). Set it to
      share one wheelhouse between kernels; kkb still builds and uploads it under that id. The
      inference kernel attaches it whenever there are requirements (or, on Kaggle, source packages).
    * ``source_packages``: trees in the kernel folder that compile (NVIDIA apex). They go into the code
      dataset automatically; the install cell compiles them (``cpp_ext``/``cuda_ext``,
      ``TORCH_CUDA_ARCH_LIST`` for the machine shape), or with ``on_kaggle`` installs the wheels the
      helper kernel built from them.
    """

    requirements: list[str] = Field(default_factory=list)
    requirements_file: str | None = None
    wheelhouse: str | None = None
    on_kaggle: bool = False
    source_packages: list[SourcePackage] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    python_version: str = Field(default="3.12", pattern=r"^3\.\d{1,2}$")
    # Kaggle's image is built on Colab's Ubuntu 22.04 base (glibc 2.35).
    platform: str = "manylinux_2_35_x86_64"
    pip_version: str | None = None

    @field_validator("requirements_file")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value)

    @field_validator("requirements")
    @classmethod
    def _pip_requirements(cls, values: list[str]) -> list[str]:
        from packaging.requirements import InvalidRequirement, Requirement

        for value in values:
            try:
                Requirement(value)
            except InvalidRequirement as exc:
                raise ValueError(f"'{value}' is not a pip requirement: {exc}") from None
        return values

    @field_validator("wheelhouse")
    @classmethod
    def _wheelhouse_id(cls, value: str | None) -> str | None:
        owner, _, slug = (value or "").partition("/")
        if value is not None and (not _OWNER_RE.match(owner) or not _SLUG_RE.match(slug) or not 6 <= len(slug) <= 50):
            raise ValueError(f"'{value}' is not a dataset or kernel id: write 'owner/slug', slug of 6-50 lowercase letters, digits and '-'")
        return value

    @model_validator(mode="after")
    def _unique_sources(self) -> InstallSection:
        names = [package.name for package in self.source_packages]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"[[install.source_packages]] names must be unique; repeated: {', '.join(duplicates)}")
        return self


class Step(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    run: str = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0)
    timeout_seconds: int | None = Field(default=None, gt=0)
    # Environment variables for this step's process only (OMP_NUM_THREADS, a library's switch, ...).
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                raise ValueError(f"'{name}' is not an environment variable name (letters, digits and '_')")
            if name.startswith("KKB_") or name in ("PYTHONPATH", "KAGGLE_IS_COMPETITION_RERUN"):
                raise ValueError(f"'{name}' is set by kkb for every step; a step cannot override it")
        return value

    @field_validator("run")
    @classmethod
    def _runnable(cls, value: str) -> str:
        # The same parsing as kkb_runtime.steps.step_command, so a mistake shows here and not in the kernel.
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split {value!r} into a command line: {exc}") from None
        known = ", ".join("{" + name + "}" for name in STEP_PLACEHOLDERS)
        for part in parts:
            try:
                fields = [field for _, field, _, _ in string.Formatter().parse(part) if field is not None]
            except ValueError as exc:
                raise ValueError(f"{part!r}: {exc}; write {{{{ and }}}} for a literal brace") from None
            for field in fields:
                if field not in STEP_PLACEHOLDERS:
                    close = difflib.get_close_matches(field, STEP_PLACEHOLDERS, n=1, cutoff=0.6)
                    guess = f" (did you mean '{{{close[0]}}}'?)" if close else ""
                    raise ValueError(f"unknown placeholder '{{{field}}}'{guess}; the placeholders are {known}")
        return value

    @property
    def predict_model(self) -> str | None:
        """The card a ``python -m kkb_runtime predict --model NAME`` step runs, else None."""
        parts = shlex.split(self.run)
        if "kkb_runtime" not in parts or "predict" not in parts:
            return None
        for index, part in enumerate(parts):
            if part == "--model":
                return parts[index + 1] if index + 1 < len(parts) else ""
            if part.startswith("--model="):
                return part.partition("=")[2]
        return None


class SubmissionSection(_Strict):
    file: str = "submission.csv"
    id_column: str = "id"
    target_columns: list[str] = Field(default_factory=list)
    # What the steps write and combine averages, when [[postprocess]] turns them into the targets
    # (five class probabilities before an argmax into `label`); default: the target columns.
    prediction_columns: list[str] = Field(default_factory=list)
    # Column -> "int", "float" or "str" ("*": every target), where the sample's placeholders mislead
    # (integer 0s in a sample of a competition scored on probabilities).
    column_types: dict[str, Literal["int", "float", "str"]] = Field(default_factory=dict)
    decimals: int | None = Field(default=6, ge=0, le=15)
    combine: Literal["mean", "weighted_mean", "rank_mean"] = "mean"
    kind: Literal["csv", "evaluation-api"] = "csv"

    @field_validator("file")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if "/" in value or "\\" in value or not value:
            raise ValueError(f"'{value}' must be a file name; Kaggle reads it from /kaggle/working")
        return value

    @field_validator("target_columns")
    @classmethod
    def _some_columns(cls, values: list[str]) -> list[str]:
        # Only a value written in kernel.toml gets here (leaving the key out keeps the default).
        if not values:
            raise ValueError("an empty list names no column to predict; list them, e.g. [\"target\"], "
                             "or leave target_columns out")
        return values


POSTPROCESS_KINDS = ("argmax", "threshold", "clip", "function")  # kkb_runtime.postprocess.KINDS


class PostprocessStage(_Strict):
    """One ``[[postprocess]]`` stage after combine (see ``kkb_runtime.postprocess``)."""

    kind: Literal["argmax", "threshold", "clip", "function"]
    columns: list[str] = Field(default_factory=list)
    into: str | None = None
    labels: list[int] | list[str] | None = None
    value: float = 0.5
    min: float | None = None
    max: float | None = None
    function: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")

    @model_validator(mode="after")
    def _keys_for_kind(self) -> PostprocessStage:
        used = {"argmax": {"columns", "into", "labels"}, "threshold": {"columns", "value"},
                "clip": {"columns", "min", "max"}, "function": {"function"}}[self.kind]
        stray = sorted(key for key in self.model_fields_set - {"kind"} if key not in used)
        if stray:
            raise ValueError(f"kind = '{self.kind}' takes {', '.join(sorted(used))}, not {', '.join(stray)}")
        if self.kind == "function" and not self.function:
            raise ValueError("kind = 'function' needs function = 'package.module:function' (DataFrame in, DataFrame out)")
        if self.kind == "clip" and self.min is None and self.max is None:
            raise ValueError("kind = 'clip' needs min, max or both")
        if self.kind == "argmax" and self.labels is not None and self.columns and len(self.labels) != len(self.columns):
            raise ValueError(f"argmax has {len(self.labels)} labels for {len(self.columns)} columns")
        return self


class FastCommitSection(_Strict):
    enabled: bool = True
    # The classic guard: the commit run sees a public test of a handful of rows.
    rows_below: int = Field(default=11, gt=0)
    detect: Literal["env_and_rows", "env"] = "env_and_rows"
    write: Literal["sample", "first_rows"] = "sample"
    first_rows: int = Field(default=5, gt=0)


class EvaluationApiSection(_Strict):
    """Competitions scored through ``kaggle_evaluation`` (issue 8)."""

    # The server module as imported from the competition folder, e.g. "kaggle_evaluation.<comp>_inference_server".
    module: str = Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
    server_class: str = Field(pattern=r"^[A-Za-z_]\w*$")
    # "module:function" in the code dataset; fast_predict answers the commit run when the fast commit applies.
    predict: str = Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
    fast_predict: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
    # Default: the server module with "_inference_server" replaced by "_gateway" (Kaggle's naming).
    gateway_module: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
    gateway_paths: list[str] = Field(default_factory=list)
    startup_limit_seconds: int = Field(default=900, gt=0)
    response_timeout_seconds: int | None = Field(default=None, gt=0)

    @field_validator("gateway_paths")
    @classmethod
    def _paths_inside(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or PurePosixPath(value).is_absolute() or ".." in PurePosixPath(value).parts:
                raise ValueError(f"'{value}' must be a path relative to the competition folder, e.g. 'test.csv'")
        return values




def parse_input_ref(kind: str, ref: str) -> tuple[str, ...]:
    """The parts of an input reference (``ValueError`` naming the form expected when malformed)."""
    parts = tuple(ref.split("/"))
    form = INPUT_FORMS[kind]
    bad = f"'{ref}' is not a {kind} reference: write {form}"
    if any(not _REF_PART.match(part) for part in parts):
        raise ValueError(bad)
    if kind == "model":
        if len(parts) == 4:
            raise ValueError(f"model '{ref}' has no version: write {form} (Kaggle attaches one model version)")
        if len(parts) != 5 or not parts[4].isdigit():
            raise ValueError(bad)
        if parts[2] not in MODEL_FRAMEWORKS:
            close = difflib.get_close_matches(parts[2].lower(), MODEL_FRAMEWORKS, n=1, cutoff=0.6)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"model '{ref}': unknown framework '{parts[2]}'{guess}; Kaggle's are: {', '.join(MODEL_FRAMEWORKS)}")
        return parts
    if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].isdigit()):
        raise ValueError(bad)
    return parts


class InputSection(_Strict):
    """An input kkb does not build, attached as Kaggle attaches it (one kernel-metadata source each).

    ``kind`` picks the list (dataset → ``dataset_sources``, model → ``model_sources``, notebook →
    ``kernel_sources``), ``ref`` is the entry as written there, ``path`` the local stand-in folder the
    dry run mounts where Kaggle would (relative to the kernel folder, absolute, or ``~/…``), ``name``
    what the runtime's ``find_input`` takes (default: the slug, or the model's slug).
    """

    kind: str
    ref: str
    path: str | None = None
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value in INPUT_KINDS:
            return value
        aliases = {"kernel": "notebook", "datasets": "dataset", "models": "model", "notebooks": "notebook",
                   "competition": None}
        guess = aliases.get(value) or next(iter(difflib.get_close_matches(value, INPUT_KINDS, n=1, cutoff=0.6)), None)
        hint = f" (did you mean '{guess}'?)" if guess else ""
        extra = "; the competition's data comes from [competition]" if value == "competition" else ""
        raise ValueError(f"unknown input kind '{value}'{hint}; use {', '.join(INPUT_KINDS)}{extra}")

    @field_validator("ref")
    @classmethod
    def _ref_shape(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        if kind is not None:  # an unknown kind is reported on its own
            parse_input_ref(kind, value)
        return value

    @property
    def parts(self) -> tuple[str, ...]:
        return parse_input_ref(self.kind, self.ref)

    @property
    def input_name(self) -> str:
        return self.name or self.parts[1]

    @property
    def source(self) -> str:
        """kernel-metadata's entry: a dataset or notebook pinned to a version keeps it there too."""
        return self.ref

    @property
    def mount_target(self) -> str:
        """Where Kaggle mounts it under ``/kaggle/input`` (current layout)."""
        parts = self.parts
        if self.kind == "model":
            return "models/" + "/".join(parts)
        return f"{'datasets' if self.kind == 'dataset' else 'notebooks'}/{parts[0]}/{parts[1]}"


MAX_WAIT_SECONDS = 48 * 3600  # no wait of push/submit is unbounded: a 12 h run plus a day of queueing at most


class PushSection(_Strict):
    """How long push and submit wait for Kaggle, in seconds (``--wait-*`` on the command line wins).

    Unset: a dataset version 1800 s to be ready; the kernel run and the scoring the kernel's
    ``timeout_seconds`` (else the competition's time limit) plus an hour of queueing.
    """

    dataset_timeout_s: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, strict=True)
    run_timeout_s: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, strict=True)
    score_timeout_s: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, strict=True)


class KernelSpec(_Strict):
    kernel: KernelSection
    competition: CompetitionSection
    code: FileSelection = Field(default_factory=FileSelection)
    weights: WeightsSelection = Field(default_factory=WeightsSelection)
    models: list[ModelCard] = Field(default_factory=list)
    install: InstallSection = Field(default_factory=InstallSection)
    steps: list[Step] = Field(default_factory=list)
    submission: SubmissionSection = Field(default_factory=SubmissionSection)
    fast_commit: FastCommitSection = Field(default_factory=FastCommitSection)
    evaluation_api: EvaluationApiSection | None = None
    inputs: list[InputSection] = Field(default_factory=list)
    push: PushSection = Field(default_factory=PushSection)
    postprocess: list[PostprocessStage] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> KernelSpec:
        if self.kernel.internet:
            raise ValueError(
                "[kernel] internet = true: a kernel submitted to a code competition must run with internet off"
            )
        names = [model.name for model in self.models]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"[[models]] names must be unique; repeated: {', '.join(duplicates)}")
        steps = [step.name for step in self.steps]
        duplicates = sorted({name for name in steps if steps.count(name) > 1})
        if duplicates:
            raise ValueError(f"[[steps]] names must be unique; repeated: {', '.join(duplicates)}")
        _unique_inputs(self.inputs)
        if self.submission.kind == "evaluation-api" and self.evaluation_api is None:
            raise ValueError("[submission] kind = 'evaluation-api' needs an [evaluation_api] table")
        if self.submission.kind == "csv" and not self.steps:
            raise ValueError("[[steps]] is empty: add at least one inference step")
        for step in self.steps:
            model = step.predict_model
            if model is not None and model not in names:
                close = difflib.get_close_matches(model, names, n=1, cutoff=0.6)
                guess = f" (did you mean '{close[0]}'?)" if close else ""
                raise ValueError(f"[[steps]] '{step.name}' predicts with --model '{model}', which is no [[models]] name"
                                 f"{guess}; the cards are: {', '.join(names) or 'none'}")
        return self


def _unique_inputs(inputs: list[InputSection]) -> None:
    for attribute, what in (("input_name", "names"), ("mount_target", "mount paths")):
        values = [getattr(item, attribute) for item in inputs]
        duplicates = sorted({value for value in values if values.count(value) > 1})
        if duplicates:
            raise ValueError(f"[[inputs]] {what} must be unique; repeated: {', '.join(duplicates)}")


def load_spec(kernel_dir: Path) -> KernelSpec:
    """Read and validate ``kernel_dir/kernel.toml``."""
    path = kernel_dir / SPEC_FILE
    if not kernel_dir.is_dir():
        raise SpecError(f"{kernel_dir}: no such kernel folder", hint=f"pass the folder that holds kernel.toml; {example_spec_hint()}")
    if not path.is_file():
        raise SpecError(f"{path}: file not found", hint=f"every kernel project needs a kernel.toml; {example_spec_hint()}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                        hint="save kernel.toml with UTF-8 encoding") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}", hint="fix the TOML syntax at the line shown") from None
    return parse_spec(raw, source=path)


def parse_spec(raw: dict[str, Any], source: Path | str = SPEC_FILE) -> KernelSpec:
    try:
        return KernelSpec.model_validate(raw)
    except ValidationError as exc:
        raise _spec_error(exc, source) from None


def _spec_error(exc: ValidationError, source: Path | str) -> SpecError:
    lines: list[str] = []
    hints: list[str] = []
    for error in exc.errors():
        key = _dotted(error["loc"])
        if error["type"] == "extra_forbidden":
            known = _known_keys(error["loc"][:-1])
            unknown = str(error["loc"][-1])
            lines.append(f"{source}: {key}: unknown key")
            close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)
            hints.append(f"did you mean '{_dotted((*error['loc'][:-1], close[0]))}'?" if close else f"known keys here: {', '.join(known)}")
        elif error["type"] == "missing":
            lines.append(f"{source}: {key}: required key is missing")
            hints.append(f"add {key} to {Path(str(source)).name}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{source}: {key}: {message}" if key else f"{source}: {message}")
            hints.append(_hint_for(error))
    unique_hints = [hint for index, hint in enumerate(hints) if hint and hint not in hints[:index]]
    return SpecError("\n".join(lines), hint="; ".join(unique_hints) or None)


def _hint_for(error: Any) -> str:
    loc = tuple(str(part) for part in error["loc"])
    if "does not match the title" in str(error["msg"]):
        return "remove [kernel] slug (kkb derives it from the title) or change the title"
    if loc[:1] == ("kernel",) and loc[-1:] == ("title",):
        if "gives the kernel slug" in str(error["msg"]):
            return "use a title with at least 5 letters or digits; Kaggle derives the kernel slug from it"
        return "use a title of 5 to 50 characters; Kaggle derives the kernel slug from it"
    if loc[:1] == ("steps",) and loc[-1:] == ("run",) and "cannot split" in str(error["msg"]):
        return "close the quote, or escape it with a backslash; the run string is split like a shell command line"
    if loc[:1] == ("steps",) and loc[-1:] == ("run",):
        return "placeholders are filled in each argument: {out} {code} {weights} {data} {python}; see kernels/minimal/kernel.toml"
    if "is no [[models]] name" in str(error["msg"]):
        return "make --model NAME match a [[models]] name = ... in kernel.toml"
    if loc[:1] == ("models",) and loc[-1:] == ("tta",):
        return "a TTA function of your own goes in the code dataset and is named 'package.module:function'"
    if "internet" in str(error["msg"]):
        return "set [kernel] internet = false; ship packages as wheels instead (kkb wheels)"
    if loc[:1] == ("inputs",) or "[[inputs]]" in str(error["msg"]):
        return _input_hint(error)
    if loc[:1] == ("push",):
        return f"a wait is a number of seconds, more than 0 and at most {MAX_WAIT_SECONDS} (48 h), e.g. 3600"
    if loc[:1] == ("evaluation_api",):
        return ("see kernels/evalapi/kernel.toml: predict = 'module:function' in your code, "
                "module = 'kaggle_evaluation.<comp>_inference_server'")
    return "see kernels/minimal/kernel.toml for a valid example"


def _input_hint(error: Any) -> str:
    message = str(error["msg"])
    if "unknown input kind" in message:
        return "kind is dataset (dataset_sources), model (model_sources) or notebook (kernel_sources)"
    if "has no version" in message:
        return "add the version number, as on the model's page: owner/model/framework/variation/VERSION"
    if "unknown framework" in message:
        return "use the framework segment of the model's Kaggle path, e.g. pytorch or transformers"
    if "must be unique" in message:
        return "give each [[inputs]] its own name = ..., and attach each source once"
    if "reference" in message:
        return "copy the reference from the input's Kaggle URL or from kernel-metadata.json"
    return "see the README section 'Attaching inputs'"


def _dotted(loc: tuple[Any, ...]) -> str:
    """('models', 0, 'arch') -> 'models[0].arch'; the first part is the TOML table."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    model: Any = KernelSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if hasattr(model, "model_fields") else None
        if field is None:
            return []
        model = _model_of(field.annotation)
        if model is None:
            return []
    return sorted(model.model_fields) if hasattr(model, "model_fields") else []


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None
