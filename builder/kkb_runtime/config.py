"""``kkb_kernel.json``: what the build decided, one frozen dataclass per section, read inside the kernel.

The build constructs a :class:`KernelConfig` from the loaded ``kernel.toml`` and what it built (``builder.build``) and
writes it with :func:`config_text`; the kernel reads it with ``kkb_runtime.config_reader.load_config`` (which knows
each card kind's types). Every value is there, resolved: the kernel spells no default of the spec's again. The
sections mirror ``kernel.toml``'s (``[competition]``, ``[[steps]]``, ``[submission]``, ``[fast_commit]``,
``[[postprocess]]``, ``[evaluation_api]``, ``[[inputs]]``) plus what only the build knows (the dataset ids, the
kernel's id, the cards as built, the Dependency Manager's installs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .card import BuiltCard
from .typed import CONFIG_FILE, ConfigMalformed, JsonValue, items, local, omitted, read, write
from .vocabulary import CombineKind, KernelForm, PostprocessKind, SubmissionKind


@dataclass(frozen=True)
class KernelSection:
    id: str  # "owner/slug"
    type: KernelForm
    machine_shape: str | None


@dataclass(frozen=True)
class StandInSection:
    """``[competition.stand_in]``, written only when it states something (``--rerun-scale`` on Kaggle reads it)."""

    keys: tuple[str, ...]
    tables: tuple[str, ...]
    files: tuple[str, ...]
    id: str | None
    batch_key: str | None


@dataclass(frozen=True)
class CompetitionSection:
    slug: str
    sample_submission: str
    test: str | None  # the test table or images folder, relative to the competition data
    metric: str | None
    stand_in: StandInSection | None = field(metadata=omitted())


@dataclass(frozen=True)
class DatasetsSection:
    code: str
    weights: str | None  # a dataset id, or the Model's owner/model/framework/variation (weights_kind "model")


@dataclass(frozen=True)
class StepSection:
    name: str
    run: str
    weight: float
    timeout_seconds: int | None
    env: Mapping[str, str]
    columns: tuple[str, ...]  # the prediction columns it writes (none: all)


@dataclass(frozen=True)
class SubmissionSection:
    file: str
    id_column: str
    target_columns: tuple[str, ...]
    prediction_columns: tuple[str, ...]
    column_types: Mapping[str, Literal["int", "float", "str"]]
    decimals: int | None
    unrounded: tuple[str, ...]
    combine: CombineKind
    kind: SubmissionKind


@dataclass(frozen=True)
class FastCommitSection:
    enabled: bool
    rows_below: int
    detect: Literal["env_and_rows", "env"]
    write: Literal["sample", "first_rows"]
    first_rows: int


@dataclass(frozen=True)
class EvaluationApiSection:
    module: str
    server_class: str
    predict: str  # "module:function" in the code dataset
    fast_predict: str | None
    gateway_module: str | None
    gateway_paths: tuple[str, ...]
    startup_limit_seconds: int
    response_timeout_seconds: int | None


@dataclass(frozen=True)
class InputSection:
    """An ``[[inputs]]`` entry as ``find_input`` looks it up: its name, kind, reference and where Kaggle mounts it."""

    name: str
    kind: str
    ref: str
    mount: str  # the current layout's path under input/


@dataclass(frozen=True)
class DependencyManagerSection:
    """What Kaggle's Dependency Manager installs before the kernel, rehearsed by kkb's sandbox (``kkb_runtime.prerun``)."""

    input: str
    ref: str
    requirements: tuple[str, ...]  # wheels of the input, installed offline
    from_image: tuple[str, ...]  # what the image has already


# --- [[postprocess]]: one dataclass per kind (kkb_runtime.postprocess.STAGES names each kind's) ---------------------


@dataclass(frozen=True)
class PostprocessStage:
    kind: PostprocessKind
    round: bool  # false: kkb does not round what the stage writes
    # The columns it works on (argmax: none is every prediction column; threshold, clip: every column but the id),
    # or (function) the ones it writes, for round = false (none: every target).
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ArgmaxStage(PostprocessStage):
    into: str
    labels: tuple[int, ...] | tuple[str, ...] | None  # none: 0, 1, 2, ...


@dataclass(frozen=True)
class ThresholdStage(PostprocessStage):
    value: float


@dataclass(frozen=True)
class ClipStage(PostprocessStage):
    min: float | None
    max: float | None


@dataclass(frozen=True)
class FunctionStage(PostprocessStage):
    function: str  # "module:function" in the code dataset
    pickle_main: str | None
    args: Mapping[str, JsonValue]  # passed to the function as keyword arguments


@dataclass(frozen=True)
class KernelConfig:
    """The whole of ``kkb_kernel.json``; ``path`` is where it was read from (the code dataset)."""

    kkb_version: str
    kernel: KernelSection
    competition: CompetitionSection
    datasets: DatasetsSection
    weights_kind: Literal["dataset", "model"]  # "model": the weights are a Kaggle Model (kkb_runtime.inputs)
    steps: tuple[StepSection, ...] = field(metadata=items("step"))
    submission: SubmissionSection
    fast_commit: FastCommitSection
    models: tuple[BuiltCard, ...] = field(metadata=items("card"))
    evaluation_api: EvaluationApiSection | None
    inputs: tuple[InputSection, ...]
    postprocess: tuple[PostprocessStage, ...]
    dependency_manager: DependencyManagerSection | None = field(metadata=omitted())
    path: Path = field(default=Path(CONFIG_FILE), metadata=local(), compare=False)

    @property
    def code_dir(self) -> Path:
        return self.path.parent

    def model(self, name: str) -> BuiltCard:
        for card in self.models:
            if card.name == name:
                return card
        known = ", ".join(card.name for card in self.models) or "none"
        raise KeyError(f"no model named '{name}' in {self.path} (known: {known})")

    def step(self, name: str | None) -> StepSection | None:
        return next((step for step in self.steps if step.name == name), None)


def config_text(config: KernelConfig) -> str:
    """``kkb_kernel.json``'s text (what the build writes; the kernel reads it back as ``config``)."""
    return json.dumps(write(config), indent=1, sort_keys=True) + "\n"


def default_config_path() -> Path:
    """The ``kkb_kernel.json`` this run has: ``$KKB_KERNEL_CONFIG``, else the one in the code dataset this package is in."""
    return Path(os.environ.get("KKB_KERNEL_CONFIG") or Path(__file__).resolve().parent.parent / CONFIG_FILE)


def config_path(path: str | Path) -> Path:
    """The file itself, given it or the folder that holds it."""
    found = Path(path)
    return found / CONFIG_FILE if found.is_dir() else found


@dataclass(frozen=True)
class _Inputs:
    inputs: tuple[InputSection, ...]


def read_inputs(path: str | Path) -> tuple[InputSection, ...]:
    """Only the ``inputs`` of ``kkb_kernel.json`` at ``path`` (what ``find_input`` needs, without the cards' types)."""
    file = config_path(path)
    raw = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ConfigMalformed(f"{file}: not a JSON object")
    return read(_Inputs, {"inputs": raw.get("inputs")}).inputs


__all__ = [
    "CONFIG_FILE", "ArgmaxStage", "ClipStage", "CompetitionSection", "ConfigMalformed", "DatasetsSection",
    "DependencyManagerSection", "EvaluationApiSection", "FastCommitSection", "FunctionStage", "InputSection",
    "KernelConfig", "KernelSection", "PostprocessStage", "StandInSection", "StepSection", "SubmissionSection",
    "ThresholdStage", "config_path", "config_text", "default_config_path", "read_inputs",
]
