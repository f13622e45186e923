"""Real ``/kaggle`` paths: every isolation this machine allows, started without a notebook (cheap).

Each available mode (bubblewrap, kkb's namespace launcher) is tested; a mode this machine lacks is
skipped with the probe's reason, and ``auto`` falls back to the next and says why.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Isolation
from builder.run import host_view, isolation
from builder.run.isolation import choose_isolation, probe
from builder.run.sandbox import Mount, SandboxSpec, prepare_sandbox
from tests.support.files import build_file_tree

NAMESPACE_MODES = ["bwrap", "namespace"]


def _mode(mode: str) -> str:
    problem = probe(mode)  # type: ignore[arg-type]
    if problem is not None:
        pytest.skip(f"{mode} isolation is not available here: {problem}")
    return mode


@pytest.fixture()
def sources(tmp_path: Path) -> dict[str, Path]:
    code = build_file_tree(tmp_path / "code", {"kkb_kernel.json": "{}"})
    data = build_file_tree(tmp_path / "data", {"sample_submission.csv": "id,target\na,0\n", "test.csv": "id,x\na,1\n"})
    return {"code": code, "data": data}


def _box(tmp_path: Path, sources: dict[str, Path], mode: str, **kwargs: object):  # type: ignore[no-untyped-def]
    mounts = (Mount(sources["code"], "datasets/me/thing-code"), Mount(sources["data"], "competitions/comp"))
    return prepare_sandbox(SandboxSpec(mounts=mounts, rerun=False, isolation=mode, **kwargs), tmp_path / "root")  # type: ignore[arg-type]


def _run(box, code: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {**box.env, "PYTHONPATH": ""}  # the namespaces alone, without the Python network guard
    return subprocess.run([*box.launcher(), sys.executable, "-c", code], env=env, cwd=box.working_dir,
                          capture_output=True, text=True, timeout=60)


WRITES = """
import os
print(os.getcwd())
print(open('/kaggle/input/competitions/comp/test.csv').read().splitlines()[1])
print(sorted(os.listdir('/kaggle/input/datasets/me')))
for path in ('/kaggle/working/cache/preds.csv', '/kaggle/temp/t.bin', '/tmp/scratch.txt'):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, 'w').write('x')
    print('wrote', path)
root = os.environ['KKB_KAGGLE_ROOT']  # kkb's runtime and the local Kaggle still reach the sandbox through it
print(open(root + '/input/competitions/comp/test.csv').read().splitlines()[1], os.path.exists(root + '/working/cache/preds.csv'))
for path in ('/kaggle/input/competitions/comp/test.csv', '/kaggle/input/new.txt', '/usr/kkb-escape', '/kaggle-escape',
             root + '/input/competitions/comp/new.txt'):
    try:
        open(path, 'a').write('x')
        print('WROTE', path)
    except OSError as exc:
        print(exc.errno, path)
"""


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_kaggle_paths_are_real_and_nothing_lands_on_the_host(tmp_path: Path, sources: dict[str, Path], mode: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-only root (the fallback; the writable overlay is tests/test_overlay.py)."""
    monkeypatch.setenv("KKB_SANDBOX_ROOT_FS", "read-only")
    box = _box(tmp_path, sources, _mode(mode))
    host_kaggle = Path("/kaggle").exists()

    out = _run(box, WRITES)

    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "/kaggle/working", "a,1", "['thing-code']",
        "wrote /kaggle/working/cache/preds.csv", "wrote /kaggle/temp/t.bin", "wrote /tmp/scratch.txt", "a,1 True",
        "30 /kaggle/input/competitions/comp/test.csv", "30 /kaggle/input/new.txt", "30 /usr/kkb-escape", "30 /kaggle-escape",
        f"30 {box.root}/input/competitions/comp/new.txt",
    ]  # 30: EROFS, for root too
    assert (box.working_dir / "cache" / "preds.csv").read_text() == "x"  # the sandbox's working dir is /kaggle/working
    assert (box.temp_dir / "t.bin").is_file()
    assert (box.private_dir / "tmp" / "scratch.txt").is_file() and not Path("/tmp/scratch.txt").exists()
    assert Path("/kaggle").exists() == host_kaggle and not Path("/usr/kkb-escape").exists()
    assert (sources["data"] / "test.csv").read_text() == "id,x\na,1\n"


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_the_legacy_layout_mounts_at_the_old_kaggle_paths(tmp_path: Path, sources: dict[str, Path], mode: str) -> None:
    box = _box(tmp_path, sources, _mode(mode), layout="legacy")

    out = _run(box, "import os; print(sorted(os.listdir('/kaggle/input')))")

    assert out.stdout.strip() == "['comp', 'thing-code']", out.stderr


def test_auto_falls_back_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builder.run.isolation.probe", lambda mode: f"{mode} is broken here")

    choice = choose_isolation("auto")

    assert choice.mode == "python"
    assert choice.skipped == ("bwrap: bwrap is broken here", "namespace: namespace is broken here")
    assert "not used: bwrap: bwrap is broken here; namespace: namespace is broken here" in choice.describe()
    with pytest.raises(DryRunError, match="the namespace sandbox cannot start here: namespace is broken here"):
        choose_isolation(Isolation.NAMESPACE)


def test_kkb_under_tmp_stays_visible_inside_the_namespaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout, a CI clone or a venv under /tmp: inside the namespaces /tmp is private, so the import path there is
    shown at its own path (the folder kkb was started from, and $PYTHONPATH's entries, are not)."""
    site = build_file_tree(Path("/tmp") / tmp_path.name / "venv" / "site-packages", {"x.pth": ""})
    started = build_file_tree(Path("/tmp") / tmp_path.name / "started-here", {"x.py": ""})
    monkeypatch.setattr(sys, "path", [str(started), *sys.path[1:], str(site)])
    host_view.interpreter_folders.cache_clear()
    try:
        found = host_view.interpreter_folders()
        assert site.resolve() in found and started.resolve() not in found
        argv = isolation.launcher_argv(Isolation.NAMESPACE, tmp_path / "sandbox-root", (), [], None)
        assert argv[argv.index(str(site.resolve())) - 1] == "--host"
        bwrap = isolation.bwrap_argv(tmp_path / "sandbox-root", (), [], None)
        assert argv.count(str(site.resolve())) == 1 and str(site.resolve()) in bwrap
    finally:
        host_view.interpreter_folders.cache_clear()
        shutil.rmtree(Path("/tmp") / tmp_path.name, ignore_errors=True)
