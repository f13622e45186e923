"""What ``kkb init`` writes, rendered from ``templates/scaffold/`` through the one strict Jinja environment.

:class:`Scaffold` holds the answers (from the sample submission, or from a pulled kernel's metadata);
:func:`kernel_toml` renders them and proves, before anything is written, that ``kkb build`` accepts the
result (the same loader parses it), so ``kkb init`` never writes a project that does not build.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import SpecError
from builder.project.spec import INPUT_KINDS, SPEC_FILE, parse_spec
from builder.project.templating import render_scaffold

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STEP_SCRIPT = "predict.py"
NOTEBOOK_SCRIPT = "notebook.py"
TEXT_DTYPES = ("object", "str", "string")
FLOAT_REASON = ("the sample holds integer 0s in {columns}: placeholders of probabilities (the scorer reads the "
                "predictions as numbers), so kkb writes them as floats; set \"int\" if the competition scores labels")


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype of the sample's column: int64, float64, object, bool


@dataclass(frozen=True)
class InputEntry:
    """One ``[[inputs]]``: a source kkb does not build, with the local copy the dry run mounts."""

    kind: str
    ref: str
    source_key: str  # kernel-metadata.json's list it came from
    path: str  # the stand-in folder, relative to the kernel folder
    download: str  # the command that fills it
    name: str | None = None  # find_input's name, when the slug is another input's


@dataclass(frozen=True)
class OwnDataset:
    """One of the user's own datasets (``<owner>/<...>-weights`` or ``-code``), built by kkb from now on."""

    role: str  # "weights" or "code"
    ref: str  # owner/slug, without a version
    todo: tuple[str, ...]  # what to do before it ships, for the comment under the key


@dataclass(frozen=True)
class CardSuggestion:
    """A ``[[models]]`` card written commented out: an example, or what the pulled code builds."""

    comment: str
    name: str
    checkpoint: str | list[str]
    num_classes: int = 1
    arch: str | None = None
    factory: str | None = None


EXAMPLE_CARDS = (
    CardSuggestion("a timm checkpoint kkb_runtime.predict runs (--model NAME in a step)", "m1", "weights/m1.pth",
                   arch="resnet18"),
    CardSuggestion("or your own nn.Module, built by a function of your code", "m2",
                   ["weights/m2_fold0.pth", "weights/m2_fold1.pth"], factory="my_package.model:build"),
)


@dataclass
class Scaffold:
    """What goes into kernel.toml; rendered by :func:`kernel_toml`."""

    title: str
    owner: str
    competition: str
    data: str | None = None
    data_note: str | None = None  # why data names a folder that is not there yet
    sample_submission: str = "sample_submission.csv"
    test: str | None = None
    metric: str | None = None  # the competition's metric: a kkb name, or its metric file found beside the data
    metric_note: str = ""
    accelerator: str = "none"
    private: bool = True
    kernel_form: str = "notebook"  # [kernel] type
    docker_image_pinning: str | None = None
    docker_image: str | None = None
    code_include: list[str] = field(default_factory=lambda: [STEP_SCRIPT])
    weights_include: list[str] = field(default_factory=list)  # a pattern only where files match it: the build requires that
    step_run: str = f"python {STEP_SCRIPT} --out {{out}}"
    id_column: str = "id"
    targets: list[Column] | None = None  # None: not read (no sample); kernel.toml then leaves target_columns out
    float_columns: list[str] = field(default_factory=list)  # column_types written as "float"
    inputs: list[InputEntry] = field(default_factory=list)
    own: dict[str, OwnDataset] = field(default_factory=dict)  # role -> the user's own dataset
    cards: tuple[CardSuggestion, ...] = EXAMPLE_CARDS
    trailer: list[str] = field(default_factory=list)  # comment lines at the end (the notebook's reads)
    dependency_manager: str | None = None  # the [[inputs]] name of Kaggle's Dependency Manager input (pm-...)


def kernel_toml(project: Scaffold, origin: str) -> str:
    """The rendered kernel.toml, parsed by the spec loader first: ``origin`` names what it was made from."""
    text = render_scaffold("kernel.toml.j2", _toml_context(project))
    try:
        parse_spec(tomllib.loads(text), source=f"the {SPEC_FILE} made from {origin}")
    except SpecError as exc:  # a value from the user's files that kernel.toml does not accept: say where it came from
        raise SpecError(exc.message, hint=f"{exc.hint}; kkb init took the value from {origin}") from None
    except tomllib.TOMLDecodeError as exc:  # a kkb bug: the template wrote invalid TOML
        raise SpecError(f"the {SPEC_FILE} made from {origin} is not valid TOML: {exc}",
                        hint="report this: kkb init's template wrote it") from None
    return text


def _toml_context(p: Scaffold) -> dict[str, object]:
    targets = p.targets or []
    weights, code = p.own.get("weights"), p.own.get("code")
    types = ", ".join(f"{c.name}: {'float (column_types)' if c.name in p.float_columns else c.dtype}" for c in targets)
    return {
        "title": p.title, "owner": p.owner, "accelerator": p.accelerator, "private": p.private,
        "kernel_form": p.kernel_form, "docker_image_pinning": p.docker_image_pinning, "docker_image": p.docker_image,
        "competition": p.competition, "data": p.data, "data_note": p.data_note, "sample_submission": p.sample_submission,
        "test": p.test, "metric": p.metric, "metric_note": p.metric_note, "code_include": p.code_include, "code_dataset": code.ref if code else None,
        "code_todo": code.todo if code else (), "weights_include": p.weights_include,
        "weights_dataset": weights.ref if weights else None, "weights_todo": weights.todo if weights else (),
        "cards": p.cards, "inputs": p.inputs, "input_kinds": INPUT_KINDS, "step_run": p.step_run,
        "id_column": p.id_column, "targets": [c.name for c in targets], "target_types": types,
        "column_types": p.float_columns, "column_types_reason": float_reason(p.float_columns),
        "trailer": p.trailer, "dependency_manager": p.dependency_manager,
    }


def float_reason(columns: list[str]) -> str:
    shown = ", ".join(columns[:3]) + (f" and {len(columns) - 3} more" if len(columns) > 3 else "")
    return FLOAT_REASON.format(columns=shown)


def predict_script(competition: str, sample: str, id_column: str, targets: list[Column], float_columns: list[str]) -> str:
    types = {c.name: ("float64" if c.name in float_columns else "str" if c.dtype in TEXT_DTYPES else c.dtype)
             for c in targets}
    return render_scaffold("predict.py.j2", {"competition": competition, "sample": sample, "id_column": id_column,
                                             "types": types})


def notebook_script(code: str, source_name: str) -> str:
    return render_scaffold("notebook.py.j2", {"code": code.rstrip("\n"), "source_name": source_name})


def written_files(kernel_dir: Path, files: dict[str, str]) -> tuple[Path, ...]:
    """Writes the files (the caller refused existing ones first); returns their paths in order."""
    kernel_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        (kernel_dir / name).write_text(text, encoding="utf-8")
        written.append(kernel_dir / name)
    return tuple(written)
