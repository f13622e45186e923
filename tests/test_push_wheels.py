"""kkb push uploads the wheelhouse dataset with the kernel, only when it changed, and refuses a stale one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.bundle.wheels import HELPER_RECORD, wheelhouse_source, wheelhouse_to_push
from builder.errors import RemoteError, WheelhouseError
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.project.image_facts import described_image
from builder.project.layout import HELPER_DIR
from builder.project.spec import load_spec
from builder.remote.push import push
from builder.remote.session import PushSettings
from builder.remote.wheels import WheelsSettings, build_wheels
from tests.support.demo_kaggle import LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.kernels import kernel_with
from tests.support.wheels import PYTHON_HERE, index_args

pytestmark = pytest.mark.usefixtures("hermetic_pip")

WHEELHOUSE_ID = "kkb-demo/kkb-minimal-inference-wheels"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


def _push(kernel: Path, server: LocalKaggle):
    return push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server), waits=LOOPBACK_WAITS))


@pytest.mark.loopback
@pytest.mark.slow
def test_push_uploads_the_wheelhouse_once_and_refuses_a_stale_one(tmp_path: Path, index: Path, server: LocalKaggle) -> None:
    kernel = kernel_with(tmp_path, f'[install]\nrequirements = ["beta"]\npython_version = "{PYTHON_HERE}"\n')
    with pytest.raises(WheelhouseError, match=r"needs the wheelhouse dataset kkb-demo/kkb-minimal-inference-wheels, "
                                              r"which has not been built"):
        _push(kernel, server)
    with pytest.raises(RemoteError, match="not found"):  # refused before anything was uploaded
        demo_adapter(server).dataset_version(WHEELHOUSE_ID)

    build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=tmp_path / "build", index_args=index_args(index), check=False))
    first = _push(kernel, server)
    assert demo_adapter(server).dataset_version(WHEELHOUSE_ID) == 1
    again = _push(kernel, server)
    assert again.uploaded_bytes == 0 and again.kernel_action == "unchanged"

    spec = (kernel / "kernel.toml").read_text().replace('requirements = ["beta"]', 'requirements = ["beta", "gamma"]')
    (kernel / "kernel.toml").write_text(spec)
    with pytest.raises(WheelhouseError, match=r"which is out of date in .*wheels"):
        _push(kernel, server)
    build_wheels(WheelsSettings(kernel_dir=kernel, out_dir=tmp_path / "build", index_args=index_args(index), check=False))
    third = _push(kernel, server)
    assert demo_adapter(server).dataset_version(WHEELHOUSE_ID) == 2 and third.kernel_version == first.kernel_version + 1


def test_push_refuses_an_on_kaggle_wheelhouse_whose_helper_has_not_run(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, '[install]\nrequirements = ["beta"]\non_kaggle = true\n')
    spec, out = load_spec(kernel), tmp_path / "build"
    source = wheelhouse_source(spec, "kkb-demo")
    assert source is not None
    ref = source.ref
    with pytest.raises(WheelhouseError, match=f"attaches the output of {ref}, but it has not been pushed from here"):
        wheelhouse_to_push(spec, kernel, "kkb-demo", out, described_image())
    record = out / HELPER_DIR / HELPER_RECORD
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"kernel": ref, "key": "sha256:k", "version": 3, "status": "error"}))
    with pytest.raises(WheelhouseError, match=r"but its last run is error"):
        wheelhouse_to_push(spec, kernel, "kkb-demo", out, described_image())
    record.write_text(json.dumps({"kernel": ref, "key": "sha256:k", "version": 3, "status": "complete"}))
    assert wheelhouse_to_push(spec, kernel, "kkb-demo", out, described_image()) == (ref, out / HELPER_DIR, "sha256:k@v3")


@pytest.mark.slow
@pytest.mark.parametrize(("damage", "state"), [
    (lambda wheels: next(wheels.glob("*.whl")).write_bytes(b"truncated"), r"is damaged \(beta-.*\.whl is missing or of another size\)"),
    (lambda wheels: (wheels / "gamma-1.0-py3-none-any.whl.part").write_bytes(b"x"),
     r"is damaged \(gamma-1\.0-py3-none-any\.whl\.part is not in its manifest\)"),
])
def test_a_damaged_wheelhouse_is_refused_naming_the_damage_and_rebuilt(tmp_path: Path, index: Path, damage, state: str) -> None:  # type: ignore[no-untyped-def]
    kernel = kernel_with(tmp_path, f'[install]\nrequirements = ["beta"]\npython_version = "{PYTHON_HERE}"\n')
    settings = WheelsSettings(kernel_dir=kernel, out_dir=tmp_path / "build", index_args=index_args(index), check=False)
    build_wheels(settings)
    spec = load_spec(kernel)
    out_dir = tmp_path / "build"
    assert wheelhouse_to_push(spec, kernel, "kkb-demo", out_dir, described_image()) is not None
    damage(out_dir / "wheels")
    with pytest.raises(WheelhouseError, match=f"which {state} in "):
        wheelhouse_to_push(spec, kernel, "kkb-demo", out_dir, described_image())
    build_wheels(settings)  # the damaged wheelhouse is not reused: downloaded again
    assert wheelhouse_to_push(spec, kernel, "kkb-demo", out_dir, described_image()) is not None
