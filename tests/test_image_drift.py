"""The drift guard: Kaggle's image moves (Python ABI, CUDA, torch), and a wheelhouse built for the old one is refused.

End to end against the local Kaggle declaring captured images (``tests/images/``): a wheelhouse built for the image
kkb ships (Python 3.12), a run that records Python 3.13, ``kkb push`` refusing, ``kkb wheels`` resolving for cp313
with no 3.13 interpreter, the push shipping it; then a torch-only bump marking the prebuilt apex stale and nothing
else. The rules themselves as tables.
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.bundle.wheels import check as wheel_check
from builder.bundle.wheels import commands as wheel_commands
from builder.bundle.wheels import dataset_drift, helper_drift, read_record
from builder.bundle.wheels.commands import stand_in
from builder.bundle.wheels.drift import torch_bound
from builder.cli import main
from builder.errors import EXIT_OK, EXIT_USER
from builder.local_kaggle import LocalKaggle
from builder.project.image_facts import ImageFacts, image_for_kernel
from builder.project.image_store import record_run_capture
from builder.project.layout import WHEELS_DIR
from builder.project.spec import load_spec
from builder.remote.wheels import WheelsSettings, build_wheels
from tests.support.demo_kaggle import DEMO_USER, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS, REPO
from tests.support.wheels import PYTHON_HERE

IMAGES = REPO / "tests" / "images"
WHEELHOUSE = f"{DEMO_USER}/kkb-minimal-inference-wheels"
APEX = "apex-0.1-py3-none-manylinux_2_17_x86_64.whl"

pytestmark = pytest.mark.usefixtures("hermetic_pip")


def facts(python: str = "3.12", cuda: str | None = "12.8", torch: str | None = "2.10.0", captured: str = "2026-06-17",
          kernel: str | None = None) -> ImageFacts:
    return ImageFacts(python, cuda, torch, captured, "test", kernel)


@pytest.mark.parametrize(("now", "changes"), [
    (facts(), []),
    (facts(torch="2.10.1"), []),  # a patch release keeps torch's C++ ABI
    (facts(python="3.13"), ["Python ABI cp312 → cp313"]),
    (facts(torch="2.11.0"), ["torch 2.10.0 → 2.11.0"]),
    (facts(cuda="13.0", torch="2.11.0"), ["CUDA 12.8 → 13.0", "torch 2.10.0 → 2.11.0"]),
    (facts(cuda=None, torch=None), []),  # what a side does not know is no change
])
def test_what_moved_between_two_images(now: ImageFacts, changes: list[str]) -> None:
    assert facts().changes(now) == changes


def write_binary_wheel(folder: Path, name: str, tag: str, library: bytes) -> Path:
    """A binary wheel whose shared object names ``library`` among what it loads (as a torch extension's does)."""
    wheel = folder / f"{name}-0.1-{tag}.whl"
    info = f"{name}-0.1.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name}/_C.so", b"\x7fELF...\x00" + library + b"\x00libc.so.6\x00")
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        archive.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def test_which_wheels_link_against_torch(tmp_path: Path) -> None:
    assert torch_bound(write_binary_wheel(tmp_path, "apex", "py3-none-manylinux_2_17_x86_64", b"libc10.so"))
    assert torch_bound(write_binary_wheel(tmp_path, "flash_attn", "cp312-cp312-linux_x86_64", b"libtorch_cuda.so"))
    assert not torch_bound(write_binary_wheel(tmp_path, "orjson", "cp312-cp312-manylinux_2_17_x86_64", b"libm.so.6"))
    assert not torch_bound(stand_in(tmp_path, "timm", "1.0", ["torch"]))  # pure Python: whichever torch the image has


def test_a_dataset_wheelhouse_goes_stale_on_a_new_python_and_only_its_torch_extensions_on_a_new_torch(tmp_path: Path) -> None:
    folder = tmp_path / "wheels"
    stand_in(folder, "beta", "1.2")
    write_binary_wheel(folder, "apex", "py3-none-manylinux_2_17_x86_64", b"libc10.so")
    write_binary_wheel(folder, "orjson", "cp312-cp312-manylinux_2_17_x86_64", b"libm.so.6")
    record = {"target": {"python_version": "3.12", "platform": "manylinux_2_35_x86_64"}, "built_for": facts().to_json(),
              "torch_bound": [APEX]}
    assert dataset_drift(folder, record, WHEELHOUSE, facts(captured="2026-09-01")) is None
    moved = dataset_drift(folder, record, WHEELHOUSE, facts(python="3.13"))
    assert moved is not None and moved.changes == ("Python ABI cp312 → cp313",)
    assert moved.stale == ("resolved for cp312", "1 wheel(s) that cannot install on cp313: "
                                                 "orjson-0.1-cp312-cp312-manylinux_2_17_x86_64.whl")
    bumped = dataset_drift(folder, record, WHEELHOUSE, facts(torch="2.11.0"))
    assert bumped is not None and bumped.stale == (APEX,)
    pure = dataset_drift(folder, {**record, "torch_bound": []}, WHEELHOUSE, facts(torch="2.11.0"))
    assert pure is None  # nothing links against torch: a torch bump leaves it as it is
    older = dataset_drift(folder, {"target": record["target"]}, WHEELHOUSE, facts(python="3.13", torch="2.11.0"))
    assert older is not None and older.changes == ("Python ABI cp312 → cp313",)  # a record without the image: its target


def test_the_helper_s_compiled_source_packages_go_stale_on_a_new_torch(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "k"))
    (kernel / "apex").mkdir()
    with (kernel / "kernel.toml").open("a") as spec:
        spec.write('\n[install]\nrequirements = ["beta"]\non_kaggle = true\n[[install.source_packages]]\nname = "apex"\n'
                   'path = "apex"\ncpp_ext = true\ncuda_ext = true\n')
    record = {"built_for": facts().to_json()}
    bumped = helper_drift(record, load_spec(kernel), "me/wheels", facts(torch="2.11.0"))
    assert bumped is not None and bumped.stale == ("apex (compiled against torch 2.10.0, CUDA 12.8)",)
    assert "kkb wheels" in (bumped.error(kernel).hint or "") and "--on-kaggle" in (bumped.error(kernel).hint or "")
    assert helper_drift(record, load_spec(kernel), "me/wheels", facts(python="3.13")).stale == (  # type: ignore[union-attr]
        "every wheel it built, for cp312",)


def test_a_kernel_pinned_to_its_image_keeps_the_image_its_own_run_had() -> None:
    capture = json.loads((IMAGES / "py312-torch210.json").read_text())
    newer = json.loads((IMAGES / "py313-torch210.json").read_text())
    record_run_capture(capture, server="kaggle.com", kernel="me/pinned", version=3)
    record_run_capture(newer, server="kaggle.com", kernel="me/image-capture", version=1)
    assert image_for_kernel("me/pinned", pinned=True).python == "3.12"  # docker_image_pinning = "original"
    assert image_for_kernel("me/pinned", pinned=False).python == "3.13"  # "latest": the newest image
    assert image_for_kernel("me/new", pinned=True).python == "3.13"  # a new kernel gets the newest image
    assert image_for_kernel("me/pinned", pinned=False, server="http://127.0.0.1:9").python == "3.12"  # another server
    older = {**capture, "captured": "2026-01-01"}
    record_run_capture(older, server="kaggle.com", kernel="me/pinned", version=2)  # an older run never replaces a newer
    assert image_for_kernel("me/pinned", pinned=True).captured == capture["captured"]


# -- end to end: the local Kaggle's image moves ---------------------------------------------------------------------


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """zeta needs eta on Python 3.13 only (a marker); apex is a prebuilt torch extension; torch is the image's."""
    folder = tmp_path / "index"
    stand_in(folder, "zeta", "1.0", ["eta; python_version >= '3.13'"])
    stand_in(folder, "eta", "2.0")
    write_binary_wheel(folder, "apex", "py3-none-manylinux_2_17_x86_64", b"libc10.so")
    return folder


@pytest.fixture
def declared(tmp_path: Path) -> Path:
    """The file the local Kaggle reads, when a run ends, for the image it declares."""
    return tmp_path / "declared-image.json"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: Path) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, None, image=declared)


def _no_python_but_this_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine may have a Python 3.13 somewhere: the resolution must not need one."""
    def only_here(version: str) -> Path | None:
        return Path(sys.executable) if version == PYTHON_HERE else None

    monkeypatch.setattr(wheel_commands, "find_python", only_here)
    monkeypatch.setattr(wheel_check, "find_python", only_here)


def _wheels(kernel: Path, index: Path) -> dict[str, Any]:
    build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=kernel / "build" / kernel.name,
                                index_args=("--no-index", "--find-links", str(index)), check=False))
    return read_record(kernel / "build" / kernel.name / WHEELS_DIR)


@pytest.mark.slow
@pytest.mark.loopback
def test_push_refuses_a_wheelhouse_kaggle_s_image_moved_away_from_and_kkb_wheels_rebuilds_it(
        tmp_path: Path, index: Path, declared: Path, server: LocalKaggle, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _no_python_but_this_one(monkeypatch)
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "my kernel", ignore=shutil.ignore_patterns(".kkb")))
    spec = kernel / "kernel.toml"
    spec.write_text(spec.read_text().replace("[kernel]\n", '[kernel]\ntype = "script"\n', 1)
                    + '\n[install]\nrequirements = ["zeta", "apex"]\n')
    monkeypatch.chdir(kernel)
    record = _wheels(kernel, index)  # for the image kkb ships: Python 3.12, torch 2.10
    assert record["target"]["python_version"] == "3.12" and record["built_for"]["torch"] == "2.10.0"  # type: ignore[index]
    assert sorted(record["wheels"]) == [APEX, "zeta-1.0-py3-none-any.whl"] and record["torch_bound"] == [APEX]

    shutil.copyfile(IMAGES / "py313-torch210.json", declared)  # Kaggle moves to Python 3.13
    assert main(["submit", ".", "--wait-run", "120", "--wait-score", "120"]) == EXIT_OK  # its run records the image
    assert "ran on Python 3.13, CUDA 12.8, torch 2.10.0" in capsys.readouterr().err
    versions = demo_adapter(server).dataset_version(WHEELHOUSE)
    assert versions is not None

    assert main(["push", "."]) == EXIT_USER
    err = capsys.readouterr().err
    assert "Kaggle's image moved since the wheelhouse was built (Python ABI cp312 → cp313): the wheelhouse dataset " \
           f"{WHEELHOUSE} is stale: resolved for cp312" in err
    assert "kkb wheels" in err and "it resolves for cp313 (Python 3.13)" in err
    assert demo_adapter(server).dataset_version(WHEELHOUSE) == versions  # nothing uploaded

    record = _wheels(kernel, index)  # resolved for cp313 by pip's --python-version: no 3.13 interpreter here
    assert record["target"]["python_version"] == "3.13" and record["built_for"]["python"] == "3.13"  # type: ignore[index]
    assert sorted(record["wheels"]) == [APEX, "eta-2.0-py3-none-any.whl", "zeta-1.0-py3-none-any.whl"]  # 3.13's marker
    assert main(["push", ".", "--json"]) == EXIT_OK
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["kernel_action"] == "pushed" and demo_adapter(server).dataset_version(WHEELHOUSE) == versions + 1
    server.wait_idle(60)

    shutil.copyfile(IMAGES / "py313-torch211.json", declared)  # a torch-only bump
    (kernel / "predict.py").write_text((kernel / "predict.py").read_text() + "\n# a new version\n")
    assert main(["push", "."]) == EXIT_OK  # its run records torch 2.11 ...
    server.wait_idle(60)
    capsys.readouterr()
    assert main(["push", "."]) == EXIT_USER  # ... which the next push reads first (that one file), and refuses
    err = capsys.readouterr().err
    assert "ran on Python 3.13, CUDA 12.8, torch 2.11.0" in err
    assert f"(torch 2.10.0 → 2.11.0): the wheelhouse dataset {WHEELHOUSE} is stale: {APEX}\n" in err  # apex alone
    record = _wheels(kernel, index)  # rebuilt for torch 2.11: the same key, a new image
    assert record["built_for"]["torch"] == "2.11.0"  # type: ignore[index]
    assert main(["push", "."]) == EXIT_OK
