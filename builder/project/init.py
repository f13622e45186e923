"""``kkb init``: a kernel project from what a Kaggler already has.

Two starting points, each giving ``kernel.toml`` with every section present (optional ones commented
out, each with a line saying what it does) and a step script, both rendered from ``templates/scaffold/``:

``init_from_competition``
    The competition's public data (``--data``, or what ``builder.remote.competition_files`` downloaded):
    the sample submission gives the id column (its first column), the target columns and their types,
    and ``predict.py`` writes exactly those, from the sample's own values (a baseline that builds,
    dry-runs and scores as generated).
``init_from_folder``
    A folder as ``kaggle kernels pull -m`` writes it (``builder.project.pulled_kernel``): title, id,
    machine shape and competition come from the metadata, every other source becomes an ``[[inputs]]``
    (the user's own ``…-weights``/``…-code`` datasets become ``[weights]``/``[code]``), the notebook's code
    cells become the step script, and each ``/kaggle/input/…`` or ``../input/…`` it reads is listed with
    what it maps to. What kkb could not map is returned in ``unmapped`` for the CLI to print.

:func:`init_project` is the command: it checks every argument (slugs, existing files) before anything
touches the disk, downloads the data through the callable the CLI passes (the remote stage is above this
one), and adds the CI workflow (``builder.project.ci``). The written ``kernel.toml`` is parsed by the spec
loader before it is written: ``kkb init`` never leaves a project that ``kkb build`` refuses.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import SpecError
from builder.project import pulled_kernel as pulled
from builder.project.ci import CiProvider, check_workflow_target, write_workflow
from builder.project.credentials import kaggle_username
from builder.project.ids import kernel_slug
from builder.project.metric_setting import resolve_metric
from builder.project.scaffold import (
    NOTEBOOK_SCRIPT,
    STEP_SCRIPT,
    TEXT_DTYPES,
    Column,
    InputEntry,
    OwnDataset,
    Scaffold,
    float_reason,
    kernel_toml,
    notebook_script,
    predict_script,
    written_files,
)
from builder.project.spec import SPEC_FILE, KernelSpec, load_spec

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Column", "InitResult", "InitSettings", "InputRead", "check_competition_slug", "find_sample",
           "init_from_competition", "init_from_folder", "init_project", "sample_columns"]

SAMPLE_NAMES = ("sample_submission.csv", "sample_submission.parquet")
# Kaggle's competition slugs: lowercase letters, digits and '-' (never a path: it names a folder under data/).
_COMPETITION_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@dataclass(frozen=True)
class InputRead:
    """One ``/kaggle/input/…`` path the notebook reads, and what it maps to (None: not mapped)."""

    path: str
    input: str | None


@dataclass(frozen=True)
class InitResult:
    kernel_dir: Path
    written: tuple[Path, ...]
    id_column: str | None = None
    targets: tuple[Column, ...] = ()
    reads: tuple[InputRead, ...] = ()
    unmapped: tuple[str, ...] = ()  # what kkb could not map, for the user to see
    notes: tuple[str, ...] = ()
    float_columns: tuple[str, ...] = ()  # written as column_types = "float" (integer 0s in the sample)
    next_steps: tuple[str, ...] = ()  # commands that work on what was written, in order


@dataclass(frozen=True)
class InitSettings:
    kernel_dir: Path
    competition: str | None = None
    data_dir: Path | None = None
    source_dir: Path | None = None  # --from
    owner: str | None = None
    ci: CiProvider | None = None
    repo_root: Path | None = None  # where .github/ goes; default: the git root above the kernel folder (none: refused)


Download = Callable[[Path, str], Path]  # (kernel folder, competition) -> the folder the data is in


def init_project(settings: InitSettings, download: Download | None = None) -> InitResult:
    """``kkb init``: a project from a competition or a pulled kernel, and/or its CI workflow."""
    kernel_dir = Path(settings.kernel_dir)
    if settings.competition is not None:
        check_competition_slug(settings.competition)
    workflow = check_workflow_target(settings.ci, kernel_dir, settings.repo_root) if settings.ci else None
    spec: KernelSpec | None = None  # loaded here only for --ci alone; a new project's is read once, by write_workflow
    if settings.source_dir is not None:
        result = init_from_folder(kernel_dir, settings.source_dir, competition=settings.competition,
                                  data_dir=settings.data_dir, owner=settings.owner)
    elif settings.competition is not None:
        _refuse_existing(kernel_dir, (SPEC_FILE, STEP_SCRIPT))
        _owner(settings.owner)  # before a download, not after it
        data = settings.data_dir or _downloaded(kernel_dir, settings.competition, download)
        result = init_from_competition(kernel_dir, settings.competition, data, owner=settings.owner)
    else:
        if not (kernel_dir / SPEC_FILE).is_file():
            raise SpecError(f"{kernel_dir / SPEC_FILE}: file not found; --ci alone adds a workflow to an existing project",
                            hint="pass --competition SLUG or --from DIR as well, to create the project first")
        spec = load_spec(kernel_dir)  # --ci alone: on an existing project, which must load
        result = InitResult(kernel_dir, (), next_steps=())
    if workflow is None or settings.ci is None:
        return result
    path = write_workflow(settings.ci, workflow, kernel_dir, spec)
    return replace(result, written=(*result.written, path),
                   next_steps=(*result.next_steps, f"set the repository secrets KAGGLE_USERNAME and KAGGLE_KEY, then commit "
                               f"{path} (a tag v* or 'Run workflow' submits)"))


def _downloaded(kernel_dir: Path, competition: str, download: Download | None) -> Path:
    """The competition data, downloaded; a failed download leaves no folder it created behind."""
    if download is None:
        raise SpecError(f"--competition {competition}: no --data, and this caller cannot download",
                        hint="pass --data DIR (the unpacked competition data)")
    created = next((path for path in (kernel_dir, *kernel_dir.parents)[::-1] if not path.exists()), None)
    try:
        return download(kernel_dir, competition)
    except BaseException:
        if created is not None and created.is_dir():
            shutil.rmtree(created, ignore_errors=True)
        raise


# -- kkb init --competition ---------------------------------------------------------------------


def init_from_competition(kernel_dir: Path, competition: str, data_dir: Path, *, owner: str | None = None,
                          title: str | None = None) -> InitResult:
    """A kernel project whose ``predict.py`` writes the competition's sample submission columns."""
    kernel_dir, data_dir = Path(kernel_dir), Path(data_dir)
    check_competition_slug(competition)
    _refuse_existing(kernel_dir, (SPEC_FILE, STEP_SCRIPT))
    sample = find_sample(data_dir)
    id_column, targets = sample_columns(sample)
    floats = probability_placeholders(sample, targets)
    project = Scaffold(title=title or _title_for(kernel_dir), owner=_owner(owner), competition=competition,
                       data=_data_key(data_dir, kernel_dir), sample_submission=sample.relative_to(data_dir).as_posix(),
                       test=_test_name(data_dir), id_column=id_column, targets=targets, float_columns=floats,
                       weights_include=_existing_weights(kernel_dir))
    project.metric, project.metric_note = competition_metric(data_dir, kernel_dir)
    files = {SPEC_FILE: kernel_toml(project, f"the sample submission {sample}"),
             STEP_SCRIPT: predict_script(competition, project.sample_submission, id_column, targets, floats)}
    written = written_files(kernel_dir, files)
    notes = _target_notes(targets, floats)
    return InitResult(kernel_dir, written, id_column, tuple(targets), notes=notes, float_columns=tuple(floats),
                      next_steps=(f"kkb dry-run {kernel_dir}",))


def find_sample(data_dir: Path) -> Path:
    """The sample submission in the competition data: the usual name, else the one file named like it."""
    if not data_dir.is_dir():
        raise SpecError(f"{data_dir}: no such folder (the competition data)",
                        hint="pass --data the folder where `kaggle competitions download` was unpacked")
    for name in SAMPLE_NAMES:
        if (data_dir / name).is_file():
            return data_dir / name
    found = sorted(path for path in data_dir.rglob("*") if path.is_file() and "sample" in path.name.lower()
                   and path.suffix in (".csv", ".parquet"))
    if len(found) == 1:
        return found[0]
    listing = ", ".join(path.relative_to(data_dir).as_posix() for path in found) or "none"
    raise SpecError(f"{data_dir}: no sample submission (looked for {', '.join(SAMPLE_NAMES)}; candidates: {listing})",
                    hint="pass --data the competition's data folder; kkb reads the submission's columns from its sample")


def _read_sample(sample: Path) -> pd.DataFrame:
    import pandas as pd  # here only: kkb init --from without --data never reads a table

    return pd.read_parquet(sample) if sample.suffix == ".parquet" else pd.read_csv(sample, nrows=1000)


def sample_columns(sample: Path) -> tuple[str, list[Column]]:
    """(id column, target columns with their dtypes): the id is the first column, as in Kaggle's samples."""
    frame = _read_sample(sample)
    if len(frame.columns) < 2:
        raise SpecError(f"{sample}: the sample submission has {len(frame.columns)} column(s); kkb needs an id and a target",
                        hint="check that this is the competition's sample submission")
    id_column, *targets = [str(column) for column in frame.columns]
    return id_column, [Column(name, str(frame[name].dtype)) for name in targets]


def probability_placeholders(sample: Path, targets: list[Column]) -> list[str]:
    """Integer target columns holding only 0s, when there are several (RANZCR-style multi-label samples).

    Such a sample stands for probabilities scored as numbers (AUC per label); typing them int64 would round
    every prediction to 0 or 1. One all-zero column alone is as likely a class label: it is only noted.
    """
    frame = _read_sample(sample)
    zeros = [c.name for c in targets if c.dtype in _INTEGER_DTYPES and bool((frame[c.name] == 0).all())]
    return zeros if len(zeros) >= 2 else []


def _target_notes(targets: list[Column], floats: list[str]) -> tuple[str, ...]:
    notes = [f"target '{c.name}' holds text ({c.dtype}): kkb averages step outputs as numbers, so keep one step "
             "and set [submission] combine to what fits, or map labels to numbers" for c in targets if c.dtype in TEXT_DTYPES]
    if floats:
        notes.append(f"[submission] column_types: {', '.join(floats)} = \"float\": {float_reason(floats)}")
    lone = [c.name for c in targets if c.dtype in _INTEGER_DTYPES and len(targets) == 1 and not floats]
    notes += [f"target '{name}' is an integer column in the sample: if the competition scores probabilities (AUC, "
              f"log loss), set [submission] column_types = {{ {name} = \"float\" }}" for name in lone]
    return tuple(notes)


# -- kkb init --from ------------------------------------------------------------------------------


def init_from_folder(kernel_dir: Path, source_dir: Path, *, competition: str | None = None,
                     data_dir: Path | None = None, owner: str | None = None) -> InitResult:
    """A kernel project from a ``kaggle kernels pull -m`` folder (``kernel-metadata.json`` + the code)."""
    kernel_dir, source_dir = Path(kernel_dir), Path(source_dir)
    if competition is not None:
        check_competition_slug(competition)
    meta_path = source_dir / pulled.KERNEL_METADATA
    meta = pulled.read_metadata(source_dir)
    unmapped: list[str] = []
    notes: list[str] = []
    chosen = _chosen_competition(meta, meta_path, competition, unmapped, notes)
    _refuse_existing(kernel_dir, (SPEC_FILE, NOTEBOOK_SCRIPT))
    code_path = pulled.code_file(source_dir, meta)
    owner_id, title = _identity(meta, kernel_dir, notes)
    owner = _owner(owner or owner_id)
    inputs, own = pulled.split_sources(meta, meta_path, owner, unmapped, notes)
    notes += [f"{dataset.ref} is your own {dataset.role} dataset: kkb builds it as [{dataset.role}] dataset (not an "
              f"input); {' '.join(dataset.todo)}" for dataset in own.values()]
    if pulled.flag(meta.get("enable_internet"), False):
        notes.append("enable_internet was true: kkb kernels run with internet off, as code competitions require")
    code, shell = pulled.code_text(code_path)
    unmapped += [f"{code_path.name}: '{line}' (shell or magic: commented out in {NOTEBOOK_SCRIPT})" for line in shell]
    reads = tuple(InputRead(path, pulled.map_read(path, chosen, inputs, own)) for path in pulled.reads(code))
    unmapped += [f"{code_path.name} reads {read.path}: no attached input matches it" for read in reads if read.input is None]
    if reads:
        notes.append(f"{NOTEBOOK_SCRIPT} reads {len(reads)} hard-coded /kaggle/input path(s) (listed at the end of {SPEC_FILE}): "
                     "Kaggle mounts inputs in two layouts, so replace them with kkb_runtime.find_input(NAME); kkb dry-run "
                     "rehearses the current layout, --legacy-layout the old one")
    cards = pulled.suggested_cards(code, [read.path for read in reads])
    notes += [f"[[models]] '{card.name}' suggested for timm '{card.arch}' (commented out in {SPEC_FILE}: set its "
              "checkpoint and num_classes, then run it with a kkb_runtime predict step)" for card in cards]
    project = _folder_scaffold(meta, title, owner, chosen, kernel_dir, data_dir, inputs, own, unmapped)
    if cards:
        project.cards = cards
    project.trailer = _reads_comment(code_path.name, reads)
    manager = pulled.dependency_manager_input(inputs)
    manager_files = pulled.dependency_manager_files(source_dir, manager) if manager is not None else None
    if manager is not None:  # Kaggle's Dependency Manager: its input_requirements.txt installs before the kernel
        project.dependency_manager = manager.name or manager.ref.split("/")[1]
        notes.append(_dependency_manager_note(manager, manager_files, kernel_dir))  # its lines read before any write
    files = {SPEC_FILE: kernel_toml(project, str(meta_path)), NOTEBOOK_SCRIPT: notebook_script(code, code_path.name)}
    written = written_files(kernel_dir, files)
    if manager is not None and manager_files is not None:
        shutil.copytree(manager_files, kernel_dir / manager.path, dirs_exist_ok=True)
    if data_dir is None:
        notes.append(f"no --data: [competition] data names {project.data}, where kkb dry-run looks for the competition's "
                     "public data; target_columns default to the sample submission's columns after the id")
    return InitResult(kernel_dir, written, project.id_column, tuple(project.targets or ()), reads, tuple(unmapped),
                      tuple(notes), tuple(project.float_columns), _folder_next_steps(kernel_dir, project, data_dir, own))


def _dependency_manager_note(entry: InputEntry, found: Path | None, kernel_dir: Path) -> str:
    """What init does with Kaggle's Dependency Manager input: its files copied to its stand-in, or where to get them."""
    head = f"{entry.ref} is Kaggle's Dependency Manager input: [install] dependency_manager names it"
    if found is None:
        return (f"{head}; its files are not beside the pulled kernel: {entry.download} (kkb build reads its "
                f"input_requirements.txt and checks each package installs offline)")
    requirements = pulled.read_requirements(found)
    return (f"{head}; its files are copied from {found} to {kernel_dir / entry.path}: {', '.join(requirements) or 'no package'} "
            "(Kaggle installs them before the kernel runs; kkb dry-run rehearses that, offline)")


def _chosen_competition(meta: dict[str, object], meta_path: Path, competition: str | None, unmapped: list[str],
                        notes: list[str]) -> str:
    competitions = pulled.sources(meta, "competition_sources", meta_path, notes)
    chosen = competition or (competitions[0] if competitions else None)
    if chosen is None:
        raise SpecError(f"{meta_path}: competition_sources is empty, and kkb builds code-competition kernels",
                        hint="pass --competition SLUG (the name in the competition's URL)")
    try:
        check_competition_slug(chosen)
    except SpecError as exc:
        raise SpecError(f"{meta_path}: competition_sources: {exc.message}",
                        hint="pass --competition SLUG (the name in the competition's URL)") from None
    unmapped += [f"competition_sources: '{c}' (a kkb kernel has one competition: {chosen})" for c in competitions
                 if c != chosen]
    return chosen


def _identity(meta: dict[str, object], kernel_dir: Path, notes: list[str]) -> tuple[str | None, str]:
    """(owner, title) from the metadata's ``id`` and ``title``."""
    owner_id, _, slug = str(meta.get("id") or "").partition("/")
    title = str(meta.get("title") or slug or _title_for(kernel_dir))
    if slug and kernel_slug(title) != slug:
        notes.append(f"the title '{title}' gives the slug '{kernel_slug(title)}', not '{slug}': Kaggle derives the slug "
                     "from the title, so kkb pushes to the title's slug")
    return owner_id or None, title


def _folder_scaffold(meta: dict[str, object], title: str, owner: str, competition: str, kernel_dir: Path,
                     data_dir: Path | None, inputs: list[InputEntry], own: dict[str, OwnDataset],
                     unmapped: list[str]) -> Scaffold:
    project = Scaffold(
        title=title, owner=owner, competition=competition, accelerator=pulled.accelerator(meta, unmapped),
        private=pulled.flag(meta.get("is_private"), True),
        kernel_form=pulled.kernel_form(meta),
        docker_image_pinning=str(meta["docker_image_pinning_type"]) if meta.get("docker_image_pinning_type") in (
            "original", "latest") else None,
        docker_image=str(meta["docker_image"]) if meta.get("docker_image") else None, code_include=[NOTEBOOK_SCRIPT],
        step_run=f"python {NOTEBOOK_SCRIPT} --out {{out}}", inputs=inputs, own=own,
        weights_include=_existing_weights(kernel_dir) if "weights" in own else [])
    if data_dir is None:
        project.data = f"data/{competition}"
        project.data_note = f"not there yet: kaggle competitions download -c {competition}, unzipped here"
        return project
    sample = find_sample(Path(data_dir))
    project.id_column, targets = sample_columns(sample)
    project.targets, project.float_columns = targets, probability_placeholders(sample, targets)
    project.sample_submission = sample.relative_to(data_dir).as_posix()
    project.data, project.test = _data_key(Path(data_dir), kernel_dir), _test_name(Path(data_dir))
    return project


def _folder_next_steps(kernel_dir: Path, project: Scaffold, data_dir: Path | None,
                       own: dict[str, OwnDataset]) -> tuple[str, ...]:
    """What works now (kkb build), what fills the local copies the dry run mounts, then the dry run."""
    steps = [f"kkb build {kernel_dir}"]
    if data_dir is None:
        folder = kernel_dir / f"data/{project.competition}"
        steps.append(f"kaggle competitions download -c {project.competition} -p {folder} "
                     f"&& unzip -o {folder}/{project.competition}.zip -d {folder}")
    steps += [f"{entry.download.rsplit(' -p ', 1)[0]} -p {kernel_dir / entry.path}" for entry in project.inputs]
    if "weights" in own and not project.weights_include:
        steps.append(f"kaggle datasets download {own['weights'].ref} -p {kernel_dir / 'weights'} --unzip, then "
                     f"[weights] include = [\"weights/**\"] in {kernel_dir / SPEC_FILE}")
    steps.append(f"kkb dry-run {kernel_dir}")
    return tuple(steps)


def _reads_comment(code_name: str, reads: tuple[InputRead, ...]) -> list[str]:
    if not reads:
        return []
    lines = [f"What {code_name} reads under /kaggle/input, and what each maps to (kkb init --from).",
             "On Kaggle and in kkb dry-run these paths move between layouts: kkb_runtime.find_input(NAME) finds each one."]
    lines += [f"  {read.path}  ->  {read.input or 'NOT MAPPED: attach it as [[inputs]]'}" for read in reads]
    return lines


# -- helpers --------------------------------------------------------------------------------------


def _title_for(kernel_dir: Path) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", " ", kernel_dir.resolve().name).strip() or "kkb"
    return f"{base} inference"[:50].strip()


METRIC_FILES = ("metric.py", "score.py")  # a downloaded metric notebook, as Kaggle's metric pages name it


def competition_metric(data_dir: Path, kernel_dir: Path) -> tuple[str | None, str]:
    """``[competition] metric`` for a new project: the competition's own metric file beside its data (Kaggle's
    format, the most faithful scorer there is), else the metric a local competition's ``competition.toml`` names.
    A file outside the kernel folder cannot be named (the path is relative to it): none then."""
    for folder in (data_dir, data_dir.parent):
        for name in METRIC_FILES:
            if (folder / name).is_file() and kernel_dir.resolve() in (folder / name).resolve().parents:
                return (folder / name).resolve().relative_to(kernel_dir.resolve()).as_posix(), (
                    "the competition's own metric file (Kaggle's format): the dry run's expected score")
    found = resolve_metric(None, {}, kernel_dir, data_dir)
    if found.text is not None and found.file is None:
        return found.text, f"from {found.source}"
    if found.file is not None and kernel_dir.resolve() in (found.base_dir / found.file.path).resolve().parents:
        return (found.base_dir / found.file.path).resolve().relative_to(kernel_dir.resolve()).as_posix(), f"from {found.source}"
    return None, ""


def _data_key(data_dir: Path, kernel_dir: Path) -> str:
    """``[competition] data``: relative to the kernel folder when inside it, else absolute."""
    data, kernel = data_dir.resolve(), kernel_dir.resolve()
    return data.relative_to(kernel).as_posix() if kernel in data.parents else str(data)


def _test_name(data_dir: Path) -> str | None:
    for name in ("test.csv", "test.parquet", "test"):
        if (data_dir / name).exists():
            return name
    return None


def _existing_weights(kernel_dir: Path) -> list[str]:
    """``["weights/**"]`` when the kernel folder already holds weight files, else nothing (a pattern must match)."""
    folder = kernel_dir / "weights"
    return ["weights/**"] if folder.is_dir() and any(path.is_file() for path in folder.rglob("*")) else []


def _owner(given: str | None) -> str:
    """The kernel's owner: kkb build needs one, so init refuses rather than write a project that does not build."""
    owner = given or kaggle_username()
    if not owner:
        raise SpecError("--owner: not given, and no Kaggle username in KAGGLE_USERNAME or kaggle.json",
                        hint="pass --owner YOUR_KAGGLE_USERNAME (it becomes [kernel] owner, which kkb build needs)")
    return owner


def check_competition_slug(slug: str) -> None:
    """Refuses what is not a Kaggle competition slug, before anything is downloaded or written."""
    if not _COMPETITION_SLUG.fullmatch(slug):
        raise SpecError(f"'{slug}' is not a competition slug (lowercase letters, digits and '-')",
                        hint="use the name in the competition's URL: kaggle.com/competitions/<slug>")


def _refuse_existing(kernel_dir: Path, names: tuple[str, ...]) -> None:
    existing = [name for name in names if (kernel_dir / name).exists()]
    if existing:
        raise SpecError(f"{kernel_dir}: already holds {', '.join(existing)}; kkb init does not overwrite a project",
                        hint="pick a new folder, e.g. kernels/<name>")

