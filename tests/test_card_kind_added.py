"""Adding a card kind is 1 enum member, 3 new files (the spec's card, its build, its kernel unit) and 3 table lines
(``CARD_MODELS``, ``BUILD_CARDS``, ``RUNTIME_CARDS``): nothing else of kkb is edited (docs/ARCHITECTURE.md, "Adding a
card kind").

A copy of ``builder/`` gets a throwaway ``audio`` kind exactly that way; the suite's own coverage tests (every registry
covers every kind, the kernel reads every key the spec takes and no other) run on the copy and pass, and a card of the
new kind goes from ``kernel.toml`` through the build's ``to_kernel`` into ``kkb_kernel.json`` and back. Without its
kernel unit's table line, the coverage test fails naming the side that lacks it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.files import REPO

SPEC = '''"""``kind = "audio"``: the user's net over a clip's features (a test fixture's throwaway kind)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import NetworkCard


class AudioCard(NetworkCard):
    kind: Literal[CardKind.AUDIO]
    sample_rate: int = Field(default=16000, gt=0)

    @model_validator(mode="after")
    def _factory(self) -> AudioCard:
        if self.factory is None:
            raise ValueError(f"[[models]] '{self.name}': an audio card needs factory")
        return self
'''

BUILD = '''"""Audio cards at build time (a test fixture's throwaway kind)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from builder.bundle.cards.unit import Extra, build_card, kernel_card
from builder.kkb_runtime.card import NetworkBuilt
from builder.kkb_runtime.cards import audio as runtime_audio
from builder.project.cards.audio import AudioCard
from builder.project.spec import KernelSpec


def to_kernel(card: AudioCard) -> runtime_audio.AudioCard:
    return kernel_card(runtime_audio.AudioCard, card)


def prepare(card: AudioCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> NetworkBuilt:
    raise NotImplementedError("the fixture's kind is never prepared")


def extra_files(card: AudioCard, kernel_dir: Path) -> list[str]:
    return []


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: AudioCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    return None


BUILD = build_card(AudioCard, Extra("torch", ("torch",)), to_kernel, prepare, extra_files, check_public_data)
'''

KERNEL = '''"""Audio cards in the kernel (a test fixture's throwaway kind)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..card import NetworkBuilt, NetworkCard
from ..config import KernelConfig
from .common.unit import ViewRows, runtime_card


@dataclass(frozen=True)
class AudioCard(NetworkCard):
    sample_rate: int


def run(card: AudioCard, built: NetworkBuilt, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    raise NotImplementedError("the fixture's kind is never run")


def view(card: AudioCard, built: NetworkBuilt, config: KernelConfig, weights: Path, data: Path, rows: int) -> ViewRows:
    return []


UNIT = runtime_card(AudioCard, NetworkBuilt, run, view)
'''

CHECK = '''
import json
from builder.bundle.cards import BUILD_CARDS
from builder.kkb_runtime.card import BuiltCard, LeftOut, NetworkBuilt, NetworkFold
from builder.kkb_runtime.config_reader import read_card
from builder.kkb_runtime.typed import write
from builder.project.spec import parse_spec

spec = parse_spec({"kernel": {"title": "audio kind"}, "competition": {"slug": "kkb-audio"},
                   "models": [{"name": "clips", "kind": "audio", "factory": "clips.net:make", "checkpoint": "w/c.pth",
                               "num_classes": 2, "sample_rate": 8000}]})
(card,) = spec.models
fold = NetworkFold(file="w/c.safetensors", sha256="0" * 64, source="w/c.pth", loaded_with="weights_only", source_key=None,
                   stripped_prefix=None, left_out=LeftOut((), ()))
built = NetworkBuilt(checkpoint=fold.file, checkpoints=(fold,), built_with={}, checkpoint_key=None, checkpoint_sha256="0" * 64,
                     checkpoint_source="w/c.pth", source_key=None, dtype="float32", num_params=1)
written = write(BuiltCard(BUILD_CARDS[card.kind].to_kernel(card), built, card.origins))
back = read_card(written)
print(json.dumps({"kind": str(back.kind), "type": type(back.card).__name__, "sample_rate": back.card.sample_rate,
                  "same": write(back) == written}))
'''

COVERAGE = ["tests/test_vocabulary.py::test_registry_covers_every_member",
            "tests/test_card_seam.py::test_the_kernel_reads_every_key_the_spec_takes_and_no_other",
            "tests/test_card_seam.py::test_the_kernels_card_has_no_default_for_any_key",
            "tests/test_card_seam.py::test_no_card_in_the_kernel_runtime_is_a_mapping_read_by_string_keys"]


def _table_line(path: Path, after: str, line: str) -> None:
    text = path.read_text()
    assert after in text, f"{path}: no {after!r}"
    path.write_text(text.replace(after, after + line, 1))


def _import(path: Path, line: str) -> None:
    future = "from __future__ import annotations\n"
    text = path.read_text()
    assert future in text, path
    path.write_text(text.replace(future, f"{future}\n{line}\n", 1))


@pytest.fixture(scope="module")
def added(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``builder/`` with the ``audio`` kind added: 1 member, 3 files, 3 table lines (and their imports)."""
    root = tmp_path_factory.mktemp("kind")
    package = Path(shutil.copytree(REPO / "builder", root / "builder", ignore=shutil.ignore_patterns("__pycache__")))
    _table_line(package / "kkb_runtime/vocabulary.py", '    TORCH = "torch"', '\n    AUDIO = "audio"')
    (package / "project/cards/audio.py").write_text(SPEC)
    (package / "bundle/cards/audio.py").write_text(BUILD)
    (package / "kkb_runtime/cards/audio.py").write_text(KERNEL)
    _table_line(package / "project/cards/kinds.py", "    CardKind.TORCH: TorchCard,", "\n    CardKind.AUDIO: AudioCard,")
    _import(package / "project/cards/kinds.py", "from builder.project.cards.audio import AudioCard")
    _table_line(package / "bundle/cards/__init__.py", "    CardKind.TORCH: torch_card.BUILD,", "\n    CardKind.AUDIO: audio.BUILD,")
    _import(package / "bundle/cards/__init__.py", "from builder.bundle.cards import audio")
    _table_line(package / "kkb_runtime/cards/__init__.py", "    CardKind.TORCH: torch_card.UNIT,", "\n    CardKind.AUDIO: audio.UNIT,")
    _import(package / "kkb_runtime/cards/__init__.py", "from . import audio")
    return root


def _run(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Python in ``root`` (its ``builder`` first on the path; the suite's tests and plugins from the repository)."""
    return subprocess.run([sys.executable, *argv], cwd=root, capture_output=True, text=True, timeout=300)


def _coverage(root: Path) -> subprocess.CompletedProcess[str]:
    return _run(root, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--import-mode=append", "--rootdir", str(REPO),
                "-c", str(REPO / "pyproject.toml"), *(str(REPO / test) for test in COVERAGE))


@pytest.mark.slow
def test_a_kind_added_in_one_member_three_files_and_three_table_lines_passes_the_coverage_tests(added: Path) -> None:
    checked = _run(added, "-c", CHECK)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip().splitlines()[-1] == ('{"kind": "audio", "type": "AudioCard", "sample_rate": 8000, '
                                                       '"same": true}')
    covered = _coverage(added)
    assert covered.returncode == 0, covered.stdout[-3000:]
    assert "test_the_kernel_reads_every_key_the_spec_takes_and_no_other[audio] PASSED" in covered.stdout  # the copy's kind


@pytest.mark.slow
def test_without_its_kernel_unit_the_coverage_test_names_the_side_that_lacks_it(added: Path, tmp_path: Path) -> None:
    root = Path(shutil.copytree(added, tmp_path / "lacking"))
    table = root / "builder/kkb_runtime/cards/__init__.py"
    table.write_text(table.read_text().replace("\n    CardKind.AUDIO: audio.UNIT,", ""))
    covered = _coverage(root)
    assert covered.returncode != 0
    assert "kkb_runtime/cards RUNTIME_CARDS (the kernel's card, record, runner and view of each kind) has no entry for " \
           "CardKind audio" in covered.stdout
