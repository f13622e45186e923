"""``import kkb``: the Python API — typed functions with their settings and results; the CLI a thin layer over them."""

from __future__ import annotations

import inspect
import shutil
import typing
from importlib import metadata
from pathlib import Path

import pytest

import kkb
from builder import api
from builder.cli import main
from tests.support.files import KERNELS

FUNCTIONS = ("build", "dry_run", "push", "submit", "init")


def test_kkb_exports_the_api_and_the_version_of_its_metadata() -> None:
    assert kkb.__version__ == metadata.version("kkb")
    assert set(FUNCTIONS) <= set(kkb.__all__) and {"__version__", "KkbError", "DryRunSettings", "SubmitResult"} <= set(kkb.__all__)
    assert len(kkb.__all__) == len(set(kkb.__all__))
    assert all(hasattr(kkb, name) for name in kkb.__all__)
    assert sorted(name for name in kkb.__all__ if name != "__version__") == sorted(api.__all__)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_is_typed_and_documented(name: str) -> None:
    function = getattr(kkb, name)
    hints = typing.get_type_hints(function)
    assert "return" in hints and "settings" in hints and inspect.getdoc(function)
    assert hints["settings"].__name__.endswith("Settings")


def test_build_through_the_api_is_the_command_s_build(tmp_path: Path) -> None:
    result = kkb.build(kkb.BuildSettings(kernel_dir=KERNELS / "minimal", out_dir=tmp_path / "out", owner="me"))
    assert result.kernel_id == "me/" + kkb.load_spec(KERNELS / "minimal").kernel.kernel_slug
    assert result.notebook_path.is_file()


def test_the_command_calls_the_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[kkb.BuildSettings] = []

    def fake(settings: kkb.BuildSettings) -> kkb.BuildResult:
        seen.append(settings)
        raise kkb.KkbError("stop here")

    monkeypatch.setattr(api, "build_kernel", fake)
    assert main(["build", str(KERNELS / "minimal"), "--owner", "me"]) != 0
    assert seen == [kkb.BuildSettings(kernel_dir=KERNELS / "minimal", out_dir=None, owner="me")]


def test_the_docs_list_every_name_of_the_api() -> None:
    page = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    assert [name for name in kkb.__all__ if f"`{name}`" not in page] == []


def test_relative_paths_are_taken_against_the_folder_the_call_starts_in(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths are resolved at the door: relative ones (a ``str`` too) against the current folder, once; the result's
    are absolute, and the default build folder is build/NAME there."""
    shutil.copytree(KERNELS / "minimal", tmp_path / "my kernels" / "minimal", ignore=shutil.ignore_patterns(".kkb"))
    monkeypatch.chdir(tmp_path / "my kernels")
    result = kkb.build(kkb.BuildSettings(kernel_dir="minimal", owner="me"))  # type: ignore[arg-type]
    assert result.out_dir == tmp_path / "my kernels" / "build" / "minimal" and result.notebook_path.is_file()
    again = kkb.build(kkb.BuildSettings(kernel_dir=Path("minimal"), out_dir=Path("../out"), owner="me"))
    assert again.out_dir == tmp_path / "out" and again.code_hash == result.code_hash
