"""``kkb init --from``: a pulled kernel's files in every shape a hand edit leaves them, refused by file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import SpecError
from builder.project.init import init_from_folder
from builder.project.spec import load_spec
from tests.support.pulled import CELLS, pulled_kernel

PULL = "pull the kernel again: kaggle kernels pull OWNER/SLUG -p DIR -m"
LIST_HINT = f'write it as ["owner/slug", ...], or {PULL}'
SLUG_HINT = "pass --competition SLUG (the name in the competition's URL)"
META, NOTEBOOK = "kernel-metadata.json", "my-inference.ipynb"


def _edit(source: Path, name: str, content: str | bytes) -> None:
    path = source / name
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)


@pytest.mark.parametrize(
    ("file", "content", "message", "hint"),
    [
        pytest.param(META, "[1, 2]", "{file}: not a JSON object (it holds a list)", PULL, id="metadata-list"),
        pytest.param(META, b"\xff{}", "{file}: not UTF-8 text (byte 0xff at offset 0)", PULL, id="metadata-bytes"),
        pytest.param(META, {"competition_sources": 5}, "{file}: competition_sources must be a list of strings, not 5",
                     LIST_HINT, id="competitions-number"),
        pytest.param(META, {"dataset_sources": {"a": 1}}, '{file}: dataset_sources must be a list of strings, not {{"a": 1}}',
                     LIST_HINT, id="datasets-object"),
        pytest.param(META, {"model_sources": ["ok/x/pytorch/y/1", 7]},
                     '{file}: model_sources must be a list of strings, not ["ok/x/pytorch/y/1", 7]', LIST_HINT,
                     id="models-mixed"),
        pytest.param(META, {"competition_sources": ["../../escape-me"]},
                     "{file}: competition_sources: '../../escape-me' is not a competition slug (lowercase letters, "
                     "digits and '-')", SLUG_HINT, id="competition-path"),
        pytest.param(META, {"competition_sources": []},
                     "{file}: competition_sources is empty, and kkb builds code-competition kernels", SLUG_HINT,
                     id="no-competition"),
        pytest.param(META, {"title": "abc"}, "the kernel.toml made from {file}: kernel.title: String should have at least "
                     "5 characters", "use a title of 5 to 50 characters; Kaggle derives the kernel slug from it; kkb init "
                     "took the value from {file}", id="short-title"),
        pytest.param(NOTEBOOK, "[]", "{file}: not a notebook: a notebook is a JSON object with a list of cells, and it "
                     "holds a list", PULL, id="notebook-list"),
        pytest.param(NOTEBOOK, '{"cells": {}}', "{file}: not a notebook: a notebook is a JSON object with a list of "
                     "cells, and its cells are not a list", PULL, id="cells-object"),
        pytest.param(NOTEBOOK, '{"cells": ["x = 1"]}', "{file}: cells[0] is not a cell (a JSON object)", PULL,
                     id="cell-string"),
        pytest.param(NOTEBOOK, '{"cells": [{"cell_type": "code", "source": 3}]}',
                     "{file}: cells[0].source is neither text nor a list of lines", PULL, id="source-number"),
        pytest.param(NOTEBOOK, b"\x89PNG", "{file}: not UTF-8 text (byte 0x89 at offset 0)", PULL, id="notebook-bytes"),
        pytest.param(NOTEBOOK, "{not json", "{file}: not a valid notebook: Expecting property name enclosed in double "
                     "quotes: line 1 column 2 (char 1)", PULL, id="notebook-not-json"),
    ],
)
def test_malformed_pulled_files_are_refused_by_name(tmp_path: Path, file: str, content: str | bytes | dict[str, object],
                                                    message: str, hint: str) -> None:
    source = pulled_kernel(tmp_path / "pulled", CELLS, **(content if isinstance(content, dict) else {}))
    if not isinstance(content, dict):
        _edit(source, file, content)
    with pytest.raises(SpecError) as caught:
        init_from_folder(tmp_path / "new", source)
    path = source / file
    assert (caught.value.message, caught.value.hint) == (message.format(file=path), hint.format(file=path))
    assert not (tmp_path / "new").exists()  # nothing written


def test_a_competition_flag_that_is_no_slug_is_refused_before_reading(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        init_from_folder(tmp_path / "new", tmp_path / "nowhere", competition="/abs/slug")
    assert caught.value.message == "'/abs/slug' is not a competition slug (lowercase letters, digits and '-')"


def test_a_string_source_is_one_source_said_so(tmp_path: Path) -> None:
    source = pulled_kernel(tmp_path / "pulled", competition_sources="kkb-minimal", dataset_sources="someone/timm-pkg")
    result = init_from_folder(tmp_path / "new", source)
    spec = load_spec(tmp_path / "new")
    assert (spec.competition.slug, [item.ref for item in spec.inputs]) == ("kkb-minimal", ["someone/timm-pkg"])
    assert result.notes[:2] == ("kernel-metadata.json: competition_sources is a string, not a list: read as one source "
                                "'kkb-minimal'",
                                "kernel-metadata.json: dataset_sources is a string, not a list: read as one source "
                                "'someone/timm-pkg'")


def test_repeated_slugs_get_names_and_folders_of_their_own(tmp_path: Path) -> None:
    source = pulled_kernel(tmp_path / "pulled", dataset_sources=["alice/timm-pkg", "bob/timm-pkg", "bob/timm-pkg"])
    result = init_from_folder(tmp_path / "new", source)
    spec = load_spec(tmp_path / "new")
    assert [(item.ref, item.input_name, item.path) for item in spec.inputs] == [
        ("alice/timm-pkg", "timm-pkg", "inputs/timm-pkg"), ("bob/timm-pkg", "bob-timm-pkg", "inputs/bob-timm-pkg")]
    assert "dataset_sources: 'bob/timm-pkg' is listed twice (attached once)" in result.unmapped


def test_someone_elses_weights_dataset_stays_an_input(tmp_path: Path) -> None:
    source = pulled_kernel(tmp_path / "pulled", dataset_sources=["alice/my-inference-weights"])
    init_from_folder(tmp_path / "new", source)
    spec = load_spec(tmp_path / "new")
    assert (spec.weights.dataset, [item.ref for item in spec.inputs]) == (None, ["alice/my-inference-weights"])


def test_a_script_kernel_keeps_its_lines(tmp_path: Path) -> None:
    source = pulled_kernel(tmp_path / "pulled", code_file="run.py", kernel_type="script")
    (source / "run.py").write_text("print('hi')\n")
    init_from_folder(tmp_path / "new", source)
    assert "print('hi')" in (tmp_path / "new" / "notebook.py").read_text()
    assert load_spec(tmp_path / "new").kernel.type == "script"
