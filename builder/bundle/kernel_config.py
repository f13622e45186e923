"""``kkb_kernel.json`` as the build writes it: the kernel's config (``builder.kkb_runtime.config``) made of the loaded
``kernel.toml`` and what the build made (the ids, the cards as prepared, the Dependency Manager's installs).

Each section is the spec's as the kernel reads it, every value resolved (what the user set or the spec's default):
the spec's values are read by the kernel's own reader (``builder.kkb_runtime.typed``), so what the build writes is
what the kernel reads, and a section the two disagree on fails here, at build, naming the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from builder import __version__
from builder.bundle.wheels.dependency_manager import DependencyManager
from builder.kkb_runtime.card import BuiltCard
from builder.kkb_runtime.config import (
    CompetitionSection,
    DatasetsSection,
    EvaluationApiSection,
    FastCommitSection,
    InputSection,
    KernelConfig,
    KernelSection,
    StandInSection,
    StepSection,
    SubmissionSection,
)
from builder.kkb_runtime.postprocess import read_stage
from builder.kkb_runtime.typed import read
from builder.project.spec import KernelSpec

S = TypeVar("S")


@dataclass(frozen=True)
class Ids:
    """What the build named: the kernel's id and its datasets' (the weights': a dataset, a Model, or none built)."""

    kernel: str
    code_dataset: str
    weights: str | None


def section(kind: type[S], values: BaseModel, where: str) -> S:
    """A section of ``kernel.toml`` (every key resolved) as the kernel reads it."""
    return read(kind, values.model_dump(mode="json"), where)


def kernel_config(spec: KernelSpec, ids: Ids, cards: Sequence[BuiltCard] = (),
                  manager: DependencyManager | None = None) -> KernelConfig:
    """The kernel's config: the spec's sections, the ids, the cards as prepared (none: the build's sandboxed run of the
    user's code, before they are), what the Dependency Manager installs."""
    competition = spec.competition
    stated = competition.stand_in.model_dump(exclude_defaults=True)  # written only when it states something
    return KernelConfig(
        kkb_version=__version__,
        kernel=KernelSection(id=ids.kernel, type=spec.kernel.type, machine_shape=spec.kernel.machine_shape),
        competition=CompetitionSection(slug=competition.slug, sample_submission=competition.sample_submission,
                                       test=competition.test, metric=competition.metric,
                                       stand_in=section(StandInSection, competition.stand_in, "competition.stand_in")
                                       if stated else None),
        datasets=DatasetsSection(code=ids.code_dataset, weights=ids.weights),
        weights_kind=spec.weights.publish,  # "model": find the weights under input/models/ (kkb_runtime.inputs)
        steps=tuple(section(StepSection, step, f"steps[{index}]") for index, step in enumerate(spec.steps)),
        submission=section(SubmissionSection, spec.submission, "submission"),
        fast_commit=section(FastCommitSection, spec.fast_commit, "fast_commit"),
        models=tuple(cards),  # every key resolved, and where each value came from
        evaluation_api=section(EvaluationApiSection, spec.evaluation_api, "evaluation_api") if spec.evaluation_api else None,
        # What kkb_runtime.inputs.find_input looks up by name: each [[inputs]] and where Kaggle mounts it.
        inputs=tuple(InputSection(name=item.input_name, kind=item.kind, ref=item.ref, mount=item.mount_target)
                     for item in spec.inputs),
        postprocess=tuple(read_stage(stage.resolved(), f"postprocess[{index}]")  # every key resolved: no kernel default
                          for index, stage in enumerate(spec.postprocess)),
        dependency_manager=manager.to_kernel() if manager is not None else None)


__all__ = ["Ids", "kernel_config", "section"]
