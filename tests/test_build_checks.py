"""Build-time checks of the audit's mistakes: [[postprocess]] references and columns, column_types against the
sample, a BOM in kernel.toml, a symlink loop matched by a glob, a full disk: each a clear message, exit 1."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pandas as pd
import pytest

from builder import build as build_module
from builder import cli
from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError
from builder.kkb_runtime import postprocess
from tests.support.cards import kernel_stages
from tests.support.files import KERNELS


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _append(kernel: Path, text: str) -> None:
    spec = kernel / "kernel.toml"
    spec.write_text(spec.read_text(encoding="utf-8") + "\n" + text, encoding="utf-8")


def _submission(kernel: Path, line: str) -> None:
    spec = kernel / "kernel.toml"
    spec.write_text(spec.read_text().replace('id_column = "id"\n', f'id_column = "id"\n{line}\n'))


def _build(kernel: Path) -> None:
    build_kernel(BuildSettings(kernel_dir=kernel, out_dir=kernel.parent / "build"))


CASES = [
    pytest.param(lambda k: _append(k, '[[postprocess]]\nkind = "function"\nfunction = "tools.post:fix"\n'),
                 "postprocess[0]: function = 'tools.post:fix': the code dataset has no module 'tools.post' "
                 "(no tools/post.py under [code] include)",
                 "add the module's file to [code] include, or fix the reference ('package.module:function')",
                 id="function-module-missing"),
    pytest.param(lambda k: _append(k, '[[postprocess]]\nkind = "function"\nfunction = "minimal.modle:fix"\n'),
                 "postprocess[0]: function = 'minimal.modle:fix': the code dataset has no module 'minimal.modle' "
                 "(no minimal/modle.py under [code] include)",
                 "did you mean 'minimal.model:fix'? add the module's file to [code] include, or fix the reference "
                 "('package.module:function')", id="function-module-typo"),
    pytest.param(lambda k: _append(k, '[[postprocess]]\nkind = "function"\nfunction = "minimal.model:LinearModle"\n'),
                 "postprocess[0]: function = 'minimal.model:LinearModle': minimal/model.py defines no 'LinearModle'",
                 "did you mean 'minimal.model:LinearModel'? name a function of the module: DataFrame in, DataFrame out",
                 id="function-name-typo"),
    pytest.param(lambda k: _append(k, '[[postprocess]]\nkind = "threshold"\ncolumns = ["id", "target"]\n'),
                 "postprocess[0] (threshold): columns names the id column 'id'",
                 "list only prediction columns in columns (the id column stays as it is), or leave columns out: "
                 "threshold then takes every column but 'id'", id="threshold-on-id"),
    pytest.param(lambda k: _submission(k, 'column_types = { targt = "float" }'),
                 "submission.column_types.targt: sample_submission.csv has no column 'targt' (it has: id, target)",
                 "did you mean 'target'? column_types names columns of the sample submission, or \"*\" for every "
                 "target column", id="column-types-typo"),
    pytest.param(lambda k: _submission(k, 'column_types = { id = "int" }'),
                 "submission.column_types.id = \"int\": sample_submission.csv holds text in 'id' (e.g. 'p0000'), "
                 "which \"int\" would turn into numbers",
                 "remove the key (or say \"str\"): column_types is for columns whose sample values mislead, and text "
                 "ids must stay text", id="column-types-int-on-text-ids"),
]


@pytest.mark.parametrize(("change", "message", "hint"), CASES)
def test_the_build_refuses_naming_the_key(minimal: Path, change, message: str, hint: str) -> None:  # type: ignore[no-untyped-def]
    change(minimal)
    with pytest.raises(BundleError) as caught:
        _build(minimal)
    assert (caught.value.message, caught.value.hint) == (f"{minimal / 'kernel.toml'}: {message}", hint)
    assert not (minimal.parent / "build").exists()


def test_a_postprocess_function_that_exists_builds(minimal: Path) -> None:
    _append(minimal, '[[postprocess]]\nkind = "function"\nfunction = "minimal.model:LinearModel"\n')
    _submission(minimal, 'column_types = { target = "float", "*" = "float" }')
    _build(minimal)


def test_the_runtime_names_the_id_column_too() -> None:
    frame = pd.DataFrame({"id": ["a", "b"], "p": [0.2, 0.9]})
    with pytest.raises(postprocess.PostprocessError, match=r"^postprocess\[0\] \(threshold\): columns names the id "
                                                           r"column 'id': its values are ids"):
        postprocess.apply(frame, kernel_stages({"kind": "threshold", "columns": ["id"]}), "id", ["p"])


def test_a_bom_in_kernel_toml_is_read(minimal: Path) -> None:
    spec = minimal / "kernel.toml"
    spec.write_bytes(b"\xef\xbb\xbf" + spec.read_bytes())
    _build(minimal)


def test_a_symlink_loop_matched_by_a_weights_glob_is_named(minimal: Path) -> None:
    (minimal / "weights" / "loop.json").symlink_to("loop.json")
    with pytest.raises(BundleError) as caught:
        _build(minimal)
    assert caught.value.message == ("weights/loop.json: is a symlink loop (it points to loop.json); a glob of "
                                    "kernel.toml matched it")


def test_a_full_disk_during_the_build_is_named_and_leaves_nothing(minimal: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(minimal.parent / "build" / "weights.bin"))

    monkeypatch.setattr(build_module, "keep_wheel_folders", full)
    out = minimal.parent / "build"
    assert cli.main(["build", str(minimal), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"build folder {out}: the disk is full (No space left on device: {out / 'weights.bin'}); nothing was " \
           "changed" in err
    assert "Traceback" not in err and not [p for p in out.parent.iterdir() if p.name.startswith(".build-staging-")]
