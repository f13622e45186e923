"""``kkb dry-run --reference FILE``: the dry run's submission against the original notebook's, on the same data.

A port may pass every Kaggle check and still compute something else (another tokenization, another
padding, a column mapped by position). The reference is what the original wrote on the same test
(``kaggle kernels output`` of the old kernel, or the notebook run locally): the rerun's file (the
commit's with ``--scenario commit``) is compared with it by :mod:`builder.project.compare`, and each
``--reference-step NAME=FILE`` compares one step's own output. Beyond the tolerance the dry run fails
(exit 2, "differs from the reference") naming the worst columns, so CI can hold a port to its original.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import DryRunError, KkbError
from builder.project.compare import Comparison, check_tolerance, compare_files
from builder.project.spec import KernelSpec
from builder.rehearse.report import ScenarioReport


@dataclass(frozen=True)
class ReferenceSettings:
    file: Path | None = None  # the whole submission's reference
    tolerance: float | None = None  # default: what rounding to [submission] decimals explains, else 1e-6
    steps: tuple[tuple[str, Path], ...] = ()  # (step name, its reference output)

    @property
    def wanted(self) -> bool:
        return self.file is not None or bool(self.steps)


def parse_step_reference(text: str) -> tuple[str, Path]:
    """``NAME=FILE`` of ``--reference-step``."""
    name, sep, file = text.partition("=")
    if not sep or not name.strip() or not file.strip():
        raise DryRunError(f"--reference-step '{text}': expected NAME=FILE", hint="e.g. --reference-step bert=bert_oof.csv")
    return name.strip(), Path(file.strip())


def check_reference(reference: ReferenceSettings, spec: KernelSpec, rerun_scale: int) -> None:
    """Refuse, before anything runs, a reference that cannot be compared."""
    if not reference.wanted:
        return
    try:
        check_tolerance(reference.tolerance, "--reference-tolerance")
    except KkbError as exc:
        raise DryRunError(exc.message, hint=exc.hint) from None
    if rerun_scale > 1:
        raise DryRunError("--reference compares the submission on the same data, and --rerun-scale replicates the test "
                          "with new ids", hint="drop --rerun-scale (or --reference)")
    names = [step.name for step in spec.steps]
    for name, _ in reference.steps:
        if name not in names:
            raise DryRunError(f"--reference-step {name}: no [[steps]] of that name (the steps: {', '.join(names)})",
                              hint="name a step of kernel.toml")
    for file in [*([reference.file] if reference.file else []), *(file for _, file in reference.steps)]:
        if not Path(file).is_file():
            raise DryRunError(f"{file}: the reference file does not exist",
                              hint="the original notebook's submission (e.g. `kaggle kernels output OWNER/SLUG`)")


def compare_reference(reference: ReferenceSettings, spec: KernelSpec, scenarios: tuple[ScenarioReport, ...],
                      data: Path) -> dict[str, Any] | None:
    """The comparison for ``report.json``'s ``reference`` (None when no reference was given)."""
    import pandas as pd
    if not reference.wanted or not scenarios:
        return None
    scenario = next((s for s in scenarios if s.scenario == "rerun"), scenarios[0])
    sample = data / spec.competition.sample_submission
    compared: list[tuple[Comparison, tuple[Path, Path]]] = []
    missing: list[str] = []
    if reference.file is not None:
        if scenario.submission is None:
            missing.append(f"the {scenario.scenario} wrote no {spec.submission.file}: nothing to compare with {reference.file}")
        else:
            files = (scenario.submission, Path(reference.file))
            compared.append((compare_files(*files, spec.submission.id_column, tolerance=reference.tolerance,
                                           decimals=spec.submission.decimals, sample=sample,
                                           labels=(f"{scenario.scenario} {spec.submission.file}", str(reference.file))), files))
    for name, file in reference.steps:
        output = scenario.member_outputs.get(name)
        if output is None:
            missing.append(f"step {name} left no CSV output in the {scenario.scenario}: nothing to compare with {file}")
            continue
        own = [str(c) for c in pd.read_csv(output, nrows=0).columns if c != spec.submission.id_column]
        files = (Path(output), Path(file))
        compared.append((compare_files(*files, spec.submission.id_column, tolerance=reference.tolerance, sample=sample,
                                       columns=own, labels=(f"step {name}", str(file))), files))
    failures = [*missing, *(f"{c.left}: {failure}" for c, _ in compared for failure in c.failures())]
    return {"scenario": scenario.scenario, "ok": not failures, "failures": failures,
            "comparisons": [{**c.to_json(), "files": [str(path) for path in files]} for c, files in compared],
            "lines": [*missing, *(line for c, _ in compared for line in c.lines())]}


def reference_failure(reference: dict[str, Any]) -> str:
    """The one-line message of a dry run whose output differs from the reference: the worst columns first."""
    worst = [str(failure) for failure in reference.get("failures", [])][:3]
    return f"dry run: the {reference.get('scenario')}'s output differs from the reference: {'; '.join(worst)}"
