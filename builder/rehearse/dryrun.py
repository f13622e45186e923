"""``kkb dry-run``: rehearse Kaggle's commit run and scoring rerun locally, and say what Kaggle would say.

Each scenario builds nothing new: the kernel is built once (as ``kkb build``), then each scenario runs the rendered
notebook in a fresh sandbox (``builder.run.sandbox``), the code and weights bundles mounted as datasets:

``commit``
    No ``KAGGLE_IS_COMPETITION_RERUN``, the public test as given. When ``[fast_commit]`` says the fast path
    should trigger and the commit ran every step anyway, Kaggle still accepts the commit: the report keeps
    its verdict and warns (the full inference time, and GPU quota, is spent at every save).
``rerun``
    ``KAGGLE_IS_COMPETITION_RERUN=1``, the full pipeline, on the public test, on a test replicated ``--rerun-scale``
    times, or on a hidden stand-in (``--rerun-data DIR``). Its time is projected to the hidden test's rows by
    :mod:`builder.rehearse.projection` (fixed + per-row cost; a second run on a replicated test when it is too small to
    separate them), its memory limited to and compared with the machine shape's RAM (``--memory`` overrides).

Each scenario's sandbox says which isolation ran (:mod:`builder.run.isolation`) and which limits were enforced
(:mod:`builder.run.limits`), with what each card fed its model (:mod:`builder.rehearse.card_inputs`), a reference's
comparison (:mod:`builder.rehearse.reference`) and what the run found mounted (:mod:`builder.rehearse.mounted`).
Results go to ``build/NAME/dryrun/``: ``<scenario>.ipynb`` (the executed notebook), ``<scenario>.log.json`` (Kaggle's
log shape), ``<scenario>.submission.csv``, ``report.json``. The sandboxes are temporary; nothing else is written to.
"""

from __future__ import annotations

import difflib
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.errors import DryRunError, SpecError
from builder.kkb_runtime.submission import sample_columns
from builder.kkb_runtime.vocabulary import Scenario
from builder.project.credentials import kaggle_username
from builder.project.layout import DRYRUN_DIR, REPORT_FILE
from builder.project.spec import SPEC_FILE, KernelSpec, spec_of
from builder.rehearse.card_inputs import card_inputs
from builder.rehearse.dryrun_settings import DryRunSettings, ScenarioRun, answers_for, progress
from builder.rehearse.html_report import write_html_report
from builder.rehearse.image_notes import image_notes
from builder.rehearse.metric_run import check_before_rerun
from builder.rehearse.reference import check_reference, compare_reference
from builder.rehearse.report import SCENARIOS, DryRunReport, ScenarioReport
from builder.rehearse.scenario_report import DISK_FULL, warm_up_while_the_kernel_runs
from builder.rehearse.scenarios import REHEARSALS
from builder.rehearse.wheelhouse import dry_run_check
from builder.run.image_env import image_env_note
from builder.run.isolation import probe_soon
from builder.run.sandbox import remove_sandbox
from builder.run.stand_ins import input_mounts, replicated_test

# Nothing leaves the machine in a dry run, so the owner in the dataset ids only has to be consistent.
LOCAL_OWNER = "kkb-local"


def _owner(settings: DryRunSettings, spec: KernelSpec) -> str:
    return settings.owner or spec.kernel.owner or kaggle_username() or LOCAL_OWNER


def dry_run(settings: DryRunSettings) -> DryRunReport:
    """Build the kernel, run each scenario in its own sandbox, judge it, and write the report."""
    kernel_dir = Path(settings.kernel_dir)
    probe_soon()  # the sandbox's probe runs while the kernel is built
    spec = spec_of(settings.spec, kernel_dir)
    progress(settings, f"building {kernel_dir}")
    build = build_kernel(BuildSettings(kernel_dir=kernel_dir, out_dir=settings.out_dir, owner=_owner(settings, spec), spec=spec,
                                       layout=settings.layout))  # the build's run of the user's code: the same layout
    data = competition_data(settings, build.spec)
    input_mounts(build.spec, kernel_dir)  # a missing stand-in is refused before anything runs
    rerun_data = competition_data(replace(settings, data_dir=settings.rerun_data_dir), build.spec) if settings.rerun_data_dir else data
    dry_run_check(build.spec, kernel_dir, build.out_dir, build.owner)  # [install] requirements: the wheelhouse installs offline
    if "rerun" in SCENARIOS[settings.scenario]:  # public_ids and the answers against the rerun's test, before it runs
        check_before_rerun(build.spec, kernel_dir, rerun_data, answers_for(settings, rerun_data))
    check_reference(settings.reference, build.spec, settings.rerun_scale)
    out = build.out_dir / DRYRUN_DIR
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with disk_full_named(out):
        reports = tuple(_run_scenario(scenario, settings, build, rerun_data if scenario == "rerun" else data, data, out)
                        for scenario in SCENARIOS[settings.scenario])
    report = DryRunReport(kernel_name=build.kernel_name, kernel_id=build.kernel_id, kernel_type=build.spec.kernel.type,
                          out_dir=out, report_path=out / REPORT_FILE, scenarios=reports, environment=image_env_note(settings.image_env),
                          reference=compare_reference(settings.reference, build.spec, reports, rerun_data),
                          inputs=card_inputs(build, data, settings.show_inputs,
                                             [step for scenario in reports for step in scenario.steps]),
                          image=image_notes(build.spec, build.owner))  # kkb env's venv is over this same Python
    with disk_full_named(out):
        report.report_path.write_text(json.dumps(report.to_json(), indent=1) + "\n")
        write_html_report(report)
    return report


@contextmanager
def disk_full_named(out: Path) -> Iterator[None]:
    """kkb's own write on a full disk: the disk named, never an internal error."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise DryRunError(f"the disk is full: {exc.strerror} ({exc.filename or out})",
                          hint=f"free space on the disks of {out} and of the sandboxes' folder ({tempfile.gettempdir()}), "
                               "then run the dry run again") from None


def competition_data(settings: DryRunSettings, spec: KernelSpec) -> Path:
    """``--data``, else ``[competition] data`` relative to the kernel folder; it must hold the sample."""
    data = Path(settings.data_dir) if settings.data_dir is not None else spec.competition.data_dir(Path(settings.kernel_dir))
    if data is None:
        raise DryRunError("no competition data to mount", hint="pass --data DIR or set [competition] data in kernel.toml")
    sample = data / spec.competition.sample_submission
    if not sample.is_file():
        raise DryRunError(f"{sample}: the competition data has no sample submission",
                          hint="point --data (or [competition] data) at the folder with the public test files")
    if REHEARSALS[spec.submission.kind].checks_columns:
        _check_columns(Path(settings.kernel_dir) / SPEC_FILE, spec, sample)
    return data


def _check_columns(spec_path: Path, spec: KernelSpec, sample: Path) -> None:
    """[submission] names columns of the sample submission: a typo there fails only the rerun, hours later."""
    columns = sample_columns(sample)
    wanted = [("submission.id_column", spec.submission.id_column)]
    wanted += [(f"submission.target_columns[{i}]", name) for i, name in enumerate(spec.submission.target_columns)]
    for key, name in wanted:
        if name not in columns:
            close = difflib.get_close_matches(name, columns, n=1, cutoff=0.6)
            guess = f"did you mean '{close[0]}'? " if close else ""
            raise SpecError(f"{spec_path}: {key}: '{name}' is not a column of {sample} ({', '.join(columns)})",
                            hint=f"{guess}the names must match the sample submission's header exactly")


def _run_scenario(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path, public: Path,
                  out: Path) -> ScenarioReport:
    """One scenario in a temporary folder of its own: its stand-in test replicated there (``--rerun-scale``), then run
    and judged by its kind's rehearsal."""
    spec = build.spec
    warm_up_while_the_kernel_runs()  # judging the run needs pandas: imported meanwhile
    work = Path(tempfile.mkdtemp(prefix=f"kkb-dryrun-{scenario}-"))
    try:
        scaled = (replicated_test(spec, data, work / "scaled", settings.rerun_scale, Path(settings.kernel_dir))
                  if scenario == "rerun" and settings.rerun_scale > 1 else None)
        rehearsal = REHEARSALS[spec.submission.kind]
        report = rehearsal.run(ScenarioRun(scenario=scenario, settings=settings, build=build,
                                           data=scaled.path if scaled else data, source=data, public=public, out=out,
                                           work=work, scored_file=rehearsal.scored_file(spec)))
        return replace(report, stand_in=scaled.description) if scaled else report
    finally:
        if not settings.keep_sandbox:
            remove_sandbox(work)


# The dry run's API: its function, what it is given (DryRunSettings, defined beside ScenarioRun) and what it returns.
__all__ = ["DryRunReport", "DryRunSettings", "ScenarioReport", "competition_data", "dry_run"]

