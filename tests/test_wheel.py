"""A normal ``pip install`` of the wheel works as well as the editable one.

The wheel is built from this checkout and installed into a fresh virtual environment that sees kkb's
dependencies (torch, pandas, ...) from the test environment's site-packages through a ``.pth`` line, but
not the checkout: the editable install's finder lives in a ``.pth`` file there, and ``.pth`` files are
read only in site directories, never in a folder that another ``.pth`` file adds. So every template,
guest script and runtime file must come from the installed wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.files import KERNELS, REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, **kw: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(kw)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with kkb installed from a freshly built wheel; returns its bin folder."""
    work = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(REPO)], work)
    assert built.returncode == 0, built.stderr
    wheel = next((work / "dist").glob("kkb-*.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "kkb-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = venv / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], work)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = _run([str(installed / "python"), "-c", "import builder, builder.notebook.render as r; print(builder.__file__); "
                  "print(r.TEMPLATES)"], tmp_path)
    package, templates = where.stdout.split()
    assert Path(package).is_relative_to(installed.parent) and Path(templates).is_relative_to(installed.parent), where.stdout
    assert (Path(templates) / "notebook" / "00_provenance.md.j2").is_file()
    assert (Path(templates) / "scaffold" / "kernel.toml.j2").is_file()  # kkb init's templates ship too


def test_the_wheel_ships_the_python_api_as_kkb_with_the_version_of_its_metadata(installed: Path, tmp_path: Path) -> None:
    done = _run([str(installed / "python"), "-c", "import kkb; print(kkb.__version__); kkb.dry_run; print(kkb.__file__)"],
                tmp_path)
    version, where = done.stdout.split()
    assert version == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"], done.stderr
    assert Path(where).is_relative_to(installed.parent) and (Path(where).parent / "py.typed").is_file()


def test_kkb_build_and_dry_run_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    kernel = KERNELS / "minimal"
    out = tmp_path / "build"
    built = _run([str(installed / "kkb"), "build", str(kernel), "--out", str(out)], tmp_path)
    assert built.returncode == 0, built.stderr
    assert (out / "code" / "kkb_runtime" / "__init__.py").is_file() and list((out / "kernel").glob("*.ipynb"))
    dry = _run([str(installed / "kkb"), "dry-run", str(kernel), "--out", str(out), "--scenario", "both"], tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.count("OK") >= 2


@pytest.mark.loopback
def test_kkb_demo_from_the_wheel_runs_the_shipped_example(installed: Path, tmp_path: Path) -> None:
    """No checkout, no kernels/reference: the demo runs the pandas-only example the wheel ships."""
    done = _run([str(installed / "kkb"), "demo"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "competition kkb-minimal" in done.stdout and "demo: public score 0." in done.stdout
