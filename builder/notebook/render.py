"""The kernel's code: cell sources rendered with one strict Jinja environment, assembled per kernel form.

Templates live in ``templates/notebook/``, one per cell. A kernel project overrides any of them by
putting a file of the same name in its own ``templates/`` folder; to change only part of a cell it
can ``{% extends "kkb/<name>" %}`` and override ``{% block body %}``.

Both kernel forms take the same rendered cells (``FORMS``, one entry per :class:`KernelForm`): a notebook
assembles them with nbformat, a script kernel renders them in order through ``script.py.j2`` (a markdown
cell as comments), so the fast commit, the steps, combine, rounding and the checks are the same code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import nbformat
from nbformat import v4

from builder.errors import TemplateError
from builder.kkb_runtime.vocabulary import KernelForm, SubmissionKind
from builder.project.templating import TEMPLATES, strict_environment

NOTEBOOK_TEMPLATES = TEMPLATES / "notebook"
SCRIPT_TEMPLATE = "script.py.j2"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3", "file_extension": ".py", "mimetype": "text/x-python"}


@dataclass(frozen=True)
class CellTemplate:
    name: str  # kkb-<name> is the cell id and its tag
    template: str
    kind: str = "code"


CSV_CELLS = (
    CellTemplate("provenance", "00_provenance.md.j2", "markdown"),
    CellTemplate("environment", "10_environment.py.j2"),
    CellTemplate("inputs", "20_inputs.py.j2"),
    CellTemplate("install", "30_install.py.j2"),
    CellTemplate("fast-commit", "40_fast_commit.py.j2"),
    CellTemplate("steps", "50_steps.py.j2"),
    CellTemplate("combine", "60_combine.py.j2"),
    CellTemplate("round", "70_round.py.j2"),
    CellTemplate("write", "80_write.py.j2"),
)

# Evaluation-API competitions: no steps and no CSV; the competition's inference server answers.
EVALUATION_API_CELLS = (
    CellTemplate("provenance", "00_provenance.md.j2", "markdown"),
    CellTemplate("environment", "10_environment.py.j2"),
    CellTemplate("inputs", "20_evaluation_inputs.py.j2"),
    CellTemplate("install", "30_install.py.j2"),
    CellTemplate("fast-commit", "40_evaluation_fast_commit.py.j2"),
    CellTemplate("inference-server", "45_inference_server.py.j2"),
    CellTemplate("serve", "85_serve.py.j2"),
)


# The notebook's cells for each submission kind.
CELLS: dict[SubmissionKind, tuple[CellTemplate, ...]] = {
    SubmissionKind.CSV: CSV_CELLS,
    SubmissionKind.EVALUATION_API: EVALUATION_API_CELLS,
}


def cells_for(kind: SubmissionKind) -> tuple[CellTemplate, ...]:
    """The notebook's cells for a ``[submission] kind``."""
    return CELLS[kind]


@lru_cache(maxsize=16)
def make_environment(override_dir: Path | None = None) -> jinja2.Environment:
    """The one strict Jinja environment (builder.project.templating) over the cells, the kernel's overrides first."""
    base = jinja2.FileSystemLoader(str(NOTEBOOK_TEMPLATES))
    loaders: list[jinja2.BaseLoader] = []
    if override_dir is not None and override_dir.is_dir():
        loaders.append(jinja2.FileSystemLoader(str(override_dir)))
    loaders += [jinja2.PrefixLoader({"kkb": base}), base]
    return strict_environment(jinja2.ChoiceLoader(loaders))


def render_cell(env: jinja2.Environment, template: str, context: Mapping[str, Any]) -> str:
    try:
        return env.get_template(template).render(**context).strip() + "\n"
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {template}: {exc.message}",
                            hint="a kernel's template override may only use the variables kkb passes; see templates/notebook/") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {exc.filename or template}, line {exc.lineno}: {exc.message}",
                            hint="fix the Jinja syntax in the template override") from None
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template {exc.name} not found", hint="an override may only extend kkb/<name> of an existing cell") from None


@dataclass(frozen=True)
class RenderedCell:
    name: str  # kkb-<name> is the cell id and its tag
    kind: str  # "code" or "markdown"
    source: str

    @property
    def id(self) -> str:
        return f"kkb-{self.name}"

    @property
    def script_lines(self) -> str:
        """The cell as a script holds it: code as written, markdown as comment lines."""
        if self.kind != "markdown":
            return self.source
        return "\n".join(f"# {line}".rstrip() for line in self.source.splitlines())


def render_cells(cells: tuple[CellTemplate, ...], context: Mapping[str, Any], override_dir: Path | None = None) -> list[RenderedCell]:
    env = make_environment(override_dir)
    return [RenderedCell(cell.name, cell.kind, render_cell(env, cell.template, context).rstrip("\n")) for cell in cells]


def render_notebook(cells: tuple[CellTemplate, ...], context: Mapping[str, Any], provenance: Mapping[str, Any],
                    override_dir: Path | None = None) -> nbformat.NotebookNode:
    return assemble_notebook(render_cells(cells, context, override_dir), provenance)


def assemble_notebook(cells: Sequence[RenderedCell], provenance: Mapping[str, Any]) -> nbformat.NotebookNode:
    notebook: nbformat.NotebookNode = v4.new_notebook()
    for cell in cells:
        metadata = {"tags": [cell.id]}
        node = v4.new_markdown_cell(cell.source, metadata=metadata) if cell.kind == "markdown" else \
            v4.new_code_cell(cell.source, metadata=metadata)
        node["id"] = cell.id
        notebook.cells.append(node)
    notebook.metadata["kernelspec"] = dict(KERNELSPEC)
    notebook.metadata["language_info"] = dict(LANGUAGE_INFO)
    notebook.metadata["kkb"] = dict(provenance)
    nbformat.validate(notebook)
    return notebook


def notebook_text(notebook: nbformat.NotebookNode) -> str:
    text: str = nbformat.writes(notebook, version=4)
    return text + "\n"


def _notebook_code(cells: Sequence[RenderedCell], provenance: Mapping[str, Any], override_dir: Path | None) -> str:
    return notebook_text(assemble_notebook(cells, provenance))


def _script_code(cells: Sequence[RenderedCell], provenance: Mapping[str, Any], override_dir: Path | None) -> str:
    """The cells as one script (Kaggle's ``kernel_type = "script"``), through ``script.py.j2``."""
    context = {"cells": list(cells), "provenance_json": json.dumps(dict(provenance), sort_keys=True)}
    return render_cell(make_environment(override_dir), SCRIPT_TEMPLATE, context)


@dataclass(frozen=True)
class KernelCode:
    """How one kernel form writes its code file."""

    suffix: str  # the code file's, e.g. ".ipynb"
    text: Callable[[Sequence[RenderedCell], Mapping[str, Any], Path | None], str]


FORMS: dict[KernelForm, KernelCode] = {
    KernelForm.NOTEBOOK: KernelCode(".ipynb", _notebook_code),
    KernelForm.SCRIPT: KernelCode(".py", _script_code),
}


def render_code(form: KernelForm, cells: tuple[CellTemplate, ...], context: Mapping[str, Any],
                provenance: Mapping[str, Any], override_dir: Path | None = None) -> str:
    """The kernel's code file for ``form``: the same cells, as a notebook or as a script."""
    return FORMS[form].text(render_cells(cells, context, override_dir), provenance, override_dir)
