"""Credentials inside archives are refused like the files themselves (zip, tar, tar.gz, nested, bounded)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.build import BuildSettings, build_kernel
from builder.bundle import archives
from builder.errors import BundleError
from builder.project.credentials import Secret
from tests.support.files import KERNELS

KEY = "0123456789abcdef0123456789abcdef"
KAGGLE_JSON = json.dumps({"username": "someone", "key": KEY}).encode()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


def _tar(members: dict[str, bytes], mode: str = "w") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as bundle:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _with_weight(kernel: Path, name: str, data: bytes) -> None:
    (kernel / "weights" / name).write_bytes(data)
    spec = kernel / "kernel.toml"
    spec.write_text(spec.read_text().replace('include = ["weights/*.json"]', f'include = ["weights/*.json", "weights/{name}"]'))


WHAT = "refusing to put it in the weights dataset"
ARCHIVES: list[tuple[str, Callable[[], bytes], str]] = [
    ("backup.zip", lambda: _zip({".kaggle/kaggle.json": KAGGLE_JSON}),
     f"weights/backup.zip: member .kaggle/kaggle.json looks like a credential file; {WHAT}"),
    ("backup.tar", lambda: _tar({"home/.kaggle/kaggle.json": KAGGLE_JSON}),
     f"weights/backup.tar: member home/.kaggle/kaggle.json looks like a credential file; {WHAT}"),
    ("backup.tar.gz", lambda: _tar({"deploy/.env": b"X=1\n"}, "w:gz"),
     f"weights/backup.tar.gz: member deploy/.env looks like a credential file; {WHAT}"),
    ("notes.zip", lambda: _zip({"notes.txt": b"export KAGGLE_KEY=" + KEY.encode()}),
     f"weights/notes.zip: member notes.txt sets KAGGLE_KEY; {WHAT}"),
    ("nested.zip", lambda: _zip({"inner.tar.gz": _tar({"ssh/id_rsa": b"not a real key"}, "w:gz")}),
     f"weights/nested.zip: member inner.tar.gz → ssh/id_rsa looks like a credential file; {WHAT}"),
]


@pytest.mark.parametrize(("name", "make", "message"), ARCHIVES, ids=[a[0] for a in ARCHIVES])
def test_a_credential_inside_an_archive_is_refused_by_name(minimal: Path, tmp_path: Path, name: str,
                                                           make: Callable[[], bytes], message: str) -> None:
    _with_weight(minimal, name, make())
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))
    assert caught.value.message == message
    assert KEY not in str(caught.value) + (caught.value.hint or "")
    assert not (tmp_path / "out").exists()


def test_the_key_in_use_inside_a_compressed_member_is_found(minimal: Path, tmp_path: Path) -> None:
    """A member with an innocent name that holds the key value itself (compressed: no raw bytes to match)."""
    _with_weight(minimal, "logs.zip", _zip({"run/stdout.txt": b"token " + KEY.encode() + b" used\n" * 50}))
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out",
                                   secrets=(Secret("your Kaggle API key", KEY),)))
    assert caught.value.message == ("weights/logs.zip: member run/stdout.txt holds your Kaggle API key; "
                                    "refusing to put it in the weights dataset")
    assert KEY not in str(caught.value) + (caught.value.hint or "")


def test_a_clean_archive_and_a_fake_one_build(minimal: Path, tmp_path: Path) -> None:
    _with_weight(minimal, "extra.zip", _zip({"table.csv": b"a,b\n1,2\n"}))
    (minimal / "weights" / "not-really.tar").write_bytes(b"just bytes")
    result = build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))
    assert (result.weights_dir / "weights" / "extra.zip").is_file()


def test_nesting_and_reads_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = _zip({"secret/kaggle.json": KAGGLE_JSON})
    for level in range(archives.MAX_DEPTH):
        deep = _zip({f"level{level}.zip": deep})
    names = [m.chain[-1] for m in archives.members("outer.zip", io.BytesIO(deep))]
    assert names == ["level2.zip", "level1.zip", "level0.zip"]  # the fourth level is not opened
    monkeypatch.setattr(archives, "MEMBER_LIMIT", 10)
    (member,) = archives.members("big.zip", io.BytesIO(_zip({"big.bin": b"x" * 1000})))
    assert (len(member.data), member.complete) == (10, False)
