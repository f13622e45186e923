"""What a dry run found, per scenario: the data behind ``report.json`` and ``report.html``.

Its own module so that the writers of the report (``dryrun``, ``html_report``, the on-Kaggle rehearsal)
share the types without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from builder.kkb_runtime.features import sharing
from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.verdict import NOT_REHEARSED, Judgement

# What a dry run rehearses: one scenario, or both (commit first, as Kaggle runs them).
ScenarioChoice = Scenario | Literal["both"]
SCENARIOS: dict[str, tuple[Scenario, ...]] = {**{member.value: (member,) for member in Scenario}, "both": tuple(Scenario)}
REPORT_SCHEMA = "kkb.dry-run/1"  # what `kkb dry-run --json` prints too: bump when a field changes meaning or goes away


@dataclass(frozen=True)
class ScenarioReport:
    scenario: Scenario
    verdict: Judgement
    wall_seconds: float
    peak_rss_bytes: int
    peak_gpu_bytes: int | None
    timed_out: bool
    failed_cell: int | None
    failing_step: str | None
    ename: str | None
    evalue: str | None
    traceback_tail: str | None
    stderr_tail: str | None
    steps: list[dict[str, Any]]
    rows: int
    hidden_rows: int | None
    projected_seconds: float
    time_limit_seconds: float
    ram_limit_bytes: int
    gpu_limit_bytes: int | None
    fast_commit: str | None  # the runtime's decision, as it printed it
    blocked_network: list[str]
    notebook: Path
    log: Path
    submission: Path | None
    sandbox: Path | None = None
    evaluation_api: dict[str, Any] | None = None  # builder.rehearse.evalapi.EvalApiReport.to_json()
    data: Path | None = None
    isolation: str = "python"
    isolation_note: str = ""
    memory_limit: str = ""  # how the memory limit was enforced (or that it was not)
    working_bytes: int = 0
    working_limit: str = ""
    projection: dict[str, Any] | None = None  # builder.rehearse.projection.Projection.to_json()
    warnings: tuple[str, ...] = ()
    member_outputs: dict[str, str] = field(default_factory=dict)  # step name -> its CSV, kept in the dry-run folder
    metric: dict[str, Any] | None = None  # builder.rehearse.metric_report.MetricReport.to_json() (the rerun)
    stand_in: str | None = None  # --rerun-scale: what was replicated ("stand-in: test.csv rows x 10; ...")
    # every package whose version differs from the image's (builder.run.skew.skew_records); the summary's
    # warning names only those the kernel's own code imports
    version_skew: list[dict[str, Any]] = field(default_factory=list)
    # the kernel's environment, every variable with its origin, secrets redacted (builder.project.kaggle_env)
    variables: list[dict[str, str]] = field(default_factory=list)
    variables_summary: str = ""
    # what the run found mounted for kkb's inputs against what kkb built or pushed (builder.project.mounted.MountedCheck)
    mounted: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def rehearsed(self) -> bool:
        return self.verdict.name != NOT_REHEARSED

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        for key in ("notebook", "log", "submission", "sandbox", "data"):
            data[key] = str(data[key]) if data[key] is not None else None
        # A step's output lay in the sandbox, deleted after the run: point at the copy kept in the dry-run folder.
        data["steps"] = [{**step, "output": self.member_outputs.get(str(step.get("name")))} if "output" in step else step
                         for step in data["steps"]]
        data["shared_features"] = self.shared_features
        return data

    @property
    def shared_features(self) -> list[dict[str, Any]]:
        """Per feature function the table cards used: which step computed it, which steps read it."""
        return sharing(self.steps)


@dataclass(frozen=True)
class DryRunReport:
    kernel_name: str
    kernel_id: str
    kernel_type: str
    out_dir: Path
    report_path: Path
    scenarios: tuple[ScenarioReport, ...] = field(default_factory=tuple)
    # what the kernel ran with, when not kkb's own environment (--image-env: builder.run.image_env.image_env_note)
    environment: str = ""
    reference: dict[str, Any] | None = None  # builder.rehearse.reference.compare_reference (--reference)
    inputs: list[dict[str, Any]] = field(default_factory=list)  # what each card fed its model (the first test rows)
    image: tuple[str, ...] = ()  # about Kaggle's image: its description's age, a newer one a run recorded, Python here

    @property
    def ok(self) -> bool:
        return all(scenario.ok for scenario in self.scenarios)

    @property
    def differs_from_reference(self) -> bool:
        return self.reference is not None and not self.reference.get("ok", True)

    def to_json(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "kernel": self.kernel_name, "kernel_id": self.kernel_id, "kernel_type": self.kernel_type,
                "ok": self.ok, "environment": self.environment or None,
                "scenarios": [scenario.to_json() for scenario in self.scenarios],
                "reference": self.reference, "inputs": self.inputs, "image": list(self.image)}
