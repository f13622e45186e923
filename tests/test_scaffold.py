"""The scaffold ``kkb init`` writes and the README cannot drift from ``kernel.toml``'s real keys.

Every key the scaffold writes, its commented-out optional lines uncommented, is a field of the spec's
models (the loader's own ``extra="forbid"`` boundary); so is every key of the README's ``toml`` blocks.
The scaffold, the notebook and the CI workflow are rendered by the one strict Jinja environment.
"""

from __future__ import annotations

import re
import sys
import typing

import jinja2
import pytest
from pydantic import BaseModel

from builder.notebook.render import make_environment
from builder.project.cards import expand_models
from builder.project.cards.base import ORIGINS_KEY
from builder.project.cards.kinds import DEFAULT_KIND
from builder.project.scaffold import Column, InputEntry, OwnDataset, Scaffold, kernel_toml
from builder.project.spec import KernelSpec
from builder.project.templating import SCAFFOLD_TEMPLATES, scaffold_environment, strict_environment
from tests.support.files import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# An optional line: a commented table header or `key = value` (prose comments never start with a lone name and '=').
_OPTIONAL = re.compile(r"^# (\[\[?[a-z_]+\]\]?(\s.*)?|[A-Za-z_][A-Za-z0-9_]* = .*)$")

SCAFFOLDS = {
    "competition": Scaffold(title="new inference", owner="me", competition="kkb-minimal", data="data",
                            targets=[Column("target", "float64")]),
    "from": Scaffold(
        title="My Inference", owner="me", competition="kkb-clip", kernel_form="script", docker_image_pinning="latest",
        docker_image="gcr.io/kaggle-images/python@sha256:0", targets=[Column("a", "int64"), Column("b", "int64")],
        float_columns=["a", "b"], code_include=["notebook.py"], step_run="python notebook.py --out {out}",
        inputs=[InputEntry("dataset", "bob/timm-pkg", "dataset_sources", "inputs/timm-pkg", "kaggle ..."),
                InputEntry("model", "bob/bert/pytorch/base/1", "model_sources", "inputs/b", "kaggle ...", name="b")],
        own={"weights": OwnDataset("weights", "me/my-inference-weights", ("download it",)),
             "code": OwnDataset("code", "me/my-inference-code", ("download it",))},
        trailer=["What it reads", "  /kaggle/input/x  ->  NOT MAPPED"]),
}


def uncommented(text: str) -> str:
    return "\n".join(line[2:] if _OPTIONAL.match(line) else line for line in text.splitlines()) + "\n"


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def unknown_keys(model: type[BaseModel], data: dict[str, object], where: str = "") -> list[str]:
    """Every key of ``data`` that is no field of ``model`` (nested tables and arrays of tables included)."""
    unknown = []
    for key, value in data.items():
        if key == ORIGINS_KEY:  # what expand_models records of a card's shorthands, never written by a user
            continue
        field = model.model_fields.get(key)
        if field is None:
            unknown.append(f"{where}{key}")
            continue
        nested = _models_in(field.annotation)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if nested and isinstance(item, dict):
                unknown += unknown_keys(_member_for(nested, item), item, f"{where}{key}.")
    return unknown


def _member_for(models: list[type[BaseModel]], item: dict[str, object]) -> type[BaseModel]:
    """The union member a table is read as: a card by its ``kind`` (no kind: an image card), else the first."""
    if "kind" not in models[0].model_fields:
        return models[0]
    kind = str(item.get("kind", DEFAULT_KIND))
    return next((model for model in models if kind in [str(arg) for arg in typing.get_args(model.model_fields["kind"].annotation)]),
                models[0])


@pytest.mark.parametrize("name", sorted(SCAFFOLDS))
def test_every_key_of_the_scaffold_and_its_optional_lines_is_a_spec_key(name: str) -> None:
    text = kernel_toml(SCAFFOLDS[name], "a test")  # the loader accepts it as written
    full = uncommented(text)
    optional = [line for line in text.splitlines() if _OPTIONAL.match(line)]
    assert len(optional) > 20  # the optional lines were found, and uncommented
    data = tomllib.loads(full)  # valid TOML with every optional line in (no key twice)
    assert unknown_keys(KernelSpec, data) == []
    assert {"models", "inputs", "postprocess", "push", "evaluation_api"} <= set(data)


def test_column_names_with_newlines_stay_inside_their_comments() -> None:
    project = Scaffold(title="new inference", owner="me", competition="c", targets=[Column("a\nb = 1", "int64"),
                                                                                     Column("c\x00", "int64")],
                       float_columns=["a\nb = 1", "c\x00"])
    data = tomllib.loads(kernel_toml(project, "a test"))
    assert data["submission"]["column_types"] == {"a\nb = 1": "float", "c\x00": "float"}


def test_the_checker_finds_a_key_the_spec_does_not_have() -> None:
    data = tomllib.loads('[kernel]\ntitel = "x"\n[[models]]\nname = "m"\narchitecture = "r"\n')
    assert unknown_keys(KernelSpec, data) == ["kernel.titel", "models.architecture"]


def _readme_toml_blocks() -> list[str]:
    """The README's and the docs site's (tests/test_docs.py checks them per table and card kind too)."""
    text = "\n".join(path.read_text() for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    return re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)


def test_every_key_in_the_readmes_toml_blocks_is_a_spec_key() -> None:
    blocks = _readme_toml_blocks()
    assert blocks
    unknown = []
    for block in blocks:
        # the shorthands ([model_defaults], base = "NAME") folded in as the loader folds them
        unknown += unknown_keys(KernelSpec, expand_models(tomllib.loads(uncommented(block))))
    assert unknown == []


def test_one_strict_environment_renders_the_scaffold_and_the_notebook() -> None:
    for env in (scaffold_environment(), make_environment(None), strict_environment(jinja2.DictLoader({}))):
        assert env.undefined is jinja2.StrictUndefined and env.autoescape is False
        assert {"py", "toml", "yaml", "comment"} <= set(env.filters)
    assert sorted(path.name for path in SCAFFOLD_TEMPLATES.glob("*.j2")) == [
        "github-workflow.yml.j2", "kernel.toml.j2", "notebook.py.j2", "predict.py.j2"]
