"""``kernel.toml``: the kernel project's spec, validated at the boundary.

Everything the rest of kkb knows about a kernel project comes from :func:`load_spec`, which returns
frozen pydantic models (``extra="forbid"``). Any problem becomes a :class:`~builder.errors.SpecError`
that names the file, the key, what was wrong, and how to fix it; unknown keys get a "did you mean".
The models are here; what their values may be is :mod:`~builder.project.spec_values`, how an error is
shown (and its hint found by its type) :mod:`~builder.project.spec_errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from builder.kkb_runtime.postprocess import STAGES as POSTPROCESS_STAGES
from builder.kkb_runtime.vocabulary import CombineKind, KernelForm, PostprocessKind, SubmissionKind
from builder.project.cards import ImageCard, ModelCard, RandomTta, expand_models
from builder.project.ids import kernel_slug
from builder.project.metric_setting import MetricArgument, check_metric
from builder.project.spec_errors import SPEC_FILE, read_spec_toml, spec_error_of
from builder.project.spec_inputs import InputSection
from builder.project.spec_install import InstallSection, SourcePackage
from builder.project.spec_renames import one_submission_file, renamed
from builder.project.spec_values import (
    ACCELERATOR_SHAPES,
    CUDA_ARCH,
    DEFAULT_GPU_SHAPE,
    INPUT_KINDS,
    INPUT_SOURCES,
    MACHINE_SHAPES,
    MAX_WAIT_SECONDS,
    TTA_NAMES,
    SpecErrorType,
    StrictModel,
    check_accelerator,
    check_competition_paths,
    check_competition_slug,
    check_env_names,
    check_file_name,
    check_folder,
    check_framework,
    check_id,
    check_run_string,
    check_slug_of_title,
    check_some_columns,
    check_stage_keys,
    check_title_slug,
    check_unique,
    check_username,
    did_you_mean,
    parse_input_ref,
    predict_model_of,
    spec_error,
)
from builder.project.spec_values import relative_path as _relative_path

_Strict = StrictModel


class KernelSection(_Strict):
    title: str = Field(min_length=5, max_length=50)
    slug: str | None = None
    owner: str | None = None
    private: bool = True
    accelerator: str = "gpu"
    internet: bool = False
    # How Kaggle runs it: a notebook, or a script (docs/script-kernels.md says when to choose which).
    type: KernelForm = KernelForm.NOTEBOOK
    docker_image_pinning: Literal["original", "latest"] | None = "original"
    docker_image: str | None = None
    timeout_seconds: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, raw: Any) -> Any:
        return renamed("kernel", raw)  # kernel_type: read, with a warning naming type

    @field_validator("title")
    @classmethod
    def _title_gives_a_slug(cls, value: str) -> str:
        return check_title_slug(value)

    @field_validator("owner")
    @classmethod
    def _owner_shape(cls, value: str | None) -> str | None:
        return check_username(value)

    @field_validator("accelerator")
    @classmethod
    def _known_accelerator(cls, value: str) -> str:
        return check_accelerator(value)

    @model_validator(mode="after")
    def _slug_matches_title(self) -> KernelSection:
        check_slug_of_title(self.slug, self.title)
        return self

    @property
    def kernel_slug(self) -> str:
        return self.slug or kernel_slug(self.title)

    @property
    def machine_shape(self) -> str | None:
        return ACCELERATOR_SHAPES[self.accelerator] if self.accelerator in ACCELERATOR_SHAPES else self.accelerator

    @property
    def pinned_image(self) -> bool:
        """Kaggle keeps the kernel on one image: its first version's (pinning "original"), or a named docker_image."""
        return self.docker_image_pinning == "original" or self.docker_image is not None

    @property
    def uses_gpu(self) -> bool:
        shape = self.machine_shape
        return shape is not None and shape.startswith("Nvidia")

    @property
    def uses_tpu(self) -> bool:
        shape = self.machine_shape
        return shape is not None and shape.startswith("Tpu")


class StandInSection(_Strict):
    """``[competition.stand_in]``: how the test's rows reference their data, where detection cannot tell
    (``--rerun-scale`` and the time projection's replicated run follow it; see docs/projections.md)."""

    keys: list[str] = Field(default_factory=list)  # test-table columns given new values per copy
    tables: list[str] = Field(default_factory=list)  # tables or partitioned datasets joined on those keys
    files: list[str] = Field(default_factory=list)  # files named by a key: "test_audio/{clip_id}.ogg"
    id: str | None = None  # the id composed of keys: "{stock_id}-{time_id}"
    # an evaluation-API competition: the column its gateway serves the test by, one value per batch ("date_id"); new
    # values are appended after the last, so a stateful predict sees a longer series (found from the data otherwise)
    batch_key: str | None = None


class CompetitionSection(_Strict):
    slug: str
    data: str | None = None
    sample_submission: str = "sample_submission.csv"
    test: str | None = None
    hidden_rows: int | None = Field(default=None, gt=0)
    time_limit_hours: float = Field(default=9.0, gt=0)
    # The file Kaggle scores in /kaggle/working, which the kernel writes (an evaluation-API competition's gateway
    # writes its own, e.g. submission.parquet); only a competition that declares another name changes it.
    submission_file: str = "submission.csv"
    # The competition's metric (builder.kkb_runtime.metrics: spearman, auc, logloss, map@5, rmspe, ...): its
    # checks, rounding that keeps what the metric scores, the expected score. Or the competition's own metric
    # file in Kaggle's format ("metric.py", "module:function"), its keyword arguments in metric_args.
    metric: str | None = None
    metric_args: dict[str, MetricArgument] = Field(default_factory=dict)
    # A file (one id a line, or a CSV whose first column is the id) of the test's public rows: the checks run per part.
    public_ids: str | None = None
    # The public part's share of the test when public_ids is not known. 0.2: the low end of Kaggle's usual
    # splits (20-30 %); a smaller part is the likelier to be constant, so the warning errs on the safe side.
    public_fraction: float = Field(default=0.2, gt=0, lt=1)
    stand_in: StandInSection = Field(default_factory=StandInSection)

    @field_validator("slug")
    @classmethod
    def _slug_shape(cls, value: str) -> str:
        return check_competition_slug(value)

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, value: str | None) -> str | None:
        return check_metric(value)

    @field_validator("sample_submission", "test", "public_ids")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value)

    @field_validator("data")
    @classmethod
    def _anywhere(cls, value: str | None) -> str | None:
        return check_folder(value)

    @field_validator("submission_file")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return check_file_name(value)

    def data_dir(self, kernel_dir: Path) -> Path | None:
        """``data`` resolved: ``~`` expanded, a relative path taken from the kernel folder."""
        return None if self.data is None else Path(kernel_dir) / Path(self.data).expanduser()

    def public_sample(self, kernel_dir: Path) -> Path | None:
        """The public data's sample submission (it may not exist), or None without ``data``."""
        data = self.data_dir(kernel_dir)
        return None if data is None else data / self.sample_submission


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
        return check_id(value, "a dataset id", shortest=6, strict_owner=False)


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
        return check_id(value, "a model id", shortest=3, slug_name="model-slug")

    @field_validator("framework")
    @classmethod
    def _known_framework(cls, value: str) -> str:
        return check_framework(value)

    @model_validator(mode="after")
    def _model_keys_need_model(self) -> WeightsSelection:
        if self.publish == "dataset" and self.model is not None:
            raise ValueError("model is set but publish = 'dataset': set publish = 'model' to publish the weights as a Kaggle Model")
        if self.publish == "model" and self.dataset is not None:
            raise ValueError("dataset is set but publish = 'model': name the Model with model = 'owner/slug' instead")
        return self


class Step(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    run: str = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0)
    timeout_seconds: int | None = Field(default=None, gt=0)
    # Environment variables for this step's process only (OMP_NUM_THREADS, a library's switch, ...).
    env: dict[str, str] = Field(default_factory=dict)
    # The prediction columns this step writes (default: all). Steps of disjoint columns are joined by id,
    # steps sharing a column are averaged on it (kkb_runtime.submission.combine_groups).
    columns: list[str] = Field(default_factory=list)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        return check_env_names(value)

    @field_validator("run")
    @classmethod
    def _runnable(cls, value: str) -> str:
        return check_run_string(value)

    @property
    def predict_model(self) -> str | None:
        """The card a ``python -m kkb_runtime predict --model NAME`` step runs, else None."""
        return predict_model_of(self.run)


class SubmissionSection(_Strict):
    # Not a key of its own: always [competition] submission_file, the file the kernel writes and Kaggle scores
    # (builder.project.spec_renames.one_submission_file reads the old key); the reference leaves it out.
    file: str = Field(default="submission.csv", json_schema_extra={"derived_from": "competition.submission_file"})
    id_column: str = "id"
    target_columns: list[str] = Field(default_factory=list)
    # What the steps write and combine averages, when [[postprocess]] turns them into the targets
    # (five class probabilities before an argmax into `label`); default: the target columns.
    prediction_columns: list[str] = Field(default_factory=list)
    # Column -> "int", "float" or "str" ("*": every target), where the sample's placeholders mislead
    # (integer 0s in a sample of a competition scored on probabilities).
    column_types: dict[str, Literal["int", "float", "str"]] = Field(default_factory=dict)
    decimals: int | None = Field(default=6, ge=0, le=15)
    # Columns left unrounded: discretised on purpose (an OptimizedRounder's levels); see kkb_runtime.rounding.
    unrounded: list[str] = Field(default_factory=list)
    combine: CombineKind = CombineKind.MEAN
    kind: SubmissionKind = SubmissionKind.CSV

    @field_validator("file")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return check_file_name(value)

    @field_validator("target_columns")
    @classmethod
    def _some_columns(cls, values: list[str]) -> list[str]:
        return check_some_columns(values)


class PostprocessStage(_Strict):
    """One ``[[postprocess]]`` stage after combine (see ``kkb_runtime.postprocess``)."""

    kind: PostprocessKind
    columns: list[str] = Field(default_factory=list)
    into: str = "label"
    labels: list[int] | list[str] | None = None
    value: float = 0.5
    min: float | None = None
    max: float | None = None
    function: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
    # A function stage: the module of the code dataset that stands in for __main__ while the function runs
    # (a pickle saved from a notebook names its classes __main__.X: an OptimizedRounder's coefficients).
    pickle_main: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
    # A function stage: the function's own arguments, passed as keyword arguments.
    args: dict[str, Any] = Field(default_factory=dict)
    # false: kkb does not round what this stage writes (a function stage: its `columns`, else every target)
    round: bool = True

    @model_validator(mode="after")
    def _keys_for_kind(self) -> PostprocessStage:
        check_stage_keys(self.kind, self.model_fields_set - {"kind", "round"}, dict(self))
        return self

    def resolved(self) -> dict[str, Any]:
        """The stage as the kernel reads it: ``kind``, ``round`` and its kind's keys, each with its value (set or
        default); the kernel holds no default of its own."""
        values = self.model_dump(mode="json")
        return {key: values[key] for key in ("kind", "round", *sorted(POSTPROCESS_STAGES[self.kind].keys))}


class FastCommitSection(_Strict):
    enabled: bool = True
    # The classic guard: the commit run sees a public test of a handful of rows.
    rows_below: int = Field(default=11, gt=0)
    detect: Literal["env_and_rows", "env"] = "env_and_rows"
    write: Literal["sample", "first_rows"] = "sample"
    first_rows: int = Field(default=5, gt=0)


class EvaluationApiSection(_Strict):
    """Competitions scored through ``kaggle_evaluation``."""

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
        return check_competition_paths(values)


class PushSection(_Strict):
    """How long push and submit wait for Kaggle, in seconds (``--wait-*`` on the command line wins).

    Unset: a dataset version 1800 s to be ready; the kernel run and the scoring the kernel's
    ``timeout_seconds`` (else the competition's time limit) plus an hour of queueing.
    """

    dataset_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, strict=True)
    run_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, strict=True)
    score_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, raw: Any) -> Any:
        return renamed("push", raw)  # dataset_timeout_s and the like: read, with a warning naming the new key


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
    # The sha256 of the kernel.toml bytes this spec was read from (load_spec); None for a spec parsed from a dict.
    _source_sha256: str | None = PrivateAttr(default=None)

    @property
    def source_sha256(self) -> str | None:
        return self._source_sha256

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, raw: Any) -> Any:
        # [model_defaults], base = "NAME", and a step for every card without one (builder.project.cards)
        return expand_models(raw)

    @model_validator(mode="before")
    @classmethod
    def _submission_file(cls, raw: Any) -> Any:
        return one_submission_file(raw)  # one name for the file Kaggle scores: [competition] submission_file

    @model_validator(mode="after")
    def _consistent(self) -> KernelSpec:
        if self.kernel.internet:
            raise spec_error(SpecErrorType.INTERNET_ON,
                             "[kernel] internet = true: a kernel submitted to a code competition must run with internet off")
        names = [model.name for model in self.models]
        check_unique(names, "[[models]] names")
        check_unique([step.name for step in self.steps], "[[steps]] names")
        check_unique([item.input_name for item in self.inputs], "[[inputs]] names", SpecErrorType.INPUTS_NOT_UNIQUE)
        check_unique([item.mount_target for item in self.inputs], "[[inputs]] mount paths", SpecErrorType.INPUTS_NOT_UNIQUE)
        manager = self.install.dependency_manager
        inputs = [item.input_name for item in self.inputs]
        if manager is not None and manager not in inputs:
            raise ValueError(f"[install] dependency_manager = '{manager}' names no [[inputs]]{did_you_mean(manager, inputs)}; "
                             f"the inputs are: {', '.join(inputs) or 'none'} (attach the pm-... input as [[inputs]] first)")
        missing = SUBMISSION_KIND_NEEDS[self.submission.kind](self)
        if missing:
            raise ValueError(missing)
        for step in self.steps:
            model = step.predict_model
            if model is not None and model not in names:
                raise spec_error(SpecErrorType.UNKNOWN_MODEL,
                                 f"[[steps]] '{step.name}' predicts with --model '{model}', which is no [[models]] name"
                                 f"{did_you_mean(model, names)}; the cards are: {', '.join(names) or 'none'}")
        return self


# What each submission kind needs of the rest of kernel.toml: None, or what is missing.
SUBMISSION_KIND_NEEDS: dict[SubmissionKind, Callable[[KernelSpec], str | None]] = {
    SubmissionKind.CSV: lambda spec: None if spec.steps else "[[steps]] is empty: add at least one inference step",
    SubmissionKind.EVALUATION_API: lambda spec: None if spec.evaluation_api is not None else
    "[submission] kind = 'evaluation-api' needs an [evaluation_api] table",
}


def load_spec(kernel_dir: Path) -> KernelSpec:
    """Read and validate ``kernel_dir/kernel.toml``: once per command, the spec then travels in its settings."""
    path, raw, digest = read_spec_toml(kernel_dir)
    spec = parse_spec(raw, source=path)
    spec._source_sha256 = digest
    return spec


def spec_of(spec: KernelSpec | None, kernel_dir: Path | str) -> KernelSpec:
    """The spec a command's settings carry, else ``kernel_dir``'s kernel.toml loaded now (a library call without one)."""
    return spec if spec is not None else load_spec(Path(kernel_dir))


def parse_spec(raw: dict[str, Any], source: Path | str = SPEC_FILE) -> KernelSpec:
    try:
        return KernelSpec.model_validate(raw)
    except ValidationError as exc:
        raise spec_error_of(exc, source, KernelSpec) from None


__all__ = [
    "CUDA_ARCH", "DEFAULT_GPU_SHAPE", "INPUT_KINDS", "INPUT_SOURCES", "MACHINE_SHAPES", "MAX_WAIT_SECONDS", "SPEC_FILE",
    "TTA_NAMES", "EvaluationApiSection", "ImageCard", "InputSection", "InstallSection", "KernelSpec", "ModelCard",
    "RandomTta", "SourcePackage",
    "load_spec", "parse_input_ref", "spec_of",
    "parse_spec",
]
