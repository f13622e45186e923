"""What a dry run is given (:class:`DryRunSettings`, the API's and the CLI's) and what each of its scenarios runs with
(:class:`ScenarioRun`, built once per scenario by :func:`builder.rehearse.dryrun.dry_run`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from builder.build import BuildResult
from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Layout, Scenario
from builder.project.settings_types import check_settings
from builder.project.spec import KernelSpec
from builder.rehearse.card_inputs import DEFAULT_ROWS
from builder.rehearse.reference import ReferenceSettings
from builder.rehearse.report import SCENARIOS, ScenarioChoice
from builder.rehearse.verdict import machine_shape


@dataclass(frozen=True)
class DryRunSettings:
    kernel_dir: Path
    data_dir: Path | None = None  # default: [competition] data, relative to the kernel folder
    scenario: ScenarioChoice = "both"
    rerun_scale: int = 1
    hidden_rows: int | None = None  # default: [competition] hidden_rows
    timeout_seconds: float | None = None  # default: [kernel] timeout_seconds, else the competition's limit
    layout: Layout = Layout.CURRENT
    out_dir: Path | None = None  # the build folder, default build/<kernel folder name>
    owner: str | None = None
    keep_sandbox: bool = False  # leave each sandbox on disk (its path is in the report)
    rerun_data_dir: Path | None = None  # the rerun's data (a hidden stand-in); the commit keeps data_dir
    memory_bytes: int | None = None  # default: the machine shape's RAM
    image_env: bool = False  # run the kernel in kkb env's environment: the image's versions (builder.run.image_env)
    fit: bool = True  # a second, replicated rerun when the test is too small to fit fixed + per-row time
    progress: Callable[[str], None] | None = None  # one line per event (builder.cli shows it with rich); never printed here
    answers: Path | None = None  # the rerun data's answers (id, targets, optional Usage): the expected score, the split
    spec: KernelSpec | None = None  # the command's loaded kernel.toml (read once per command); None: load kernel_dir's
    reference: ReferenceSettings = ReferenceSettings()  # --reference: the original notebook's output on the same data
    show_inputs: int = DEFAULT_ROWS  # the first test rows each card's input is shown for (report.json inputs)
    env: Mapping[str, str] = field(default_factory=dict)  # --env NAME=VALUE: added to the kernel's environment

    def __post_init__(self) -> None:
        if isinstance(self.scenario, str) and self.scenario not in SCENARIOS:
            raise DryRunError(f"unknown scenario '{self.scenario}'", hint=f"use {', '.join(SCENARIOS)}")
        check_settings(self, error=DryRunError)  # each field of its type: a rerun_scale="2" is named, never a TypeError
        if self.rerun_scale < 1:
            raise DryRunError(f"--rerun-scale must be at least 1, got {self.rerun_scale}")
        if self.hidden_rows is not None and self.hidden_rows < 1:
            raise DryRunError(f"--hidden-rows must be positive, got {self.hidden_rows}")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise DryRunError(f"--timeout must be positive, got {self.timeout_seconds}")
        if self.layout not in Layout.values():
            raise DryRunError(f"unknown input layout '{self.layout}'", hint=f"use {' or '.join(Layout.values())}")
        if self.memory_bytes is not None and self.memory_bytes < 64 * 2**20:
            raise DryRunError(f"--memory must be at least 64 MiB, got {self.memory_bytes} bytes")
        if self.show_inputs < 0:
            raise DryRunError(f"--show-inputs must be at least 0 (the test rows to show), got {self.show_inputs}",
                              hint="--show-inputs N shows the first N rows (--show-inputs alone: 3); 0 shows none")
        if self.rerun_data_dir is not None and self.scenario == "commit":
            raise DryRunError("--rerun-data needs a rerun scenario", hint="use --scenario rerun or both")


@dataclass(frozen=True)
class ScenarioRun:
    """One scenario of a dry run, as its kind's runner (:data:`builder.rehearse.scenarios.REHEARSALS`) runs and judges
    it: made once by the dry run, after the build and the stand-ins, before the scenario's sandbox starts."""

    scenario: Scenario
    settings: DryRunSettings
    build: BuildResult
    data: Path  # the competition data the scenario mounts (after --rerun-scale: the replicated test)
    source: Path  # the same data before --rerun-scale: the time fit's second size is made from it
    public: Path  # the commit's data (--data, else [competition] data): its sample is the public test's
    out: Path  # build/NAME/dryrun: the scenario's notebook, log, submission and step outputs
    work: Path  # the scenario's temporary folder: its sandboxes (kept with --keep-sandbox)
    scored_file: str  # the file Kaggle scores in /kaggle/working (the kind's)

    @property
    def spec(self) -> KernelSpec:
        return self.build.spec

    @property
    def kernel_dir(self) -> Path:
        return Path(self.settings.kernel_dir)

    @property
    def hidden_rows(self) -> int | None:
        """The hidden test's size the rerun is projected to: ``--hidden-rows``, else ``[competition] hidden_rows``."""
        return self.settings.hidden_rows or self.spec.competition.hidden_rows

    @property
    def projected(self) -> bool:
        """Whether this scenario's time is projected to the hidden test (a rerun, with its size known)."""
        return self.scenario == "rerun" and self.hidden_rows is not None

    @property
    def memory_bytes(self) -> int:
        """``--memory``, else the machine shape's RAM."""
        return self.settings.memory_bytes or machine_shape(self.spec.kernel.machine_shape).ram_bytes

    @property
    def timeout_seconds(self) -> float:
        """An explicit timeout, else the kernel's, else the competition's limit: Kaggle kills a run there."""
        settings, spec = self.settings, self.spec
        return float(settings.timeout_seconds or spec.kernel.timeout_seconds or spec.competition.time_limit_hours * 3600)

    def say(self, line: str) -> None:
        """One line of progress, named by the scenario."""
        progress(self.settings, f"{self.scenario}: {line}")


def progress(settings: DryRunSettings, line: str) -> None:
    if settings.progress is not None:
        settings.progress(line)


def answers_for(settings: DryRunSettings, data: Path) -> Path | None:
    """``--answers``, else a local competition's ``answers.csv`` beside the ``hidden/`` folder the rerun ran on.
    A replicated test (``--rerun-scale``) has new ids: no answers fit it."""
    if settings.rerun_scale > 1:
        return None
    if settings.answers is not None:
        return Path(settings.answers)
    folder = Path(settings.rerun_data_dir or data)
    beside = folder.parent / "answers.csv"
    return beside if folder.name == "hidden" and beside.is_file() else None

