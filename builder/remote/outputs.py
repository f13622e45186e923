"""The submission file each submitted run wrote, kept beside the history, and ``kkb compare`` against it.

``kkb submit`` waits for the kernel run anyway: once it completes, the run's output is fetched (and what it
found mounted checked, ``builder.remote.mounted``) and its submission file kept as
``.kkb/outputs/<slug>-v<version>.<file>`` (an ``output`` record in the history names it). ``kkb compare NEW.csv
--kernel DIR`` then compares a new file with the output of the last *scored* version, so "is v8 really
different from v7 (0.412)?" is one command. A fetch that fails never fails the submission: it is said, and
the comparison later says no output was kept.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from builder.errors import KkbError, RemoteError
from builder.project.compare import Comparison, compare_files
from builder.project.spec import KernelSpec, load_spec
from builder.remote.history import SCORE, STATE_DIR, SUBMISSION, History
from builder.remote.run_image import record_run_image
from builder.remote.session import Session

OUTPUT = "output"  # history event: a run's submission file, kept
OUTPUTS_DIR = "outputs"


def kept_output(ctx: Session, spec: KernelSpec, kernel_id: str, version: int) -> Path | None:
    """The submission file an earlier submit of this version kept, if it did."""
    target = _kept_path(ctx, spec, kernel_id, version)
    if target.is_file() and ctx.history.last(OUTPUT, kernel=kernel_id, kernel_version=version) is not None:
        return target
    return None


def fetch_run_output(ctx: Session, kernel_id: str, version: int, scratch: Path) -> bool:
    """Download a completed run's output (and its log) into ``scratch``; False (said) when it cannot be had."""
    try:
        ctx.adapter.kernel_output(kernel_id, version, scratch)
    except RemoteError as exc:  # an auth error too: the submission goes on, the output is only a convenience
        ctx.emit("output", f"the output of {kernel_id} v{version} was not kept ({exc.message})")
        return False
    record_run_image(ctx, kernel_id, version, Path(scratch))  # the image the run had: the drift guard's evidence
    return True


def keep_run_output(ctx: Session, spec: KernelSpec, kernel_id: str, version: int, scratch: Path) -> Path | None:
    """Keep the submission file of the output fetched into ``scratch``; None (said) when it holds none."""
    kernel_dir = Path(ctx.settings.kernel_dir)
    target = _kept_path(ctx, spec, kernel_id, version)
    found = sorted(Path(scratch).rglob(spec.submission.file))
    if not found:
        ctx.emit("output", f"the output of {kernel_id} v{version} holds no {spec.submission.file}: nothing kept")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(found[0], target)
    ctx.history.append(OUTPUT, kernel=kernel_id, kernel_version=version, file=str(target.relative_to(kernel_dir)))
    ctx.emit("output", f"kept {target.relative_to(kernel_dir)} (kkb compare FILE --kernel {kernel_dir} compares with it)")
    return target


def _kept_path(ctx: Session, spec: KernelSpec, kernel_id: str, version: int) -> Path:
    return (Path(ctx.settings.kernel_dir) / STATE_DIR / OUTPUTS_DIR
            / f"{kernel_id.split('/')[-1]}-v{version}.{spec.submission.file}")


@dataclass(frozen=True)
class ScoredOutput:
    file: Path
    kernel_version: int
    score: str


def last_scored_output(kernel_dir: Path) -> ScoredOutput:
    """The kept output of the newest version whose submission scored (on any server)."""
    records = History.for_kernel(kernel_dir).all_records()
    for score in reversed([r for r in records if r.get("event") == SCORE and r.get("status") == "complete"]):
        key = (score.get("server"), score.get("ref"))
        submission = next((r for r in records if r.get("event") == SUBMISSION and (r.get("server"), r.get("ref")) == key), None)
        if submission is None:
            continue
        version = submission.get("kernel_version")
        if not isinstance(version, int):
            continue
        kept = [r for r in records if r.get("event") == OUTPUT and r.get("server") == key[0]
                and r.get("kernel_version") == version and r.get("kernel") == submission.get("kernel")]
        if kept and (Path(kernel_dir) / str(kept[-1].get("file"))).is_file():
            return ScoredOutput(Path(kernel_dir) / str(kept[-1]["file"]), version, str(score.get("public_score") or ""))
    raise KkbError(f"{kernel_dir}: no scored version with a kept output in kkb history",
                   hint="kkb submit keeps each run's submission file once the run completes; or name both files")


@dataclass(frozen=True)
class CompareSettings:
    left: Path
    right: Path | None = None  # default: the last scored version's output (needs kernel_dir)
    kernel_dir: Path | None = None  # its id column, decimals and sample submission
    tolerance: float | None = None
    id_column: str | None = None


def compare_submissions(settings: CompareSettings) -> Comparison:
    """``kkb compare``: two files, or one file and the last scored version's output."""
    spec = load_spec(Path(settings.kernel_dir)) if settings.kernel_dir is not None else None
    right, label = settings.right, str(settings.right)
    if right is None:
        if settings.kernel_dir is None:
            raise KkbError("kkb compare needs a second file, or --kernel DIR for the last scored version's output")
        scored = last_scored_output(Path(settings.kernel_dir))
        right, label = scored.file, f"v{scored.kernel_version} ({scored.score or 'scored'})"
    sample = None
    if spec is not None and settings.kernel_dir is not None:
        candidate = spec.competition.public_sample(Path(settings.kernel_dir))
        sample = candidate if candidate is not None and candidate.is_file() else None
    return compare_files(Path(settings.left), right, settings.id_column or (spec.submission.id_column if spec else None),
                         tolerance=settings.tolerance, decimals=spec.submission.decimals if spec else None, sample=sample,
                         labels=(str(settings.left), label))
