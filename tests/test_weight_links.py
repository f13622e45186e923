"""Weight files named in ``[weights] include`` may be symlinks to where people keep large checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError
from tests.support.files import KERNELS


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    text = (kernel / "kernel.toml").read_text().replace('include = ["weights/*.json"]', 'include = ["weights/*.json", "big.bin"]')
    (kernel / "kernel.toml").write_text(text)
    return kernel


def test_a_linked_weight_file_is_bundled_by_content_and_its_target_recorded(kernel: Path, tmp_path: Path) -> None:
    outside = tmp_path / "checkpoints" / "big.bin"
    outside.parent.mkdir()
    outside.write_bytes(b"\0" * 1000)
    (kernel / "big.bin").symlink_to(outside)
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    bundled = build.weights_dir / "big.bin"
    assert not bundled.is_symlink() and bundled.read_bytes() == outside.read_bytes()
    manifest = json.loads((build.weights_dir / "manifest.json").read_text())
    assert manifest["links"] == {"big.bin": str(outside)}
    assert {"path": "big.bin", "size": 1000} == {k: v for k, v in next(f for f in manifest["files"] if f["path"] == "big.bin").items()
                                                 if k != "sha256"}


def test_a_broken_link_is_refused_by_name(kernel: Path, tmp_path: Path) -> None:
    (kernel / "big.bin").symlink_to(tmp_path / "gone.bin")
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert caught.value.message == (f"{kernel / 'kernel.toml'}: [weights] include 'big.bin' is a broken link "
                                    f"(it points to {tmp_path / 'gone.bin'}, which does not exist)")
    assert caught.value.hint == "fix the link or the path: the weights are read from where it points"
    assert not (tmp_path / "build").exists()


def test_code_may_not_link_outside(kernel: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.py").write_text("x = 1\n")
    (kernel / "minimal" / "linked.py").symlink_to(tmp_path / "elsewhere.py")
    (kernel / "big.bin").write_bytes(b"1")
    with pytest.raises(BundleError, match=r"minimal/linked.py: resolves to .*outside the kernel folder"):
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
