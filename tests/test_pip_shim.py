"""pip inside the sandbox as on Kaggle's image: what the image has is a no-op offline; a download is blocked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.run.guest.pip_shim import split_install
from builder.run.isolation import probe
from builder.run.sandbox import SandboxSpec, blocked_network, prepare_sandbox

pytestmark = pytest.mark.usefixtures("hermetic_pip")
IMAGE = {"scikit-learn": "1.6.1", "pandas": "2.3.3", "torch": "2.10.0"}


@pytest.mark.parametrize(("args", "expected"), [
    pytest.param(["install", "scikit-learn"], (["install"], [("scikit-learn", "1.6.1")], 0), id="image-has-it"),
    pytest.param(["install", "-q", "Scikit_Learn>=1.5", "pandas==2.3.3"],
                 (["install", "-q"], [("Scikit_Learn>=1.5", "1.6.1"), ("pandas==2.3.3", "2.3.3")], 0), id="specifiers"),
    pytest.param(["install", "pandas<2", "kkb-nowhere"], (["install", "pandas<2", "kkb-nowhere"], [], 2), id="not-satisfied"),
    pytest.param(["install", "--find-links", "/kaggle/input/w", "--no-index", "timm", "torch"],
                 (["install", "--find-links", "/kaggle/input/w", "--no-index", "timm"], [("torch", "2.10.0")], 1),
                 id="option-values-are-no-requirements"),
    pytest.param(["install", "-U", "pandas"], None, id="upgrade-passes-through"),
    pytest.param(["install", "-r", "requirements.txt"], None, id="requirements-file-passes-through"),
    pytest.param(["list"], None, id="not-an-install"),
])
def test_a_plain_install_drops_what_the_image_satisfies(args: list[str], expected: object) -> None:
    assert split_install(args, IMAGE) == expected


def _sandbox(tmp_path: Path, isolation: str):  # type: ignore[no-untyped-def]
    if isolation != "python" and probe(isolation) is not None:  # type: ignore[arg-type]
        pytest.skip(f"{isolation} isolation is not available here: {probe(isolation)}")  # type: ignore[arg-type]
    return prepare_sandbox(SandboxSpec(mounts=(), rerun=True, isolation=isolation), tmp_path / "root")  # type: ignore[arg-type]


@pytest.mark.parametrize("isolation", ["namespace", "python"])
def test_pip_install_of_an_image_package_succeeds_offline(tmp_path: Path, isolation: str) -> None:
    box = _sandbox(tmp_path, isolation)
    out = subprocess.run([*box.launcher(), "/bin/sh", "-c", "pip install scikit-learn && pip3 install 'pandas>=2'"],
                         env=box.env, cwd=box.working_dir, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Requirement already satisfied: scikit-learn (Kaggle's image has 1.6.1; kkb's sandbox pip)" in out.stdout
    assert "Requirement already satisfied: pandas>=2 (Kaggle's image has 2.3.3; kkb's sandbox pip)" in out.stdout
    assert blocked_network(box.root) == []


def test_a_download_is_blocked_and_named(tmp_path: Path) -> None:
    box = _sandbox(tmp_path, "namespace")
    out = subprocess.run([*box.launcher(), "/bin/sh", "-c", "pip install --retries 0 --timeout 2 kkb-nowhere-package"],
                         env=box.env, cwd=box.working_dir, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert any("pypi.org" in attempt for attempt in blocked_network(box.root)), (blocked_network(box.root), out.stderr)
