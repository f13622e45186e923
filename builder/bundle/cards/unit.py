"""One card kind at build time, as a unit: the ``pip install "kkb[...]"`` extra its build imports, the kernel's card
it makes of the spec's (``to_kernel``), its preparation (checkpoints normalised, the model proven to load: what the
build records for the card), the files it ships besides its checkpoints, its checks against the public data, and its
notes (what kkb maps or does to the card's input, said at build).

Core kkb (build, push, submit, the dry run, the local Kaggle) installs without torch: a card is built here (its
checkpoint normalised and loaded once), so the card's libraries must be installed where ``kkb build`` runs;
without them the build stops before anything is staged, naming the extra.

:func:`build_card` takes each stage typed with the kind's own card model (``ImageCard``, ``TextCard``, ...) and
gives the functions the table calls with any card, narrowed to that model once, here. Every kernel helper the build
calls gets the kernel's card (:func:`kernel_card`: kernel.toml's card as the kernel reads it), never a dict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from builder.errors import BundleError
from builder.kkb_runtime.card import Built, BuiltCard, Card, NetworkFold
from builder.kkb_runtime.cards.common.tables import DEFAULT_TEST_TABLE, test_rows
from builder.kkb_runtime.context import Context
from builder.kkb_runtime.typed import keys_of, read
from builder.project.cards import CardBase
from builder.project.spec import SPEC_FILE, KernelSpec

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

C = TypeVar("C", bound=CardBase)
K = TypeVar("K", bound=Card)
B = TypeVar("B", bound=Built)


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
    # The kernel's card of it: kernel.toml's card as kkb_kernel.json holds it (what every kernel helper takes).
    to_kernel: Callable[[CardBase], Card]
    # Checkpoints normalised into the weights stage, the model proven to load: what the build records for the card.
    prepare: Callable[[CardBase, Path, Path, dict[str, str]], Built]
    # What the card ships in the weights besides its checkpoints (a text model's config and tokenizer).
    files: Callable[[CardBase, Path], list[str]]
    # The card against the public test (spec, kernel folder, data folder, card, its columns, the sample).
    check_public_data: Callable[[KernelSpec, Path, Path, CardBase, list[str], pd.DataFrame], None]
    # What kkb maps or cannot read in the card's input, on the public test (spec, kernel folder, the data or None):
    # run where the kernel runs, after the card is prepared.
    notes: Callable[[KernelSpec, Path, Path | None, CardBase], list[str]]
    # What the preparation did that the user should know (opt-ins used, keys left out, the preprocessing).
    record_notes: Callable[[str, Built], list[str]]


def narrowed(card: CardBase, model: type[C]) -> C:
    if not isinstance(card, model):
        raise TypeError(f"card '{card.name}' is {type(card).__name__}, not {model.__name__}")
    return card


def built_as(built: Built, record: type[B]) -> B:
    if not isinstance(built, record):
        raise TypeError(f"a card's record is {type(built).__name__}, not {record.__name__}")
    return built


def no_notes(spec: KernelSpec, kernel_dir: Path, data: Path | None, card: C) -> list[str]:
    return []


def fold_notes(name: str, built: Built) -> list[str]:
    """One line per fold that loaded only through a card's opt-in, or without some of its keys (``strict = false``)."""
    notes = []
    for fold in built.checkpoints:
        if fold.loaded_with != "weights_only":
            notes.append(f"models.{name}: {fold.source} loaded with {fold.loaded_with}")
        if isinstance(fold, NetworkFold):
            for kind, keys in (("missing", fold.left_out.missing), ("unexpected", fold.left_out.unexpected)):
                if keys:
                    notes.append(f"models.{name}: {fold.source}: strict = false left {len(keys)} {kind} key(s) out: "
                                 f"{', '.join(keys[:8])}")
    return notes


def build_card(model: type[C], extra: Extra, to_kernel: Callable[[C], Card],
               prepare: Callable[[C, Path, Path, dict[str, str]], Built], files: Callable[[C, Path], list[str]],
               check_public_data: Callable[[KernelSpec, Path, Path, C, list[str], pd.DataFrame], None],
               modules: Callable[[C], tuple[str, ...]] | None = None,
               notes: Callable[[KernelSpec, Path, Path | None, C], list[str]] = no_notes,
               record_notes: Callable[[str, Built], list[str]] = fold_notes) -> BuildCard:
    """The table's entry of one kind: each stage called with the card narrowed to ``model``."""

    def _modules(card: CardBase) -> tuple[str, ...]:
        return extra.modules if modules is None else modules(narrowed(card, model))

    def _to_kernel(card: CardBase) -> Card:
        return to_kernel(narrowed(card, model))

    def _prepare(card: CardBase, kernel_dir: Path, stage: Path, written: dict[str, str]) -> Built:
        return prepare(narrowed(card, model), kernel_dir, stage, written)

    def _files(card: CardBase, kernel_dir: Path) -> list[str]:
        return files(narrowed(card, model), kernel_dir)

    def _check(spec: KernelSpec, kernel_dir: Path, data: Path, card: CardBase, columns: list[str],
               sample: pd.DataFrame) -> None:
        check_public_data(spec, kernel_dir, data, narrowed(card, model), columns, sample)

    def _notes(spec: KernelSpec, kernel_dir: Path, data: Path | None, card: CardBase) -> list[str]:
        return notes(spec, kernel_dir, data, narrowed(card, model))

    return BuildCard(extra, _modules, _to_kernel, _prepare, _files, _check, _notes, record_notes)


def kernel_card(kind: type[K], card: CardBase) -> K:
    """``card`` (kernel.toml's, every key resolved by the spec) as the kernel's card of its kind: each key the kernel's
    card has, read by the kernel's own reader, as ``kkb_kernel.json`` holds it."""
    values = card.model_dump(mode="json")
    return read(kind, {key: values[key] for key in keys_of(kind)}, f"card '{card.name}'")


def built_card(unit: BuildCard, card: CardBase, built: Built) -> BuiltCard:
    """The card as ``kkb_kernel.json`` holds it: the kernel's card, the record of its preparation, its origins."""
    return BuiltCard(unit.to_kernel(card), built, card.origins)


def build_context(card: Card, kernel_dir: Path, data: Path | None) -> Context:
    """What a card's function gets as ``ctx`` at build: the kernel folder holds the weights (at the paths the weights
    dataset keeps) and the code; ``data`` is the public competition data."""
    return Context(competition_dir=data or kernel_dir, weights_dir=kernel_dir, code_dir=kernel_dir, card=card)


def public_test_table(spec: KernelSpec, kernel_dir: Path, data: Path, card: CardBase) -> Path:
    """The public test table a table card's check runs on (gbdt, sklearn, torch), or a refusal naming the card."""
    path = data / (spec.competition.test or DEFAULT_TEST_TABLE)
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


__all__ = ["BuildCard", "Extra", "build_card", "build_context", "built_as", "built_card", "fold_notes", "kernel_card", "narrowed",
           "no_notes", "public_test_rows", "public_test_table"]
