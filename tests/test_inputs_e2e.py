"""``[[inputs]]`` end to end: the real ``kaggle`` client against the local Kaggle, with a second user.

bob publishes a dataset, a Kaggle Model version and a notebook whose output is a file; kkb-demo's
kernel attaches all three, dry-runs against local stand-ins, and is pushed, run and scored by the
local Kaggle, which mounts bob's inputs where Kaggle does. The kernel's step reads each input through
``kkb_runtime.find_input`` and fails without it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from builder import cli
from builder.build import BuildSettings, build_kernel
from builder.errors import RemoteError
from builder.kkb_runtime.vocabulary import Layout, Scenario
from builder.local_kaggle import InstantRunner, KernelRunner, LocalKaggle, ServerSettings
from builder.project.spec import load_spec
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.remote.kaggle_api import KaggleAdapter
from builder.remote.push import push
from builder.remote.queries import QuerySettings, logs
from builder.remote.session import PushSettings, Waits
from builder.remote.submit import SubmitSettings, submit
from tests.support.demo_kaggle import demo_adapter
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

USER, KEY = "kkb-demo", "local-test-key-0123456789"
BOB, BOB_KEY = "bob", "bobs-local-key-0123456789"
FAST = Waits(poll_initial_s=0.05, poll_max_s=0.3, dataset_timeout_s=30, run_timeout_s=120, scoring_timeout_s=120)
INPUTS = {"lookup": ("dataset", "bob/tiny-lookup"), "net": ("model", "bob/tiny-net/pytorch/default/1"),
          "offsets": ("notebook", "bob/make-offsets")}
READ_INPUTS = '''
from kkb_runtime import find_input

for _name, _file in (("tiny-lookup", "lookup.txt"), ("net", "net.txt"), ("make-offsets", "offsets.txt")):
    print(f"input {_name}: {(find_input(_name) / _file).read_text()}")
'''


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: KernelRunner | None) -> Iterator[LocalKaggle]:
    with LocalKaggle(tmp_path / "kaggle", port=0, settings=ServerSettings(dataset_ready_seconds=0.0), runner=runner) as local:
        local.add_user(USER, KEY)
        local.add_user(BOB, BOB_KEY)
        local.add_competition(KERNELS / "minimal" / "data" / "competition")
        monkeypatch.setenv("KKB_KAGGLE_API", local.base_url)
        _sign_in(monkeypatch, USER, KEY)
        yield local


def _sign_in(monkeypatch: pytest.MonkeyPatch, user: str, key: str) -> None:
    monkeypatch.setenv("KAGGLE_USERNAME", user)
    monkeypatch.setenv("KAGGLE_KEY", key)


def _adapter(server: LocalKaggle) -> KaggleAdapter:
    return demo_adapter(server)  # signed in as whoever the environment names (the test or bob)


def _publish_as_bob(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, private: bool = False) -> None:
    """bob's dataset, Model version and notebook output, each made with the real client."""
    _sign_in(monkeypatch, BOB, BOB_KEY)
    bob = _adapter(server)
    root = tmp_path / "bob"
    dataset = _folder(root / "dataset", {"lookup.txt": "LOOKUP", "dataset-metadata.json": json.dumps(
        {"id": "bob/tiny-lookup", "title": "Tiny lookup table", "licenses": [{"name": "CC0-1.0"}]})})
    bob.create_dataset(dataset, public=not private)
    model = _folder(root / "model", {"net.txt": "NET", "model-metadata.json": json.dumps(
        {"ownerSlug": "bob", "slug": "tiny-net", "title": "Tiny Net", "isPrivate": private, "description": "tiny"}),
        "model-instance-metadata.json": json.dumps({"ownerSlug": "bob", "modelSlug": "tiny-net", "instanceSlug": "default",
                                                    "framework": "pytorch", "licenseName": "Apache 2.0"})})
    assert bob.api.model_create_new(str(model)).error == ""
    assert bob.api.model_instance_create(str(model), quiet=True, dir_mode="tar").error == ""
    notebook = _folder(root / "notebook", {
        "make.py": "from pathlib import Path\nPath('offsets.txt').write_text('OFFSETS')\n",
        "kernel-metadata.json": json.dumps({"id": "bob/make-offsets", "title": "Make offsets", "code_file": "make.py",
                                            "language": "python", "kernel_type": "script", "is_private": private,
                                            "enable_internet": False})})
    bob.push_kernel(notebook)
    assert server.wait_idle(120)
    _sign_in(monkeypatch, USER, KEY)


def _folder(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _kernel(tmp_path: Path) -> Path:
    """The minimal kernel attaching bob's three inputs, with stand-ins, its step reading each of them."""
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    toml = (kernel / "kernel.toml").read_text().replace("[fast_commit]\nenabled = true", "[fast_commit]\nenabled = false")
    for name, (kind, ref) in INPUTS.items():
        toml += f'\n[[inputs]]\nkind = "{kind}"\nref = "{ref}"\npath = "standins/{name}"\n' + (
            'name = "net"\n' if kind == "model" else "")
        _folder(kernel / "standins" / name, {f"{name}.txt": f"stand-in {name}"})
    (kernel / "kernel.toml").write_text(toml)
    script = (kernel / "predict.py").read_text().replace("\n\ndef main() -> None:", READ_INPUTS + "\n\ndef main() -> None:")
    (kernel / "predict.py").write_text(script)
    return kernel


@pytest.fixture
def sandbox_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from _serve(tmp_path, monkeypatch, None)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from _serve(tmp_path, monkeypatch, InstantRunner())


def test_other_users_dataset_model_and_notebook_output_dry_run_and_submitted(
        sandbox_server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _publish_as_bob(sandbox_server, monkeypatch, tmp_path)
    kernel = _kernel(tmp_path)

    report = dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "build", scenario=Scenario.COMMIT, layout=Layout.LEGACY))
    assert report.ok, report.to_json()
    text = "".join(entry["data"] for entry in json.loads(report.scenarios[0].log.read_text()))
    assert "input tiny-lookup: stand-in lookup" in text and "input net: stand-in net" in text
    assert "input make-offsets: stand-in offsets" in text

    result = submit(SubmitSettings(kernel_dir=kernel, out_dir=tmp_path / "build", adapter=_adapter(sandbox_server), waits=FAST))
    assert result.status == "complete" and result.public_score
    log = "".join(entry["data"] for entry in logs(QuerySettings(kernel_dir=kernel, adapter=_adapter(sandbox_server))).entries)
    # bob's files, mounted by the local Kaggle in the current layout, not the stand-ins.
    assert "input tiny-lookup: LOOKUP" in log and "input net: NET" in log and "input make-offsets: OFFSETS" in log
    meta = json.loads((tmp_path / "build" / "kernel" / "kernel-metadata.json").read_text())
    assert (meta["model_sources"], meta["kernel_sources"]) == (["bob/tiny-net/pytorch/default/1"], ["bob/make-offsets"])
    assert "bob/tiny-lookup" in meta["dataset_sources"]


def test_private_inputs_of_another_user_are_refused_before_any_upload(
        server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _publish_as_bob(server, monkeypatch, tmp_path, private=True)
    kernel = _kernel(tmp_path)
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text() + '\n[[inputs]]\nkind = "model"\n'
                                        'ref = "bob/tiny-net/pytorch/default/7"\nname = "net7"\n')
    with pytest.raises(RemoteError) as caught:
        push(PushSettings(kernel_dir=kernel, out_dir=tmp_path / "build", adapter=_adapter(server), waits=FAST))
    assert caught.value.message == (
        f"{kernel / 'kernel.toml'}: Kaggle has no input you can read at inputs[0] dataset 'bob/tiny-lookup'; "
        "inputs[1] model 'bob/tiny-net/pytorch/default/1'; inputs[2] notebook 'bob/make-offsets'; "
        "inputs[3] model 'bob/tiny-net/pytorch/default/7' (nothing was uploaded)")
    assert "must be public or shared with you" in (caught.value.hint or "")
    uploads_by_demo = [p for p in (server.store.root / "blobs").glob("*/blob.json") if json.loads(p.read_text())["user"] == USER]
    assert uploads_by_demo == []
    assert _adapter(server).kernel_version("kkb-demo/kkb-minimal-inference") is None


NOTEBOOK_CELLS = [
    "!pip install --no-index --find-links ../input/wheels timm",
    "import pandas as pd\nsample = pd.read_csv('/kaggle/input/competitions/kkb-minimal/sample_submission.csv')",
    "lookup = open('/kaggle/input/tiny-lookup/lookup.txt').read()\n"
    "net = '/kaggle/input/models/bob/tiny-net/pytorch/default/1/net.txt'\n"
    "offsets = open('../input/make-offsets/offsets.txt').read()\n"
    "extra = '/kaggle/input/unknown-thing/file.bin'",
    "sample.to_csv('submission.csv', index=False)",
]


def test_init_from_a_pulled_kernel_folder(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """bob's inference notebook, pushed and then pulled with `kaggle kernels pull -m`, becomes a kkb project."""
    _publish_as_bob(server, monkeypatch, tmp_path)
    _sign_in(monkeypatch, BOB, BOB_KEY)
    bob = _adapter(server)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in NOTEBOOK_CELLS])
    source = _folder(tmp_path / "bob" / "inference", {"infer.ipynb": nbformat.writes(notebook), "kernel-metadata.json": json.dumps({
        "id": "bob/bobs-inference", "title": "Bobs inference", "code_file": "infer.ipynb", "language": "python",
        "kernel_type": "notebook", "is_private": True, "enable_gpu": True, "enable_internet": False,
        "machine_shape": "NvidiaL4", "competition_sources": ["kkb-minimal"], "dataset_sources": ["bob/tiny-lookup"],
        "model_sources": ["bob/tiny-net/pytorch/default/1"], "kernel_sources": ["bob/make-offsets"]})})
    bob.push_kernel(source)
    pulled = tmp_path / "pulled"
    bob.api.kernels_pull("bob/bobs-inference", str(pulled), metadata=True, quiet=True)
    assert sorted(path.name for path in pulled.iterdir()) == ["bobs-inference.ipynb", "kernel-metadata.json"]

    kernel = tmp_path / "kernels" / "bobs"
    data = KERNELS / "minimal" / "data" / "competition" / "public"
    assert cli.main(["init", str(kernel), "--from", str(pulled), "--data", str(data)]) == 0
    out = capsys.readouterr().out
    spec = load_spec(kernel)
    assert (spec.kernel.title, spec.kernel.owner, spec.kernel.accelerator) == ("Bobs inference", "bob", "NvidiaL4")
    assert (spec.competition.slug, spec.submission.id_column, spec.submission.target_columns) == ("kkb-minimal", "id", ["target"])
    assert [(i.kind, i.ref) for i in spec.inputs] == [("dataset", "bob/tiny-lookup"), ("model", "bob/tiny-net/pytorch/default/1"),
                                                      ("notebook", "bob/make-offsets")]
    script = (kernel / "notebook.py").read_text()
    assert "sample.to_csv('submission.csv', index=False)" in script
    assert "# kkb init: not run in a step: !pip install --no-index --find-links ../input/wheels timm" in script
    for line in ("/kaggle/input/competitions/kkb-minimal/sample_submission.csv → competition kkb-minimal",
                 "/kaggle/input/tiny-lookup/lookup.txt → dataset bob/tiny-lookup (find_input('tiny-lookup'))",
                 "/kaggle/input/models/bob/tiny-net/pytorch/default/1/net.txt → model bob/tiny-net/pytorch/default/1 "
                 "(find_input('tiny-net'))",
                 "../input/make-offsets/offsets.txt → notebook bob/make-offsets (find_input('make-offsets'))",
                 "/kaggle/input/unknown-thing/file.bin → NOT MAPPED",
                 "not mapped: bobs-inference.ipynb reads ../input/wheels: no attached input matches it",
                 "not mapped: bobs-inference.ipynb: '!pip install --no-index --find-links ../input/wheels timm'"):
        assert line in out, out
    assert "/kaggle/input/unknown-thing/file.bin  ->  NOT MAPPED" in (kernel / "kernel.toml").read_text()
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    meta = json.loads((build.kernel_dir / "kernel-metadata.json").read_text())
    assert (meta["model_sources"], meta["kernel_sources"], meta["machine_shape"]) == (
        ["bob/tiny-net/pytorch/default/1"], ["bob/make-offsets"], "NvidiaL4")
