"""The one strict Jinja environment for everything kkb writes: notebooks, ``kkb init``'s scaffold, CI workflows.

It lives here, in the lowest stage that writes files (``builder.project``), so that both ``kkb init``
(this package) and the notebook renderer (``builder.notebook.render``, a higher layer) take it from one
place: undefined variables are errors, nothing is autoescaped (the output is code, TOML and YAML, not
HTML), and every value goes through a filter that writes it in the target language.

Templates ship in the repository's ``templates/`` folder, installed as the package ``builder.templates``
(the wheel ships it too): ``templates/notebook/`` holds the cells, ``templates/scaffold/`` what
``kkb init`` writes.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import jinja2

from builder.errors import TemplateError

TEMPLATES = Path(str(importlib.resources.files("builder.templates")))
SCAFFOLD_TEMPLATES = TEMPLATES / "scaffold"


def _py(value: object) -> str:
    """A Python literal for the value (the output is code, not HTML or JSON)."""
    return repr(value)


def _toml(value: object) -> str:
    """A TOML value: strings as basic strings (JSON's escapes are TOML's), lists and booleans alike."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value))


def _yaml(value: object) -> str:
    """A YAML scalar that is always a string: JSON's double-quoted form is valid YAML."""
    return json.dumps(str(value))


def _comment(value: object) -> str:
    """Text for a one-line comment (TOML, YAML, Python): control characters, newlines among them, become spaces."""
    return re.sub(r"[\x00-\x1f\x7f]+", " ", str(value))


def strict_environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """The environment every kkb template renders in: strict, no autoescape, blocks as written."""
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
        trim_blocks=False,
        lstrip_blocks=False,
    )
    env.filters["py"] = _py
    env.filters["toml"] = _toml
    env.filters["yaml"] = _yaml
    env.filters["comment"] = _comment
    return env


@lru_cache(maxsize=1)
def scaffold_environment() -> jinja2.Environment:
    return strict_environment(jinja2.FileSystemLoader(str(SCAFFOLD_TEMPLATES)))


def render_scaffold(template: str, context: Mapping[str, object]) -> str:
    """One file ``kkb init`` writes, rendered from ``templates/scaffold/<template>``; ends with one newline."""
    try:
        return scaffold_environment().get_template(template).render(**context).rstrip("\n") + "\n"
    except jinja2.UndefinedError as exc:  # a kkb bug: the scaffold's context lacks a variable its template uses
        raise TemplateError(f"template scaffold/{template}: {exc.message}",
                            hint="report this: kkb init passed its template too few variables") from None
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template scaffold/{exc.name} not found",
                            hint="reinstall kkb: its templates/scaffold folder is incomplete") from None
