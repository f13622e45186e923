"""``kkb init``: a kernel project from what a Kaggler already has.

Two starting points, each giving ``kernel.toml`` with every section present (optional ones commented
out, each with a line saying what it does) and a step script:

``init_from_competition``
    The competition's public data (``--data``, or what ``builder.remote.competition_files`` downloaded):
    the sample submission gives the id column (its first column), the target columns and their types,
    and ``predict.py`` writes exactly those, from the sample's own values (a baseline that builds,
    dry-runs and scores as generated).
``init_from_folder``
    A folder as ``kaggle kernels pull -m`` writes it (``kernel-metadata.json`` and the notebook or
    script): title, id, machine shape and competition come from the metadata, every other source
    becomes an ``[[inputs]]``, the notebook's code cells become the step script, and each
    ``/kaggle/input/…`` or ``../input/…`` it reads is listed with the input it maps to. What kkb could
    not map (shell and magic lines, extra competitions, unknown reads, malformed sources) is returned
    in ``unmapped`` for the CLI to print, never dropped silently.

Nothing here talks to Kaggle; writing refuses to replace an existing ``kernel.toml`` or step script.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from builder.errors import SpecError
from builder.project.credentials import kaggle_username
from builder.project.ids import kernel_slug
from builder.project.spec import INPUT_KINDS, MACHINE_SHAPES, SPEC_FILE, parse_input_ref

STEP_SCRIPT = "predict.py"
NOTEBOOK_SCRIPT = "notebook.py"
KERNEL_METADATA = "kernel-metadata.json"
SAMPLE_NAMES = ("sample_submission.csv", "sample_submission.parquet")
_INPUT_READ = re.compile(r"(?:/kaggle/input|\.\./input)(?:/[^\s'\"()\[\]{},;]*)?")
_SOURCE_KINDS = {"dataset_sources": "dataset", "model_sources": "model", "kernel_sources": "notebook"}


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype of the sample's column: int64, float64, object, bool


@dataclass(frozen=True)
class InputRead:
    """One ``/kaggle/input/…`` path the notebook reads, and the input it maps to (None: not mapped)."""

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


@dataclass
class _Project:
    """What goes into kernel.toml; rendered by :func:`_kernel_toml`."""

    title: str
    owner: str | None
    competition: str
    data: str | None = None
    sample_submission: str = "sample_submission.csv"
    test: str | None = None
    accelerator: str = "none"
    private: bool = True
    kernel_type: str = "notebook"
    docker_image_pinning: str | None = None
    docker_image: str | None = None
    code: list[str] = field(default_factory=lambda: [STEP_SCRIPT])
    step_run: str = f"python {STEP_SCRIPT} --out {{out}}"
    id_column: str = "id"
    targets: list[Column] = field(default_factory=list)
    inputs: list[tuple[str, str]] = field(default_factory=list)  # (kind, ref)
    trailer: list[str] = field(default_factory=list)  # comment lines at the end (the notebook's reads)


# -- kkb init --competition ---------------------------------------------------------------------


def init_from_competition(kernel_dir: Path, competition: str, data_dir: Path, *, owner: str | None = None,
                          title: str | None = None) -> InitResult:
    """A kernel project whose ``predict.py`` writes the competition's sample submission columns."""
    kernel_dir = Path(kernel_dir)
    _check_competition_slug(competition)
    _refuse_existing(kernel_dir, (SPEC_FILE, STEP_SCRIPT))
    sample = find_sample(Path(data_dir))
    id_column, targets = sample_columns(sample)
    project = _Project(title=title or _title_for(kernel_dir), owner=owner or kaggle_username(), competition=competition,
                       data=_data_key(Path(data_dir), kernel_dir), sample_submission=sample.relative_to(data_dir).as_posix(),
                       test=_test_name(Path(data_dir)), id_column=id_column, targets=targets)
    written = _write(kernel_dir, {SPEC_FILE: _kernel_toml(project),
                                  STEP_SCRIPT: _predict_script(competition, project.sample_submission, id_column, targets)})
    notes = tuple(f"target '{c.name}' holds text ({c.dtype}): kkb averages step outputs as numbers, so keep one step "
                  "and set [submission] combine to what fits, or map labels to numbers" for c in targets
                  if c.dtype in ("object", "str", "string"))
    return InitResult(kernel_dir, written, id_column, tuple(targets), notes=notes)


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


def sample_columns(sample: Path) -> tuple[str, list[Column]]:
    """(id column, target columns with their dtypes): the id is the first column, as in Kaggle's samples."""
    import pandas as pd

    frame = pd.read_parquet(sample) if sample.suffix == ".parquet" else pd.read_csv(sample, nrows=1000)
    if len(frame.columns) < 2:
        raise SpecError(f"{sample}: the sample submission has {len(frame.columns)} column(s); kkb needs an id and a target",
                        hint="check that this is the competition's sample submission")
    id_column, *targets = [str(column) for column in frame.columns]
    return id_column, [Column(name, str(frame[name].dtype)) for name in targets]


def _predict_script(competition: str, sample: str, id_column: str, targets: list[Column]) -> str:
    types = {c.name: ("str" if c.dtype in ("object", "string") else c.dtype) for c in targets}
    return f'''"""The inference step `kkb init` wrote for the competition {competition}.

kkb runs it as `python predict.py --out FILE` in the kernel: it must write one row per row of the
sample submission, with the id column and the target columns in their types. The competition data is
at $KKB_COMPETITION_DIR, your weights dataset at $KKB_WEIGHTS_DIR. Replace `predict` with your model.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

SAMPLE = {sample!r}
ID_COLUMN = {id_column!r}
TARGETS = {types!r}


def predict(sample: pd.DataFrame) -> pd.DataFrame:
    """A baseline that scores as generated: the sample submission's own values, in each target's type."""
    out = sample[[ID_COLUMN, *TARGETS]].copy()
    for column, dtype in TARGETS.items():
        out[column] = out[column].astype(dtype)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, help="where kkb wants this step's predictions (CSV)")
    args = parser.parse_args()
    data = Path(os.environ["KKB_COMPETITION_DIR"])
    read = pd.read_parquet if SAMPLE.endswith(".parquet") else pd.read_csv
    sample = read(data / SAMPLE, dtype={{ID_COLUMN: str}}) if SAMPLE.endswith(".csv") else read(data / SAMPLE)
    limit = os.environ.get("KKB_ROW_LIMIT")  # [fast_commit] write = "first_rows"
    if limit:
        sample = sample.head(int(limit))
    predict(sample).to_csv(args.out, index=False)
    print(f"predict.py: {{len(sample)}} rows")


if __name__ == "__main__":
    main()
'''


# -- kkb init --from ------------------------------------------------------------------------------


def init_from_folder(kernel_dir: Path, source_dir: Path, *, competition: str | None = None,
                     data_dir: Path | None = None, owner: str | None = None) -> InitResult:
    """A kernel project from a ``kaggle kernels pull -m`` folder (``kernel-metadata.json`` + the code)."""
    kernel_dir, source_dir = Path(kernel_dir), Path(source_dir)
    meta = _read_metadata(source_dir)
    unmapped: list[str] = []
    notes: list[str] = []
    code_path = _code_file(source_dir, meta)
    owner_id, _, slug = str(meta.get("id") or "").partition("/")
    title = str(meta.get("title") or slug or kernel_dir.name)
    if slug and kernel_slug(title) != slug:
        notes.append(f"the title '{title}' gives the slug '{kernel_slug(title)}', not '{slug}': Kaggle derives the slug "
                     "from the title, so kkb pushes to the title's slug")
    competitions = [str(c) for c in meta.get("competition_sources") or []]
    chosen = competition or (competitions[0] if competitions else None)
    if chosen is None:
        raise SpecError(f"{source_dir / KERNEL_METADATA}: competition_sources is empty, and kkb builds code-competition kernels",
                        hint="pass --competition SLUG (the name in the competition's URL)")
    _check_competition_slug(chosen)
    unmapped += [f"competition_sources: '{c}' (a kkb kernel has one competition: {chosen})" for c in competitions
                 if c != chosen]
    if _flag(meta.get("enable_internet"), False):
        notes.append("enable_internet was true: kkb kernels run with internet off, as code competitions require")
    inputs = _inputs_of(meta, unmapped)
    code, shell = _code_text(code_path)
    unmapped += [f"{code_path.name}: '{line}' (shell or magic: commented out in {NOTEBOOK_SCRIPT})" for line in shell]
    reads = tuple(_map_read(path, chosen, inputs) for path in _reads(code))
    unmapped += [f"{code_path.name} reads {read.path}: no attached input matches it" for read in reads if read.input is None]
    targets: list[Column]
    id_column, targets = ("id", [])
    sample_name = "sample_submission.csv"
    if data_dir is not None:
        sample = find_sample(Path(data_dir))
        id_column, targets = sample_columns(sample)
        sample_name = sample.relative_to(data_dir).as_posix()
    else:
        notes.append("no --data: set [competition] data and [submission] target_columns before kkb dry-run")
    project = _Project(
        title=title, owner=owner or owner_id or kaggle_username(), competition=chosen,
        data=_data_key(Path(data_dir), kernel_dir) if data_dir is not None else None, sample_submission=sample_name,
        test=_test_name(Path(data_dir)) if data_dir is not None else None, accelerator=_accelerator(meta, unmapped),
        private=_flag(meta.get("is_private"), True),
        kernel_type="script" if str(meta.get("kernel_type", "notebook")) == "script" else "notebook",
        docker_image_pinning=meta.get("docker_image_pinning_type") if meta.get("docker_image_pinning_type") in (
            "original", "latest") else None,
        docker_image=str(meta["docker_image"]) if meta.get("docker_image") else None, code=[NOTEBOOK_SCRIPT],
        step_run=f"python {NOTEBOOK_SCRIPT} --out {{out}}", id_column=id_column, targets=targets, inputs=inputs,
        trailer=_reads_comment(code_path.name, reads))
    written = _write(kernel_dir, {SPEC_FILE: _kernel_toml(project), NOTEBOOK_SCRIPT: _notebook_script(code, code_path.name)},
                     refuse=(SPEC_FILE, NOTEBOOK_SCRIPT))
    return InitResult(kernel_dir, written, id_column, tuple(targets), reads, tuple(unmapped), tuple(notes))


def _read_metadata(source_dir: Path) -> dict[str, Any]:
    path = source_dir / KERNEL_METADATA
    if not path.is_file():
        raise SpecError(f"{path}: file not found",
                        hint="pass --from a folder written by `kaggle kernels pull OWNER/SLUG -p DIR -m`")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SpecError(f"{path}: not valid JSON: {exc}", hint="fix the file or pull it again") from None
    if not isinstance(meta, dict):
        raise SpecError(f"{path}: not a JSON object", hint="pull the kernel again with -m")
    return meta


def _code_file(source_dir: Path, meta: dict[str, Any]) -> Path:
    named = meta.get("code_file")
    if named and (source_dir / str(named)).is_file():
        return source_dir / str(named)
    found = sorted(p for p in source_dir.iterdir() if p.suffix in (".ipynb", ".py") and p.is_file())
    if len(found) == 1:
        return found[0]
    raise SpecError(f"{source_dir}: no code file (code_file = {named!r} in {KERNEL_METADATA}, and "
                    f"{len(found)} notebooks or scripts next to it)",
                    hint="pull the kernel again with `kaggle kernels pull OWNER/SLUG -p DIR -m`")


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def _accelerator(meta: dict[str, Any], unmapped: list[str]) -> str:
    shape = meta.get("machine_shape")
    if shape in MACHINE_SHAPES:
        return str(shape)
    if shape:
        unmapped.append(f"machine_shape: '{shape}' (not a shape kkb knows; using the default for the flags)")
    if _flag(meta.get("enable_tpu"), False):
        return "tpu"
    return "gpu" if _flag(meta.get("enable_gpu"), False) else "none"


def _inputs_of(meta: dict[str, Any], unmapped: list[str]) -> list[tuple[str, str]]:
    inputs = []
    for key, kind in _SOURCE_KINDS.items():
        for ref in meta.get(key) or []:
            try:
                parse_input_ref(kind, str(ref))
            except ValueError as exc:
                unmapped.append(f"{key}: {exc}")
                continue
            inputs.append((kind, str(ref)))
    return inputs


def _code_text(path: Path) -> tuple[str, list[str]]:
    """The code (a notebook's code cells, in order), with shell and magic lines commented out."""
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except ValueError as exc:
            raise SpecError(f"{path}: not a valid notebook: {exc}", hint="pull the kernel again") from None
        chunks = ["".join(cell.get("source", "")) if isinstance(cell.get("source"), list) else str(cell.get("source", ""))
                  for cell in cells if cell.get("cell_type") == "code"]
        text = "\n\n".join(chunk.rstrip() for chunk in chunks if chunk.strip())
    else:
        text = path.read_text(encoding="utf-8")
    lines, shell = [], []
    for line in text.splitlines():
        if line.lstrip().startswith(("!", "%")):
            shell.append(line.strip())
            lines.append(f"# kkb init: not run in a step: {line.strip()}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n", shell


def _reads(code: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _INPUT_READ.finditer(code):
        seen.setdefault(match.group(0).rstrip("/"), None)
    return list(seen)


def _map_read(path: str, competition: str, inputs: list[tuple[str, str]]) -> InputRead:
    """``/kaggle/input/<...>`` in either layout → the input it reads, e.g. ``dataset bob/timm (find_input('timm'))``."""
    parts = PurePosixPath(path.split("input", 1)[1]).parts[1:]
    if not parts:
        return InputRead(path, None)
    if parts[0] in ("competitions", competition) and competition in parts[:2]:
        return InputRead(path, f"competition {competition}")
    for kind, ref in inputs:
        ref_parts = ref.split("/")
        slug = ref_parts[1]
        current = {"dataset": ("datasets", *ref_parts[:2]), "notebook": ("notebooks", *ref_parts[:2]),
                   "model": ("models", *ref_parts)}[kind]
        legacy = tuple(ref_parts[1:]) if kind == "model" else (slug,)
        if parts[:len(current)] == current or parts[:len(legacy)] == legacy or (kind == "model" and parts[:1] == (slug,)):
            return InputRead(path, f"{kind} {ref} (find_input('{slug}'))")
    return InputRead(path, None)


def _reads_comment(code_name: str, reads: tuple[InputRead, ...]) -> list[str]:
    if not reads:
        return []
    lines = [f"What {code_name} reads under /kaggle/input, and the input each maps to (kkb init --from).",
             "On Kaggle and in kkb dry-run these paths move between layouts: kkb_runtime.find_input(NAME) finds each one."]
    lines += [f"  {read.path}  ->  {read.input or 'NOT MAPPED: attach it as [[inputs]]'}" for read in reads]
    return lines


def _notebook_script(code: str, source_name: str) -> str:
    return (f'"""{source_name} as a kkb step, written by `kkb init --from` (code cells in order)."""\n\n' + code +
            "\n\n# -- kkb init: a step hands its predictions to kkb as --out (the submission this code wrote) --\n"
            "import shutil as _kkb_shutil  # noqa: E402\nimport sys as _kkb_sys  # noqa: E402\n\n"
            'if "--out" in _kkb_sys.argv:\n'
            '    _kkb_shutil.copyfile("submission.csv", _kkb_sys.argv[_kkb_sys.argv.index("--out") + 1])\n')


# -- kernel.toml ----------------------------------------------------------------------------------


def _q(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def _kernel_toml(p: _Project) -> str:
    owner = f"owner = {_q(p.owner)}" if p.owner else '# owner = "your-kaggle-username"'
    data = f"data = {_q(p.data)}" if p.data else '# data = "data/competition"'
    test = f"test = {_q(p.test)}" if p.test else '# test = "test.csv"'
    pinning = f"docker_image_pinning = {_q(p.docker_image_pinning)}" if p.docker_image_pinning else \
        '# docker_image_pinning = "original"'
    image = f"docker_image = {_q(p.docker_image)}" if p.docker_image else '# docker_image = "gcr.io/kaggle-gpu-images/python@sha256:..."'
    targets = ", ".join(_q(c.name) for c in p.targets)
    types = ", ".join(f"{c.name}: {c.dtype}" for c in p.targets) or "set them from the sample submission's header"
    lines = [
        "# kernel.toml written by `kkb init`. Every section kkb reads is here; optional ones are commented out.",
        "# Reference: README.md (sections 'kernel.toml', 'Attaching inputs', 'Models') and kernels/minimal.",
        "",
        "[kernel]",
        f"title = {_q(p.title)}  # 5-50 characters; Kaggle derives the kernel slug from it",
        f"{owner}  # your Kaggle username (default: your credentials')",
        f"accelerator = {_q(p.accelerator)}  # gpu (T4 x2), tpu, none, or a machine shape such as NvidiaL4",
        f"private = {str(p.private).lower()}",
        f"kernel_type = {_q(p.kernel_type)}  # notebook or script",
        pinning + "  # keep the image of the first run (original) or always the newest (latest)",
        image,
        "# timeout_seconds = 32400  # end the run earlier than Kaggle's limit",
        "",
        "[competition]",
        f"slug = {_q(p.competition)}",
        data + "  # the public data kkb dry-run mounts: relative to this folder, absolute, or ~/...",
        f"sample_submission = {_q(p.sample_submission)}",
        test + "  # the test table or folder, replicated by kkb dry-run --rerun-scale N",
        "# hidden_rows = 10000  # rows of the hidden test: the dry run projects the rerun's time to it",
        "time_limit_hours = 9.0  # the competition's run-time limit",
        '# submission_file = "submission.csv"  # the file Kaggle scores, when the competition names another',
        "",
        "[code]  # files of the code dataset: globs relative to this folder",
        f"include = [{', '.join(_q(path) for path in p.code)}]",
        "exclude = []",
        "",
        "[weights]  # files of the weights dataset (checkpoints); none yet",
        "include = []",
        '# publish = "model"  # publish them as a Kaggle Model instead of a dataset',
        '# framework = "pytorch"  # with publish = "model": the Model variation <framework>/<variation>',
        '# variation = "default"',
        "",
        "[install]  # packages the kernel installs offline, from a wheelhouse built by `kkb wheels`",
        "requirements = []",
        "",
        "# [[models]]  # a timm checkpoint kkb_runtime.predict runs (--model NAME in a step)",
        '# name = "m1"',
        '# arch = "resnet18"',
        '# checkpoint = "weights/m1.pth"',
        "# num_classes = 1",
        '# checkpoint = "weights/m1_fold*.pth"  # folds: a glob or a list, run in one process and averaged',
        '# factory = "my_package.model:build"  # instead of arch: your nn.Module, called with model_kwargs',
        "",
    ]
    lines += _inputs_toml(p.inputs)
    lines += [
        "[[steps]]  # each step writes predictions for every row to {out}; kkb combines them",
        'name = "predict"',
        f"run = {_q(p.step_run)}",
        "",
        "[submission]",
        'file = "submission.csv"',
        f"id_column = {_q(p.id_column)}",
        f"target_columns = [{targets}]  # {types}",
        'combine = "mean"  # mean, weighted_mean ([[steps]] weight) or rank_mean',
        "decimals = 6",
        'kind = "csv"  # or "evaluation-api" with an [evaluation_api] table',
        "# prediction_columns = [\"p0\", \"p1\"]  # what the steps write, when [[postprocess]] turns it into the targets",
        '# column_types = { "*" = "float" }  # when the sample\'s dtypes are not the scored ones (int, float, str)',
        "",
        "# [[postprocess]]  # after combine: argmax (through labels), threshold, clip, or your function",
        '# kind = "argmax"',
        '# columns = ["p0", "p1"]',
        '# into = "label"',
        "",
        "# [push]  # how long push and submit wait for Kaggle, in seconds (--wait-* on the command line wins)",
        "# dataset_timeout_s = 1800",
        "# run_timeout_s = 36000",
        "# score_timeout_s = 36000",
        "",
        "[fast_commit]  # the commit run writes the sample submission instead of running every step",
        "enabled = true",
        "rows_below = 11  # ... when the public test has fewer rows than this",
        "",
        "# [evaluation_api]  # competitions scored through kaggle_evaluation: see kernels/evalapi/kernel.toml",
        '# module = "kaggle_evaluation.<competition>_inference_server"',
        '# server_class = "<Competition>InferenceServer"',
        '# predict = "my_package.serve:predict"',
    ]
    if p.trailer:
        lines += ["", *(f"# {line}" for line in p.trailer)]
    return "\n".join(lines) + "\n"


def _inputs_toml(inputs: list[tuple[str, str]]) -> list[str]:
    if not inputs:
        return ["# [[inputs]]  # a dataset, Kaggle Model version or notebook output kkb does not build",
                f"# kind = \"dataset\"  # {' | '.join(INPUT_KINDS)}",
                '# ref = "owner/slug"  # model: owner/model/framework/variation/VERSION',
                '# path = "inputs/slug"  # a local copy the dry run mounts where Kaggle would', ""]
    lines = []
    for kind, ref in inputs:
        slug = ref.split("/")[1]
        lines += [f"[[inputs]]  # from {dict((v, k) for k, v in _SOURCE_KINDS.items())[kind]}",
                  f"kind = {_q(kind)}", f"ref = {_q(ref)}",
                  f"# path = \"inputs/{slug}\"  # a local copy for kkb dry-run (it refuses to run without one)", ""]
    return lines


# -- helpers --------------------------------------------------------------------------------------


def _title_for(kernel_dir: Path) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", " ", kernel_dir.resolve().name).strip() or "kkb"
    return f"{base} inference"[:50].strip()


def _data_key(data_dir: Path, kernel_dir: Path) -> str:
    """``[competition] data``: relative to the kernel folder when inside it, else absolute."""
    data, kernel = data_dir.resolve(), kernel_dir.resolve()
    return data.relative_to(kernel).as_posix() if kernel in data.parents else str(data)


def _test_name(data_dir: Path) -> str | None:
    for name in ("test.csv", "test.parquet", "test"):
        if (data_dir / name).exists():
            return name
    return None


def _check_competition_slug(slug: str) -> None:
    if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug):
        raise SpecError(f"'{slug}' is not a competition slug (lowercase letters, digits and '-')",
                        hint="use the name in the competition's URL: kaggle.com/competitions/<slug>")


def _refuse_existing(kernel_dir: Path, names: tuple[str, ...]) -> None:
    existing = [name for name in names if (kernel_dir / name).exists()]
    if existing:
        raise SpecError(f"{kernel_dir}: already holds {', '.join(existing)}; kkb init does not overwrite a project",
                        hint="pick a new folder, e.g. kernels/<name>")


def _write(kernel_dir: Path, files: dict[str, str], refuse: tuple[str, ...] | None = None) -> tuple[Path, ...]:
    _refuse_existing(kernel_dir, refuse or tuple(files))
    kernel_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        (kernel_dir / name).write_text(text, encoding="utf-8")
        written.append(kernel_dir / name)
    return tuple(written)
