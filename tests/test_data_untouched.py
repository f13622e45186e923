"""The user's data is read-only to kkb: every dry-run mode leaves the competition folder as it was, byte for byte.

The data holds a file named like a stand-in's new id (``extra/p0000_r1.txt`` beside ``extra/p0000.txt``), the shape
that once had ``--rerun-scale`` (and the projection's own replicated run) write the data of ``p0000`` over it: such a
new id is refused by name before anything is written, and where no option asked for it (the projection's second
size) the dry run goes on without it.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.support.cli import kkb, said
from tests.support.files import KERNELS

pytestmark = pytest.mark.loopback  # dry runs


def _fingerprint(folder: Path) -> dict[str, str]:
    """Every file and link under ``folder``: its content's hash (a link: its target) and its mode."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        what = f"-> {path.readlink()}" if path.is_symlink() else (
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder")
        found[path.relative_to(folder).as_posix()] = f"{what} {oct(info.st_mode)} {info.st_mtime_ns}"
    return found


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "my kernel", ignore=shutil.ignore_patterns(".kkb", "build")))
    extra = kernel / "data" / "competition" / "public" / "extra"
    extra.mkdir()
    (extra / "p0000.txt").write_text("the data of p0000\n")
    (extra / "p0000_r1.txt").write_text("the data of p0000_r1\n")  # not a test id: a file a copy must never replace
    return kernel


COLLISION = ("{public}/extra/p0000_r1.txt: copy 1 of extra/p0000.txt would be named extra/p0000_r1.txt, a file the data "
             "already has: kkb never writes over or mixes in your data\n"
             "hint: rename that file, or give a bigger test with --rerun-data\n")


@pytest.mark.slow
@pytest.mark.parametrize(("args", "code", "said_there"), [
    ((), 0, None),  # commit and rerun; the projection's replicated second size is refused by name, and left out
    (("--scenario", "rerun", "--rerun-scale", "2", "--show-inputs"), 1, COLLISION),
    (("--scenario", "rerun", "--rerun-data", "data/competition/hidden", "--legacy-layout"), 0, None),
], ids=["commit-and-rerun", "rerun-scale", "rerun-data-legacy"])
def test_every_dry_run_mode_leaves_the_data_as_it_was(kernel: Path, args: tuple[str, ...], code: int,
                                                      said_there: str | None) -> None:
    data = kernel / "data"
    before = _fingerprint(data)
    ran = kkb("dry-run", ".", *args, cwd=kernel)
    assert ran.returncode == code, said(ran)
    if said_there is not None:
        assert ran.stderr.endswith(said_there.format(public=data / "competition" / "public")), said(ran)
    assert _fingerprint(data) == before
    assert (data / "competition" / "public" / "extra" / "p0000_r1.txt").read_text() == "the data of p0000_r1\n"
