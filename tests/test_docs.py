"""The docs cannot drift from kkb: every ``toml`` block's keys are spec keys, every ``kkb …`` line's options exist.

The docs site (``docs/``, ``mkdocs.yml``) and the README are checked together. A ``toml`` block may be a fragment
(one table, optional lines commented out as the scaffold writes them); each of its keys must be a key of the
table it sits in, as the generated reference (``builder.project.spec_reference``) lists them, and a ``[[models]]``
key must be one the card's ``kind`` takes. A command line (in a shell block, or an inline ``kkb …`` span) must
name a real command, and each of its options must be one that command takes.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from builder.cli import app
from builder.project.spec_reference import SpecKey, keys_by_table, render_reference
from tests.support.files import REPO
from tests.test_scaffold import uncommented

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
_TOML = re.compile(r"```toml\n(.*?)```", re.DOTALL)
_SHELL = re.compile(r"```(?:sh|bash|console|shell)\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`(kkb [^`]+)`")
_OPTION = re.compile(r"(?<![\w/.=-])(--?[A-Za-z][\w-]*)")


def _blocks(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return [(path.relative_to(REPO).as_posix(), block) for path in PAGES for block in pattern.findall(path.read_text())]


def _unknown_keys(tables: dict[str, dict[str, SpecKey]], data: dict[str, object], table: str = "") -> list[str]:
    unknown = []
    keys = tables.get(table, {})
    kind = data.get("kind")
    for key, value in data.items():
        path = f"{table}.{key}" if table else key
        if path in tables:  # a table or an array of tables
            for item in value if isinstance(value, list) else [value]:
                unknown += _unknown_keys(tables, item, path) if isinstance(item, dict) else []
        elif table == "" and key == "model_defaults" and isinstance(value, dict):  # [model_defaults]: card keys
            unknown += _unknown_keys(tables, value, "models")
        elif key not in keys and not (table == "models" and key == "base"):
            unknown.append(path)
        elif table == "models" and isinstance(kind, str) and keys[key].kinds and kind not in keys[key].kinds:
            unknown.append(f"{path} (kind = {kind!r} does not take it)")
    return unknown


TOML_BLOCKS = _blocks(_TOML)


def test_the_docs_have_toml_blocks_and_command_lines() -> None:
    assert len(TOML_BLOCKS) >= 8
    assert len(_command_lines()) >= 30


@pytest.mark.parametrize(("page", "block"), TOML_BLOCKS, ids=[f"{page}:{i}" for i, (page, _) in enumerate(TOML_BLOCKS)])
def test_every_toml_block_parses_and_its_keys_are_spec_keys(page: str, block: str) -> None:
    data = tomllib.loads(uncommented(block))
    assert _unknown_keys(keys_by_table(), data) == [], page


def test_the_key_check_finds_a_misspelt_key_and_a_key_of_another_kind() -> None:
    data = tomllib.loads('[push]\ndataset_timeout = 3\n[[models]]\nname = "m"\nkind = "text"\nlibrary = "lightgbm"\n')
    assert _unknown_keys(keys_by_table(), data) == ["push.dataset_timeout",
                                                    "models.library (kind = 'text' does not take it)"]


def _command_lines() -> list[tuple[str, str]]:
    lines = []
    for page, block in _blocks(_SHELL):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #")[0].strip().removeprefix("$ ")
            command = re.sub(r"^(\w+=\S+\s+)+", "", command)  # KKB_KAGGLE_API=… kkb submit …
            if command.startswith("kkb "):
                lines.append((page, command))
    lines += [(path.relative_to(REPO).as_posix(), span) for path in PAGES for span in _INLINE.findall(path.read_text())]
    return lines


# typer's command objects (click's, or typer's own copy of click's: duck-typed)
def _command(words: list[str]) -> Any:
    command = typer.main.get_command(app)
    for word in words:
        commands = getattr(command, "commands", {})  # a group's; a command has none
        if word not in commands:
            break
        command = commands[word]
    return command


def _options(command: Any) -> set[str]:
    return {"--help"} | {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


@pytest.mark.parametrize(("page", "line"), _command_lines(), ids=lambda value: value[:60])
def test_every_kkb_command_line_names_a_command_and_its_options(page: str, line: str) -> None:
    words = [word for word in shlex.split(line.replace("|", " ").replace("[", " ").replace("]", " "), comments=True)
             if word not in ("…", "...")]
    group = _command([])
    if len(words) > 1 and not words[1].startswith("-"):
        assert words[1] in group.commands, f"{page}: `{line}`: no command {words[1]!r}"
    command = _command(words[1:])
    unknown = [option for word in words[1:] for option in _OPTION.findall(word)[:1]
               if option.split("=")[0] not in _options(command) | _options(group)]
    assert unknown == [], f"{page}: `{line}`: {command.name} takes no {', '.join(unknown)}"


def test_the_reference_lists_every_table_and_marks_the_card_kinds() -> None:
    text = render_reference()
    for header in ("## `[kernel]`", "## `[[models]]`", "## `[[install.source_packages]]`", "## `[push]`"):
        assert header in text
    assert "card kinds" in text and "`text`" in text


def test_the_site_is_configured_for_every_page() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(path.relative_to(REPO / "docs").as_posix() for path in (REPO / "docs").rglob("*.md"))
    assert [page for page in pages if page not in nav] == []
    assert Path(REPO / "docs" / "hooks.py").is_file()


def test_the_readme_fits_on_a_screen_or_two_and_opens_with_the_two_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first_block = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert first_block is not None and text.index("```sh") < text.index("\n## ")
    assert [line.split("#")[0].strip() for line in first_block.group(1).splitlines()] == ["make demo", "make test"]


def test_nothing_points_at_an_issue_number_a_user_cannot_open() -> None:
    pattern = re.compile(r"issue [0-9]+")
    found = [f"{path.relative_to(REPO)}:{number}" for folder in ("builder", "templates", "kernels", "docs")
             for path in sorted((REPO / folder).rglob("*")) if path.is_file() and path.suffix in {".py", ".md", ".toml", ".j2"}
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    found += [f"README.md:{number}" for number, line in enumerate((REPO / "README.md").read_text().splitlines(), 1)
              if pattern.search(line)]
    assert found == []


def _table_order(text: str) -> list[str]:
    headers = [re.sub(r"\s*#.*", "", line).strip("[] ") for line in text.splitlines() if line.startswith("[")]
    return [header for header in headers if "." not in header or header.startswith("model_defaults")]


@pytest.mark.parametrize("kernel", sorted(path.parent.name for path in (REPO / "kernels").glob("*/kernel.toml")))
def test_the_example_kernels_are_written_in_table_style_in_the_reference_s_order(kernel: str) -> None:
    text = (REPO / "kernels" / kernel / "kernel.toml").read_text()
    inline = [line for line in text.splitlines() if re.search(r"=\s*\{[^}]*,", line.split("#")[0])]
    assert inline == []  # a table of several keys is a [table], not an inline table
    order = [table for table in keys_by_table() if "." not in table] + ["postprocess"]
    order.insert(order.index("models"), "model_defaults")
    tables = [table.split(".")[0] for table in _table_order(text)]
    ranks = [order.index(table) for table in tables]
    assert ranks == sorted(ranks), tables
