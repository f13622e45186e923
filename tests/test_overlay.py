"""A writable root, never the host's: each root file system this machine allows, without a notebook.

A mode this machine lacks (bubblewrap, fuse-overlayfs, overlayfs in a user namespace) is skipped with the
probe's reason; the read-only fallback is tests/test_isolation.py.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import RootFilesystem
from builder.run import overlay
from builder.run.isolation import probe
from builder.run.overlay import AVAILABLE, DESCRIPTIONS, choose_root_filesystem
from builder.run.sandbox import Mount, SandboxSpec, prepare_sandbox
from tests.support.files import build_file_tree
from tests.support.wheels import write_pure_wheel

# root file system -> the isolation that provides it
MODES = {RootFilesystem.OVERLAY: "namespace", RootFilesystem.FUSE_OVERLAY: "namespace",
         RootFilesystem.BWRAP_OVERLAY: "bwrap"}


def _available(kind: RootFilesystem) -> str:
    isolation = MODES[kind]
    problem = probe(isolation) or AVAILABLE[kind](isolation)  # type: ignore[arg-type]
    if problem is not None:
        pytest.skip(f"{kind} is not available here: {problem}")
    return isolation



WRITES = """
import os, subprocess, sys
os.mkdir('/kaggle/tmp')
open('/kaggle/tmp/scratch.bin', 'w').write('x')
open('/kaggle/notes.txt', 'w').write('x')
open('/usr/kkb-escape', 'w').write('x')
os.makedirs('/opt/kkb-escape/deep', exist_ok=True)
out = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-index', '--disable-pip-version-check',
                      '--find-links', '/kaggle/input/datasets/me/wheels', 'kkbprobe'], capture_output=True, text=True)
print('pip', out.returncode, out.stderr[-300:])
print(subprocess.run([sys.executable, '-c', 'import kkbprobe; print(kkbprobe.VERSION)'], capture_output=True,
                     text=True).stdout.strip())
for path in ('/kaggle/input/datasets/me/wheels/new.txt', '/kaggle/input/competitions/comp/test.csv'):
    try:
        open(path, 'a').write('x')
        print('WROTE', path)
    except OSError as exc:
        print(exc.errno, path)
"""


@pytest.mark.parametrize("kind", list(MODES))
def test_the_whole_file_system_is_writable_and_nothing_lands_on_the_host(tmp_path: Path, kind: RootFilesystem,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    isolation = _available(kind)
    monkeypatch.setenv("KKB_SANDBOX_ROOT_FS", str(kind))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    wheels = tmp_path / "wheels"
    write_pure_wheel(wheels, "kkbprobe", "1.0")
    data = build_file_tree(tmp_path / "data", {"test.csv": "id,x\na,1\n"})
    box = prepare_sandbox(SandboxSpec(mounts=(Mount(wheels, "datasets/me/wheels"), Mount(data, "competitions/comp")),
                                      rerun=False, isolation=isolation), tmp_path / "root")  # type: ignore[arg-type]
    host_kaggle, site = Path("/kaggle").exists(), Path(sysconfig.get_paths()["purelib"])

    out = subprocess.run([*box.launcher(), sys.executable, "-c", WRITES], env={**box.env, "PYTHONPATH": ""},
                         cwd=box.working_dir, capture_output=True, text=True, timeout=180)

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("pip 0") and lines[1:] == [
        "1.0", "30 /kaggle/input/datasets/me/wheels/new.txt", "30 /kaggle/input/competitions/comp/test.csv"], out.stdout
    # the host is as it was: no /kaggle, nothing in /usr or /opt, no package in the interpreter, the inputs unchanged
    assert Path("/kaggle").exists() == host_kaggle
    assert not Path("/usr/kkb-escape").exists() and not Path("/opt/kkb-escape").exists()
    assert not list(site.glob("kkbprobe*")) and sorted(p.name for p in wheels.iterdir()) == ["kkbprobe-1.0-py3-none-any.whl"]
    assert (data / "test.csv").read_text() == "id,x\na,1\n"
    assert kind in box.root_filesystem and "writable" in box.root_filesystem


def test_every_root_filesystem_has_one_entry_in_each_registry() -> None:
    assert set(AVAILABLE) == set(DESCRIPTIONS) == set(RootFilesystem)


def test_the_choice_falls_back_to_read_only_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overlay, "launcher_probe", lambda kind: f"{kind} is broken here")
    monkeypatch.setattr("builder.run.overlay.shutil.which", lambda name: None)
    monkeypatch.setattr(overlay, "bwrap_overlay_problem", lambda: "bwrap is not installed")
    choice = choose_root_filesystem("namespace")
    assert choice.kind == RootFilesystem.READ_ONLY
    assert choice.skipped == ("overlay: overlay is broken here", "fuse-overlayfs: fuse-overlayfs is not installed")
    assert choice.describe() == ("read-only root: only /kaggle/working, /kaggle/temp and /tmp writable (Kaggle's is "
                                 "writable) (not used: overlay: overlay is broken here; fuse-overlayfs: fuse-overlayfs "
                                 "is not installed)")
    assert choose_root_filesystem("python").kind is None
    assert choose_root_filesystem("bwrap").skipped == ("bwrap-overlay: bwrap is not installed",)


@pytest.mark.parametrize(("value", "message"), [
    ("writable", "KKB_SANDBOX_ROOT_FS='writable' is not a root file system"),
    ("bwrap-overlay", "the bwrap-overlay root file system cannot be used here: only with bubblewrap isolation"),
])
def test_a_forced_root_filesystem_that_cannot_be_used_is_an_error(monkeypatch: pytest.MonkeyPatch, value: str,
                                                                   message: str) -> None:
    monkeypatch.setenv("KKB_SANDBOX_ROOT_FS", value)
    with pytest.raises(DryRunError) as raised:
        choose_root_filesystem("namespace")
    assert raised.value.message == message
