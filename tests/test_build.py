"""kkb build: bundles, manifests, determinism, safety, and the golden notebook."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError, SpecError, TemplateError
from tests.support.cli import kkb, said
from tests.support.files import KERNELS, build_file_tree
from tests.support.golden import normalize_provenance

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    """A copy of kernels/minimal that a test may change."""
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))


def _build(kernel: Path, out: Path, **kwargs):
    return build_kernel(BuildSettings(kernel_dir=kernel, out_dir=out, **kwargs))


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_build_layout_and_metadata(minimal: Path, tmp_path: Path) -> None:
    result = _build(minimal, tmp_path / "out")
    assert result.kernel_id == "kkb-demo/kkb-minimal-inference"
    assert (result.code_dataset, result.weights_dataset) == ("kkb-demo/kkb-minimal-inference-code", "kkb-demo/kkb-minimal-inference-weights")
    code = _tree(result.code_dir)
    assert {"predict.py", "minimal/model.py", "kkb_kernel.json", "kkb_runtime/__init__.py", "manifest.json", "dataset-metadata.json"} <= set(code)
    assert set(_tree(result.weights_dir)) == {"weights/linear.json", "weights/ridge.json", "manifest.json", "dataset-metadata.json"}
    metadata = json.loads((result.kernel_dir / "kernel-metadata.json").read_text())
    assert metadata["enable_internet"] is False and metadata["is_private"] is True
    assert metadata["code_file"] == "kkb-minimal-inference.ipynb" and metadata["competition_sources"] == ["kkb-minimal"]
    assert metadata["dataset_sources"] == [result.code_dataset, result.weights_dataset]
    assert "machine_shape" not in metadata and metadata["enable_gpu"] is False
    manifest = json.loads((result.weights_dir / "manifest.json").read_text())
    assert manifest["content_hash"] == result.weights_hash and [f["path"] for f in manifest["files"]] == ["weights/linear.json", "weights/ridge.json"]
    dataset = json.loads((result.code_dir / "dataset-metadata.json").read_text())
    assert dataset == {"id": result.code_dataset, "licenses": [{"name": "CC0-1.0"}], "title": "KKB Minimal Inference code"}


def test_gpu_kernel_gets_t4_not_p100(minimal: Path, tmp_path: Path) -> None:
    spec = (minimal / "kernel.toml").read_text().replace('accelerator = "none"', 'accelerator = "gpu"')
    (minimal / "kernel.toml").write_text(spec)
    metadata = json.loads((_build(minimal, tmp_path / "out").kernel_dir / "kernel-metadata.json").read_text())
    assert (metadata["enable_gpu"], metadata["machine_shape"]) == (True, "NvidiaTeslaT4")


def test_build_is_deterministic(minimal: Path, tmp_path: Path) -> None:
    first = _tree(_build(minimal, tmp_path / "one").out_dir)
    second = _tree(_build(minimal, tmp_path / "two").out_dir)
    first.pop(".kkb-hashes.json"), second.pop(".kkb-hashes.json")  # a local stat cache, not uploaded
    assert first == second


def test_content_hash_changes_when_and_only_when_content_changes(minimal: Path, tmp_path: Path) -> None:
    before = _build(minimal, tmp_path / "out")
    (minimal / "predict.py").touch()  # new mtime, same bytes
    same = _build(minimal, tmp_path / "out")
    assert (same.code_hash, same.weights_hash) == (before.code_hash, before.weights_hash)
    (minimal / "predict.py").write_text((minimal / "predict.py").read_text() + "\n# changed\n")
    code_only = _build(minimal, tmp_path / "out")
    assert code_only.code_hash != before.code_hash and code_only.weights_hash == before.weights_hash
    (minimal / "weights/ridge.json").write_text('{"coefficients": {}, "intercept": 0}')
    assert _build(minimal, tmp_path / "out").weights_hash != before.weights_hash


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"kaggle.json": '{"username": "u", "key": "k"}'}, "kaggle.json: looks like a credential file; refusing to put it in the code dataset"),
        ({".env": "KAGGLE_KEY=abc"}, ".env: looks like a credential file; refusing to put it in the code dataset"),
        ({"config.py": "KAGGLE_KEY = 'abc'\n"}, "config.py: sets KAGGLE_KEY; refusing to put it in the code dataset"),
        ({"deploy.txt": "-----BEGIN RSA PRIVATE KEY-----\nabc\n"}, "deploy.txt: holds a private key; refusing to put it in the code dataset"),
    ],
)
def test_credentials_are_refused_and_nothing_is_written(minimal: Path, tmp_path: Path, files: dict, message: str) -> None:
    build_file_tree(minimal, files)
    spec = (minimal / "kernel.toml").read_text().replace('include = ["predict.py"', f'include = ["{next(iter(files))}", "predict.py"')
    (minimal / "kernel.toml").write_text(spec)
    with pytest.raises(BundleError) as caught:
        _build(minimal, tmp_path / "out" / "minimal")
    assert caught.value.message == message
    assert "abc" not in str(caught.value)  # the secret itself is never repeated
    assert not (tmp_path / "out").exists()  # nothing written: no half-written build, no staging left behind


def test_failed_build_keeps_the_previous_one(minimal: Path, tmp_path: Path) -> None:
    good = _build(minimal, tmp_path / "out")
    before = _tree(good.out_dir)
    (minimal / "weights/linear.json").unlink()
    with pytest.raises(BundleError, match=r"\[weights\] include pattern 'weights/\*.json' matches no file|missing"):
        (minimal / "weights/ridge.json").unlink()
        _build(minimal, tmp_path / "out")
    assert _tree(good.out_dir) == before
    assert [p.name for p in tmp_path.joinpath("out").parent.iterdir() if p.name.startswith(".out")] == []


def test_symlink_out_of_the_kernel_is_refused(minimal: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("x = 1\n")
    (minimal / "minimal" / "linked.py").symlink_to(tmp_path / "outside.py")
    with pytest.raises(BundleError, match=r"minimal/linked.py: resolves to .*outside the kernel folder"):
        _build(minimal, tmp_path / "out")


def test_missing_checkpoint_names_the_model(minimal: Path, tmp_path: Path) -> None:
    with (minimal / "kernel.toml").open("a") as spec:
        spec.write('\n[[models]]\nname = "net"\narch = "test_efficientnet"\ncheckpoint = "weights/net.pt"\nnum_classes = 2\n')
    with pytest.raises(BundleError) as caught:
        _build(minimal, tmp_path / "out")
    assert caught.value.message.endswith("kernel.toml: models.net.checkpoint: missing weight file weights/net.pt")


def test_owner_comes_from_credentials_only_when_needed(minimal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = (minimal / "kernel.toml").read_text().replace('owner = "kkb-demo"\n', "")
    (minimal / "kernel.toml").write_text(spec)
    with pytest.raises(SpecError, match=r"\[kernel\] owner is not set and no Kaggle username was found"):
        _build(minimal, tmp_path / "out")
    monkeypatch.setenv("KAGGLE_USERNAME", "someone")
    assert _build(minimal, tmp_path / "out").kernel_id == "someone/kkb-minimal-inference"
    monkeypatch.delenv("KAGGLE_USERNAME")
    config = Path(__import__("os").environ["KAGGLE_CONFIG_DIR"])
    build_file_tree(config, {"kaggle.json": json.dumps({"username": "fromfile", "key": "0" * 32})})
    assert _build(minimal, tmp_path / "out").kernel_id == "fromfile/kkb-minimal-inference"


def test_template_override_and_strict_undefined(minimal: Path, tmp_path: Path) -> None:
    build_file_tree(minimal, {"templates/70_round.py.j2":
                              '{% extends "kkb/70_round.py.j2" %}{% block body %}# custom rounding\n{{ super() }}{% endblock %}'})
    notebook = nbformat.read(_build(minimal, tmp_path / "out").notebook_path, 4)
    assert notebook.cells[7].source.startswith("# custom rounding\n# kkb: round to 4 decimals")
    build_file_tree(minimal, {"templates/70_round.py.j2": "{{ no_such_variable }}"})
    with pytest.raises(TemplateError, match=r"template 70_round.py.j2: 'no_such_variable' is undefined"):
        _build(minimal, tmp_path / "out2")


def test_golden_notebook(update_golden: bool, tmp_path: Path) -> None:
    result = _build(KERNELS / "minimal", tmp_path / "out")
    nbformat.validate(nbformat.read(result.notebook_path, 4))
    notebook = json.loads(result.notebook_path.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    assert [c["id"] for c in notebook["cells"]] == ["kkb-provenance", "kkb-environment", "kkb-inputs", "kkb-install",
                                                   "kkb-fast-commit", "kkb-steps", "kkb-combine", "kkb-round", "kkb-write"]
    rendered = normalize_provenance(result.notebook_path.read_text())
    golden = GOLDEN / "minimal.ipynb"
    if update_golden:
        golden.write_text(rendered)
    assert golden.exists(), f"{golden} is missing: render it once with pytest --update-golden and check it"
    assert rendered == golden.read_text(), "rendered notebook changed: check it, then run pytest --update-golden"


def test_kkb_build_from_inside_the_kernel_folder_never_bundles_its_own_output(minimal: Path) -> None:
    """``kkb build .`` builds into ``build/NAME`` inside the kernel folder: a second build with ``**/*.py`` leaves it out."""
    spec = (minimal / "kernel.toml").read_text().replace('include = ["predict.py", "minimal/**/*.py"]', 'include = ["**/*.py"]')
    (minimal / "kernel.toml").write_text(spec)
    for _ in range(2):
        run = kkb("build", ".", cwd=minimal)
        assert run.returncode == 0, said(run)
    manifest = json.loads((minimal / "build" / minimal.name / "code" / "manifest.json").read_text())
    assert [entry["path"] for entry in manifest["files"] if not entry["path"].startswith("kkb_runtime/")] == [
        "kkb_kernel.json", "minimal/__init__.py", "minimal/model.py", "predict.py"]
