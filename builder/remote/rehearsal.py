"""``kkb dry-run --on-kaggle``: rehearse the scoring rerun on Kaggle's own machines, never submitted.

The local dry run is only as faithful as the local machine. This one runs where the submission will:
a **private rehearsal kernel** with its own id (``<owner>/<slug>-rehearsal``, from the title
``<title> Rehearsal``; never the submission kernel's), internet off, the same machine shape, image pin,
datasets, inputs and competition, and the very same rendered notebook. It is a rehearsal because it
also attaches a tiny *settings dataset* (``<owner>/<slug>-rehearsal``) holding ``kkb_rehearsal.json``
(the scenario and the scale); the runtime finds it (``kkb_runtime.rehearsal``), runs every step on the
public test replicated ``--rerun-scale`` times as the scoring rerun, and writes ``report.json``.

Why a separate dataset and not a file in the code dataset: the code dataset must stay byte for byte
what the real kernel reads (its content hash decides pushes), and a rehearsal file inside it would make
the next real run a rehearsal too. The real kernel never attaches the settings dataset.

The flow: read the local dry run's report (before the build replaces it) for the projected time; build;
say the machine shape and the projection (``--yes`` is needed over an hour of quota); reuse the last
rehearsal when nothing changed (same content hashes, notebook and scale; ``--again`` runs anyway); sync
the datasets exactly as ``kkb push`` does (``push.sync_bundles``), after Kaggle's limits were asked as for ``kkb
push`` (``preflight.check_before_run``: the rehearsal kernel's running version, the quota against the projection, the
GPU session cap; ``--wait-for-slot``, ``--force``, ``--replace``); pin them in the rehearsal kernel's sources; push
the rehearsal kernel; wait (bounded, with progress); download its output and log into ``build/NAME/dryrun-kaggle/``;
compare what the run found mounted with what was synced (a dropped pin stops it, named); record a ``rehearsal`` in
the history. Nothing here calls a submission API.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import __version__
from builder.build import BuildResult
from builder.bundle.files import manifest_for, write_metadata
from builder.errors import KernelFailed, KkbError
from builder.kkb_runtime.vocabulary import SubmissionKind, Verdict
from builder.project.ids import kernel_slug
from builder.project.image_store import stored_image_path
from builder.project.jsonfile import read_object
from builder.project.layout import (
    DRYRUN_DIR,
    KERNEL_METADATA,
    ON_KAGGLE_DIR,
    REHEARSAL_DIR,
    REPORT_FILE,
    out_dir_of,
)
from builder.project.spec import KernelSpec, spec_of
from builder.remote.dataset_sync import DatasetResult, sync_dataset
from builder.remote.hints import exception_tail
from builder.remote.history import REHEARSAL, REHEARSAL_INTENT, History
from builder.remote.kaggle_api import KaggleAdapter
from builder.remote.lock import LOCK_WAIT_S, kernel_lock
from builder.remote.mounted import expected_from, raise_if_differs, read_other_inputs, verify_mounted
from builder.remote.preflight import Needed, PlannedRun, check_before_run, push_to_run, unprojected_seconds
from builder.remote.push import LazySession, build_for_push, pin_sources, sync_bundles
from builder.remote.run_image import record_run_image
from builder.remote.runs import spec_accelerator
from builder.remote.session import ProgressFn, PushSettings, Session, Waits

REHEARSAL_FILE = "kkb_rehearsal.json"  # kkb_runtime.rehearsal.REHEARSAL_FILE (the runtime imports nothing of builder)
# What --on-kaggle rehearses, per submission kind: None, or why not (the rehearsal kernel replays the
# notebook's steps at scale, which an evaluation-API kernel, driven by the competition's gateway, has none of).
ON_KAGGLE_REFUSALS: dict[SubmissionKind, str | None] = {
    SubmissionKind.CSV: None,
    SubmissionKind.EVALUATION_API: "--on-kaggle rehearses kernels that write a submission file",
}
FORMAT = 1
SUFFIX = " Rehearsal"
MAX_TITLE = 50
CONFIRM_OVER_S = 3600.0
SESSION_LIMIT_S = 12 * 3600.0  # Kaggle's longest session
LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class RehearsalSettings:
    kernel_dir: Path
    out_dir: Path | None = None
    owner: str | None = None
    rerun_scale: int = 1
    again: bool = False          # rehearse even when nothing changed since the last rehearsal
    yes: bool = False            # spend more than an hour of Kaggle quota
    base_url: str | None = None
    waits: Waits = field(default_factory=Waits)
    progress: ProgressFn | None = None
    adapter: KaggleAdapter | None = None  # the seam tests hand in
    lock_wait_s: float = LOCK_WAIT_S  # how long to wait for a push/submit of the kernel to finish
    spec: KernelSpec | None = None  # the command's loaded kernel.toml (read once per command); None: load kernel_dir's
    # Kaggle's limits before the rehearsal kernel is pushed (builder.remote.preflight), as for kkb push.
    wait_for_slot: bool = False  # wait for a GPU session slot, or for the rehearsal kernel's running version
    force: bool = False  # push anyway (it bills; Kaggle may refuse or queue it)
    replace: bool = False  # stop the rehearsal kernel's running version first (Kaggle's API: deleting the kernel)

    def __post_init__(self) -> None:
        if self.rerun_scale < 1:
            raise KkbError(f"--rerun-scale must be at least 1, got {self.rerun_scale}")


@dataclass(frozen=True)
class RehearsalPlan:
    kernel_id: str               # the submission kernel (never pushed here)
    rehearsal_id: str            # the private rehearsal kernel
    settings_dataset: str        # holds kkb_rehearsal.json
    machine_shape: str           # "NvidiaTeslaT4", or "CPU"
    image: str                   # "pinned sha256:…", "as captured 2026-11-30" (kkb image --on-kaggle), "uncaptured"
    projected_seconds: float | None
    projection_basis: str


@dataclass(frozen=True)
class RehearsalResult:
    plan: RehearsalPlan
    spec: KernelSpec
    action: str                  # "rehearsed" | "reused"
    kernel_version: int | None
    status: str                  # Kaggle's run status: complete, error, ...
    report: dict[str, Any]       # the kernel's report.json (the dry run's scenario shape)
    out_dir: Path                # build/NAME/dryrun-kaggle
    when: str                    # when the rehearsal ran (UTC)
    url: str = ""

    @property
    def ok(self) -> bool:
        return bool((self.report.get("verdict") or {}).get("name") == Verdict.OK)

    @property
    def heading(self) -> str:
        return f"on Kaggle ({self.plan.machine_shape}, image {self.plan.image})"


def rehearse_on_kaggle(settings: RehearsalSettings) -> RehearsalResult:
    """Push the rehearsal kernel (or reuse the last result), wait, download, and return its report.

    It holds the project's lock as push does: both build into build/NAME and sync the same datasets."""
    with kernel_lock(Path(settings.kernel_dir), "dry-run --on-kaggle", settings.lock_wait_s):
        return _rehearse_locked(settings)


def _rehearse_locked(settings: RehearsalSettings) -> RehearsalResult:
    kernel_dir = Path(settings.kernel_dir)
    spec = spec_of(settings.spec, kernel_dir)
    not_rehearsable = ON_KAGGLE_REFUSALS[spec.submission.kind]
    if not_rehearsable is not None:
        raise KkbError(f"{kernel_dir / 'kernel.toml'}: submission.kind = \"{spec.submission.kind}\": {not_rehearsable}",
                       hint=f"rehearse it locally: kkb dry-run {kernel_dir}")
    out_dir = out_dir_of(kernel_dir, settings.out_dir)
    local = _local_projection(out_dir / DRYRUN_DIR / REPORT_FILE, spec, kernel_dir, settings.rerun_scale)
    push_settings = PushSettings(kernel_dir=kernel_dir, out_dir=settings.out_dir, owner=settings.owner,
                                 base_url=settings.base_url, waits=settings.waits, progress=settings.progress,
                                 adapter=settings.adapter, spec=spec, wait_for_slot=settings.wait_for_slot,
                                 force=settings.force, replace=settings.replace)
    lazy = LazySession(push_settings)
    build = build_for_push(push_settings, lazy)
    ctx = lazy.get()
    if local.seconds is None:
        local = _kaggle_projection(ctx.history, _rehearsal_id(build), build.spec, kernel_dir, settings.rerun_scale)
    plan = _plan(build, local)
    ctx.emit("plan", f"rehearsal {plan.rehearsal_id}: machine {plan.machine_shape}, image {plan.image}, "
                     f"projected {_duration(plan.projected_seconds)} ({plan.projection_basis}); never submitted")
    folder = _write_rehearsal(build, plan, settings.rerun_scale)
    key = _rehearsal_key(folder, build, settings.rerun_scale)
    last = ctx.history.last(REHEARSAL, kernel=plan.rehearsal_id, key=key)
    if last is not None and isinstance(last.get("report"), dict) and not settings.again \
            and not read_other_inputs(ctx, plan.rehearsal_id, last.get("kernel_version") or 0):
        ctx.emit("rehearsal", f"nothing changed since the rehearsal of {last.get('time')}: showing its result")
        return RehearsalResult(plan, build.spec, "reused", last.get("kernel_version"), str(last.get("status") or ""),
                               dict(last["report"]), out_dir / ON_KAGGLE_DIR, str(last.get("time") or ""),
                               str(last.get("url") or ""))
    if plan.projected_seconds is not None and plan.projected_seconds > CONFIRM_OVER_S and not settings.yes:
        raise KkbError(f"the rehearsal is projected to take {_duration(plan.projected_seconds)} on {plan.machine_shape} "
                       f"({plan.projection_basis}): more than an hour of your Kaggle quota",
                       hint="pass --yes to spend it, or lower --rerun-scale")
    return _rehearse(ctx, build, plan, folder, key, settings, out_dir)


# -- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Projection:
    seconds: float | None
    basis: str


NO_PROJECTION = _Projection(None, "no passing rerun to project from: run kkb dry-run first")


def _local_projection(report_path: Path, spec: KernelSpec, kernel_dir: Path, scale: int) -> _Projection:
    """The local dry run's rerun (``build/NAME/dryrun/report.json``), scaled to this rehearsal's rows."""
    report = read_object(report_path)
    scenarios = [s for s in report.get("scenarios") or [] if isinstance(s, dict)]
    chosen = next((s for s in scenarios if s.get("scenario") == "rerun" and s.get("ok")), None)
    if chosen is None:
        return NO_PROJECTION
    return _project(chosen, _public_rows(spec, kernel_dir) * scale, "the local dry run")


def _kaggle_projection(history: History, rehearsal_id: str, spec: KernelSpec, kernel_dir: Path, scale: int) -> _Projection:
    """The last passing rehearsal on Kaggle (any scale), when the build has replaced the local dry run's report."""
    for record in reversed(history.records()):
        report = record.get("report")
        if record.get("event") == REHEARSAL and record.get("kernel") == rehearsal_id and isinstance(report, dict) \
                and report.get("ok"):
            return _project(report, _public_rows(spec, kernel_dir) * scale, "the last rehearsal on Kaggle")
    return NO_PROJECTION


def _project(run: Mapping[str, Any], rows: int, source: str) -> _Projection:
    """Steps scale with the rows, the rest of the run (start, installs, loading) does not."""
    rows_run = int(run.get("rows") or 0)
    wall = float(run.get("wall_seconds") or 0.0)
    steps = sum(float(step.get("seconds") or 0.0) for step in run.get("steps") or [] if isinstance(step, Mapping))
    if not rows_run or not rows or steps > wall:
        return _Projection(wall, f"{source}'s rerun, unscaled")
    projected = (wall - steps) + steps * rows / rows_run
    return _Projection(projected, f"from {source}: {wall:.1f} s for {rows_run} rows, here {rows} rows")


def _public_rows(spec: KernelSpec, kernel_dir: Path) -> int:
    import pandas as pd
    data = spec.competition.data_dir(kernel_dir)
    sample = data / spec.competition.sample_submission if data is not None else None
    if sample is None or not sample.is_file():
        return 0
    return len(pd.read_csv(sample, usecols=[0]))


def _plan(build: BuildResult, local: _Projection) -> RehearsalPlan:
    spec = build.spec
    rehearsal_id = _rehearsal_id(build)
    if rehearsal_id == build.kernel_id:  # pragma: no cover - the suffix makes it impossible; the guard says why it matters
        raise KkbError(f"the rehearsal kernel would be the submission kernel {build.kernel_id}")
    return RehearsalPlan(kernel_id=build.kernel_id, rehearsal_id=rehearsal_id, settings_dataset=rehearsal_id,
                         machine_shape=spec.kernel.machine_shape or "CPU", image=image_label(spec),
                         projected_seconds=local.seconds, projection_basis=local.basis)


def _rehearsal_id(build: BuildResult) -> str:
    """``<owner>/<slug of "<title> Rehearsal">``: the rehearsal kernel, and its settings dataset (another namespace)."""
    return f"{build.owner}/{kernel_slug(rehearsal_title(build.spec.kernel.title))}"


def rehearsal_title(title: str) -> str:
    """``<title> Rehearsal``, the title cut so the whole stays within Kaggle's 50 characters."""
    return title[: MAX_TITLE - len(SUFFIX)].rstrip() + SUFFIX


def image_label(spec: KernelSpec) -> str:
    """The image the rehearsal runs in, as far as kkb knows: a pinned digest, else a captured description's date."""
    if spec.kernel.docker_image:
        image = spec.kernel.docker_image
        return "pinned " + (image.split("@", 1)[1][:19] + "…" if "@" in image else image)
    stored = stored_image_path()
    captured = read_object(stored).get("captured") if stored is not None else None
    return f"as captured {captured}" if captured else "uncaptured"


# -- the rehearsal kernel and its settings dataset ----------------------------------------------


def _write_rehearsal(build: BuildResult, plan: RehearsalPlan, scale: int) -> Path:
    """``build/NAME/rehearsal/{settings,kernel}``: the settings dataset and the kernel (the same notebook)."""
    folder = Path(build.out_dir) / REHEARSAL_DIR
    shutil.rmtree(folder, ignore_errors=True)
    settings = folder / "settings"
    settings.mkdir(parents=True)
    payload = {"format": FORMAT, "kernel": build.kernel_id, "scenario": "rerun", "scale": scale}
    (settings / REHEARSAL_FILE).write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    manifest = manifest_for(settings, plan.settings_dataset)
    write_metadata(settings, plan.settings_dataset, _dataset_title(build.spec.kernel.title), manifest)
    kernel = folder / "kernel"
    kernel.mkdir()
    source = Path(build.kernel_dir)
    meta = json.loads((source / KERNEL_METADATA).read_text(encoding="utf-8"))
    code_file = f"{plan.rehearsal_id.split('/')[1]}{Path(meta['code_file']).suffix}"
    shutil.copyfile(source / meta["code_file"], kernel / code_file)
    meta.update(id=plan.rehearsal_id, title=rehearsal_title(build.spec.kernel.title), code_file=code_file,
                is_private=True, enable_internet=False)
    meta["dataset_sources"] = [*meta.get("dataset_sources", []), plan.settings_dataset]
    (kernel / KERNEL_METADATA).write_text(json.dumps(meta, indent=1) + "\n")
    return folder


def _dataset_title(title: str) -> str:
    suffix = " rehearsal settings"
    return title[: MAX_TITLE - len(suffix)].rstrip() + suffix


def _rehearsal_key(folder: Path, build: BuildResult, scale: int) -> str:
    """What makes a rehearsal: the notebook and metadata, every dataset's content, the scale, kkb's runtime."""
    digest = hashlib.sha256()
    for path in sorted((folder / "kernel").iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"{build.code_hash}\0{build.weights_hash}\0{scale}\0{__version__}".encode())
    return "sha256:" + digest.hexdigest()


# -- running it -------------------------------------------------------------------------------


def _rehearse(ctx: Session, build: BuildResult, plan: RehearsalPlan, folder: Path, key: str,
              settings: RehearsalSettings, out_dir: Path) -> RehearsalResult:
    notes = f"kkb dry-run --on-kaggle {plan.rehearsal_id}"
    current = ctx.adapter.kernel_version(plan.rehearsal_id)
    adopted = _adoptable(ctx, plan.rehearsal_id, key, current)
    if adopted is None:  # a new version will run: Kaggle's limits first, before any upload
        current = check_before_run(ctx, _planned_run(build, plan), current=current)  # None: --replace deleted it
    code, weights, wheels = sync_bundles(ctx, build, notes)
    rehearsal_meta = folder / "kernel" / KERNEL_METADATA
    _attach_model_sources(Path(build.kernel_dir) / KERNEL_METADATA, rehearsal_meta)
    settings_hash = manifest_for(folder / "settings", plan.settings_dataset).content_hash
    settings_dataset = sync_dataset(ctx, "rehearsal", folder / "settings", plan.settings_dataset, settings_hash, notes)
    # Pinned as kkb push pins the real kernel's: a run that mounted another version says which pin was dropped.
    pins = tuple(pin_sources(folder / "kernel", [item for item in (code, weights, wheels, settings_dataset) if item]))
    version: int | None
    if adopted is not None:
        ctx.emit("kernel", f"{plan.rehearsal_id}: adopting v{adopted}, pushed by an interrupted rehearsal")
        version, url = adopted, ctx.adapter.web_url(f"code/{plan.rehearsal_id}")
    else:
        version, url = _push(ctx, folder / "kernel", plan.rehearsal_id, key, current, build.spec.kernel.timeout_seconds)
    status = _await_run(ctx, plan.rehearsal_id, version, settings.waits)
    target = out_dir / ON_KAGGLE_DIR
    shutil.rmtree(target, ignore_errors=True)
    files = ctx.adapter.kernel_output(plan.rehearsal_id, version, target)
    record_run_image(ctx, plan.rehearsal_id, version, target)  # the image the rehearsal ran on: the drift guard's evidence
    report = _read_report(target, files, plan, version, status, ctx)
    mounted = verify_mounted(ctx, plan.rehearsal_id, version or 0, target, expected_from(code, weights, wheels, pins))
    report = {**report, "mounted": {key: mounted.get(key) for key in ("ok", "inputs", "differences")}}
    record = ctx.history.append(
        REHEARSAL, kernel=plan.rehearsal_id, of=plan.kernel_id, kernel_version=version, key=key,
        scale=settings.rerun_scale, status=status, verdict=report.get("verdict"), url=url,
        code_dataset=code.ref, code_hash=code.content_hash, code_version=code.version,
        weights_dataset=_ref(weights), weights_hash=weights.content_hash if weights else None,
        weights_version=weights.version if weights else None, pins=list(pins), report=report,
    )
    raise_if_differs(mounted, plan.rehearsal_id, version or 0,  # recorded: the rehearsal itself is not lost
                     hint="Kaggle mounted another version than the one just synced; once it is ready on Kaggle, "
                          "rehearse again (the next rehearsal does not reuse this one)")
    return RehearsalResult(plan, build.spec, "rehearsed", version, status, report, target, str(record["time"]), url)


def _planned_run(build: BuildResult, plan: RehearsalPlan) -> PlannedRun:
    """The rehearsal kernel's run for Kaggle's limits: the real kernel's machine, the time the plan projects (else
    the kernel's timeout, else the competition's limit); it never submits."""
    spec = build.spec
    needed = (Needed(plan.projected_seconds, f"the rehearsal's projection, {plan.projection_basis}")
              if plan.projected_seconds is not None else unprojected_seconds(spec))
    return PlannedRun(plan.rehearsal_id, spec.kernel.machine_shape, spec_accelerator(spec), needed)


def _adoptable(ctx: Session, kernel_id: str, key: str, current: int | None) -> int | None:
    """The version an interrupted run of this very rehearsal pushed (GPU hours are not spent twice for one question)."""
    intent = ctx.history.open_intent(REHEARSAL_INTENT, REHEARSAL, "key", key)
    before = intent.get("version_before") if intent else None
    if intent is not None and current is not None and (before is None or current > before):
        return current
    return None


def _push(ctx: Session, folder: Path, kernel_id: str, key: str, current: int | None,
          timeout: int | None) -> tuple[int | None, str]:
    ctx.history.append(REHEARSAL_INTENT, kernel=kernel_id, key=key, version_before=current)
    ctx.emit("kernel", f"pushing the rehearsal kernel {kernel_id} (private, internet off)")
    version, pushed = push_to_run(ctx, folder, kernel_id, timeout_seconds=timeout)
    return version, pushed.url or ctx.adapter.web_url(f"code/{kernel_id}")


def _ref(weights: DatasetResult | None) -> str | None:
    return weights.ref if weights else None


def _attach_model_sources(real: Path, rehearsal: Path) -> None:
    """Weights published as a Model are attached by the sync (the version Kaggle gave them): the same here."""
    sources = json.loads(real.read_text(encoding="utf-8")).get("model_sources") or []
    meta = json.loads(rehearsal.read_text(encoding="utf-8"))
    if meta.get("model_sources") != sources:
        meta["model_sources"] = sources
        rehearsal.write_text(json.dumps(meta, indent=1) + "\n")


def _await_run(ctx: Session, kernel_id: str, version: int | None, waits: Waits) -> str:
    def probe() -> tuple[str, bool]:
        state = ctx.adapter.kernel_status(kernel_id, version).status
        return state, state in ("complete", "error", "cancel_acknowledged", "cancel_requested")

    timeout = waits.run_timeout_s or SESSION_LIMIT_S + waits.queue_margin_s
    return ctx.wait("run", f"rehearsal {kernel_id} v{version}", probe, timeout,
                    hint=f"the rehearsal is still running on Kaggle: kaggle kernels status {kernel_id}; its output "
                         "stays there (kaggle kernels output)")


def _read_report(target: Path, files: list[Path], plan: RehearsalPlan, version: int | None, status: str,
                 ctx: Session) -> dict[str, Any]:
    """The kernel's report.json with its verdict; a run without one is a failure shown by its log's tail."""
    report = read_object(target / REPORT_FILE)
    if report.get("status") == "done" and isinstance(report.get("verdict"), dict):
        return _with_paths(report, target, files)
    entries = ctx.adapter.kernel_log(plan.rehearsal_id, version)
    failure = ctx.adapter.kernel_status(plan.rehearsal_id, version).failure_message if status != "complete" else ""
    got = f"it stopped in the {report.get('stage')} stage" if report else "it wrote no report.json"
    tail = exception_tail(entries, LOG_TAIL_LINES) or "(the log is empty)"
    raise KernelFailed(
        f"the rehearsal {plan.rehearsal_id} v{version} ended {status} before kkb's verdict: {got}"
        + (f" ({failure})" if failure else "") + f"\n--- end of the kernel log ---\n{tail}",
        hint="the notebook failed before or outside kkb's steps (an install, an input, a template override), or "
             f"Kaggle stopped it: fix what the log names, or rehearse it locally with kkb dry-run {ctx.settings.kernel_dir}")


def _with_paths(report: Mapping[str, Any], target: Path, files: list[Path]) -> dict[str, Any]:
    logs = [path for path in files if path.suffix == ".log"]
    submission = target / "submission.csv"
    return {**report, "log": str(logs[0]) if logs else None, "notebook": None,
            "submission": str(submission) if submission.is_file() else None, "report": str(target / REPORT_FILE)}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


__all__ = ["RehearsalPlan", "RehearsalResult", "RehearsalSettings", "image_label", "rehearsal_title", "rehearse_on_kaggle"]
