"""The CLI as a thin mapping onto the library, and its one error boundary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder import __version__, cli
from builder.errors import EXIT_AUTH, EXIT_INTERRUPTED, EXIT_KERNEL, EXIT_OK, EXIT_REMOTE, EXIT_USAGE, EXIT_USER
from tests.support.files import KERNELS, REPO


def test_build_command_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["build", str(KERNELS / "minimal"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    assert "built kkb-demo/kkb-minimal-inference" in out and "kkb-minimal-inference.ipynb" in out


def test_errors_become_one_message_hint_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "k"))
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace("[kernel]", "[kernel]\nenable_gpu = true"))
    code = cli.main(["build", str(kernel), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == EXIT_USER
    assert "error: " in err and "kernel.enable_gpu: unknown key" in err
    assert "hint:" in err and "Traceback" not in err


def test_usage_error_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    # click says 2, which is kkb's "the kernel failed": a usage error has its own code.
    assert cli.main(["build"]) == EXIT_USAGE != EXIT_KERNEL
    assert "Missing argument" in capsys.readouterr().err


def test_version_option_and_literal_brackets_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == __version__
    assert cli.main(["wheels", "--help"]) == EXIT_OK
    assert "wheelhouse of [install] requirements" in " ".join(capsys.readouterr().out.split())


def test_exit_codes_do_not_overlap() -> None:
    codes = [EXIT_OK, EXIT_USER, EXIT_KERNEL, EXIT_REMOTE, EXIT_AUTH, EXIT_USAGE, EXIT_INTERRUPTED]
    assert len(set(codes)) == len(codes)


def test_installed_command_smoke(tmp_path: Path) -> None:
    """One real subprocess of the installed `kkb` script, as a user runs it."""
    kkb = Path(sys.executable).with_name("kkb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE_")}
    done = subprocess.run([str(kkb), "build", str(KERNELS / "minimal"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "kernel" / "kkb-minimal-inference.ipynb").is_file()
    bad = subprocess.run([str(kkb), "build", str(tmp_path / "missing")], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == EXIT_USER and "no such kernel folder" in bad.stderr
