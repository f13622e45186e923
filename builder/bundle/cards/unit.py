"""One card kind at build time, as a unit: the ``pip install "kkb[...]"`` extra its build imports, its preparation
(checkpoints normalised, the model proven to load), the files it ships besides its checkpoints, and its checks
against the public data.

Core kkb (build, push, submit, the dry run, the local Kaggle) installs without torch: a card is built here (its
checkpoint normalised and loaded once), so the card's libraries must be installed where ``kkb build`` runs;
without them the build stops before anything is staged, naming the extra.

:func:`build_card` takes each stage typed with the kind's own card model (``ImageCard``, ``TextCard``, ...) and
gives the functions the table calls with any card, narrowed to that model once, here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from builder.errors import BundleError
from builder.kkb_runtime.cards.common.tables import test_rows
from builder.project.cards import CardBase
from builder.project.spec import SPEC_FILE, KernelSpec

C = TypeVar("C", bound=CardBase)


@dataclass(frozen=True)
class Extra:
    name: str  # pip install "kkb[name]"
    modules: tuple[str, ...]  # what building a card of this kind imports


@dataclass(frozen=True)
class BuildCard:
    """A card kind's build stages, each taking any card (narrowed to the kind's model by :func:`build_card`)."""

    extra: Extra
    # The modules building this card imports (the extra's, and what the card's own keys add: albumentations).
    modules: Callable[[CardBase], tuple[str, ...]]
    # Checkpoints normalised into the weights stage, the model proven to load: the card for kkb_kernel.json.
    prepare: Callable[[CardBase, Path, Path, dict[str, str]], dict[str, Any]]
    # What the card ships in the weights besides its checkpoints (a text model's config and tokenizer).
    files: Callable[[CardBase, Path], list[str]]
    # The card against the public test (spec, kernel folder, data folder, card, its columns, the sample).
    check_public_data: Callable[[KernelSpec, Path, Path, CardBase, list[str], pd.DataFrame], None]


def narrowed(card: CardBase, model: type[C]) -> C:
    if not isinstance(card, model):
        raise TypeError(f"card '{card.name}' is {type(card).__name__}, not {model.__name__}")
    return card


def build_card(model: type[C], extra: Extra, prepare: Callable[[C, Path, Path, dict[str, str]], dict[str, Any]],
               files: Callable[[C, Path], list[str]],
               check_public_data: Callable[[KernelSpec, Path, Path, C, list[str], pd.DataFrame], None],
               modules: Callable[[C], tuple[str, ...]] | None = None) -> BuildCard:
    """The table's entry of one kind: each stage called with the card narrowed to ``model``."""

    def _modules(card: CardBase) -> tuple[str, ...]:
        return extra.modules if modules is None else modules(narrowed(card, model))

    def _prepare(card: CardBase, kernel_dir: Path, stage: Path, written: dict[str, str]) -> dict[str, Any]:
        return prepare(narrowed(card, model), kernel_dir, stage, written)

    def _files(card: CardBase, kernel_dir: Path) -> list[str]:
        return files(narrowed(card, model), kernel_dir)

    def _check(spec: KernelSpec, kernel_dir: Path, data: Path, card: CardBase, columns: list[str],
               sample: pd.DataFrame) -> None:
        check_public_data(spec, kernel_dir, data, narrowed(card, model), columns, sample)

    return BuildCard(extra, _modules, _prepare, _files, _check)


def public_test_table(spec: KernelSpec, kernel_dir: Path, data: Path, card: CardBase) -> Path:
    """The public test table a table card's check runs on (gbdt, sklearn, torch), or a refusal naming the card."""
    path = data / (spec.competition.test or "test.csv")
    if not path.is_file():
        raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}: no test table {path} in the public data",
                          hint="set [competition] test to the CSV (or parquet) of test rows, relative to [competition] data")
    return path


def public_test_rows(spec: KernelSpec, data: Path, path: Path, sample: pd.DataFrame, limit: int | None = None) -> pd.DataFrame:
    """The public test's rows in the sample's order (the first ``limit``), as the kernel hands them to the card's
    functions: pandas' dtypes, the id column of the sample's type (``builder.kkb_runtime.cards.common.tables``)."""
    id_column = spec.submission.id_column
    ids = sample[id_column].astype(str).tolist()[:limit]
    return test_rows(path, data / spec.competition.sample_submission, ids, id_column)


__all__ = ["BuildCard", "Extra", "build_card", "narrowed", "public_test_rows", "public_test_table"]
