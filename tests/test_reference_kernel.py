"""The reference kernel: generated assets, the build, and ``python -m kkb_runtime predict`` as a step runs it.

The assets are generated once (kernels/reference/make_assets.py skips work when they are up to
date), the kernel is built with build_kernel, and every step runs in a subprocess against the
built code dataset with the kernel-side environment variables, as the notebook runs it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")

from builder.build import BuildResult, BuildSettings, build_kernel
from tests.support.assets import make_assets
from tests.support.cli import build_every_way
from tests.support.files import KERNELS

REFERENCE = KERNELS / "reference"
COMPETITION = REFERENCE / "data" / "competition"
CLASSES = ["circle", "square", "triangle", "cross"]


@pytest.fixture(scope="session")
def reference_assets() -> Path:
    result = make_assets(REFERENCE, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return REFERENCE


@pytest.fixture(scope="module")
def built(reference_assets: Path, tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build_kernel(BuildSettings(kernel_dir=reference_assets, out_dir=tmp_path_factory.mktemp("build") / "reference",
                                      owner="tester"))


def step_env(built: BuildResult, competition: Path, out: Path | None = None, **extra: str) -> dict[str, str]:
    """What kkb_runtime.steps.run_step gives a step (no ambient PYTHONPATH: only the code dataset)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out.parent if out else competition), "PYTHONPATH": str(built.code_dir),
           "KKB_CODE_DIR": str(built.code_dir), "KKB_WEIGHTS_DIR": str(built.weights_dir),
           "KKB_COMPETITION_DIR": str(competition), "KKB_KERNEL_CONFIG": str(built.code_dir / "kkb_kernel.json"),
           "KKB_STEP_NAME": "test", **extra}
    if out is not None:
        env["KKB_STEP_OUT"] = str(out)
    return env


def run_step(built: BuildResult, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kkb_runtime", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def log_loss(predictions: pd.DataFrame) -> tuple[float, float]:
    answers = pd.read_csv(COMPETITION / "answers.csv", dtype={"id": str}).set_index("id")
    probs = predictions.set_index("id").loc[answers.index, CLASSES].to_numpy()
    truth = answers[CLASSES].to_numpy().argmax(1)
    picked = np.clip(probs[np.arange(len(truth)), truth], 1e-15, 1.0)
    return float(-np.log(picked).mean()), float((probs.argmax(1) == truth).mean())


# --- assets ------------------------------------------------------------------------------------------

def test_assets_follow_the_competition_format(reference_assets: Path) -> None:
    toml = (COMPETITION / "competition.toml").read_text()
    assert 'slug = "kkb-shapes"' in toml and 'metric = "logloss"' in toml and 'id_column = "id"' in toml
    public = pd.read_csv(COMPETITION / "public" / "sample_submission.csv", dtype={"id": str})
    hidden = pd.read_csv(COMPETITION / "hidden" / "sample_submission.csv", dtype={"id": str})
    answers = pd.read_csv(COMPETITION / "answers.csv", dtype={"id": str})
    assert list(public.columns) == list(hidden.columns) == list(answers.columns) == ["id", *CLASSES]
    assert len(public) < 11 <= len(hidden)  # the fast-commit guard tells them apart
    assert list(answers["id"]) == list(hidden["id"]) and (answers[CLASSES].sum(axis=1) == 1).all()
    assert all((COMPETITION / "hidden" / "test" / f"{image_id}.png").is_file() for image_id in hidden["id"])


def test_assets_are_seeded_and_not_regenerated(reference_assets: Path, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(REFERENCE / "make_assets.py")], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.startswith("reference assets up to date")
    saved = list(sys.path)
    try:  # the script puts its own folder on sys.path, as a kernel's code dataset would be
        spec = importlib.util.spec_from_file_location("make_assets_under_test", REFERENCE / "make_assets.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    module.write_competition(tmp_path, np.random.default_rng(module.SEED))
    for relative in ("answers.csv", "hidden/sample_submission.csv", "public/test/p0003.png", "hidden/test/h0299.png"):
        assert (tmp_path / relative).read_bytes() == (COMPETITION / relative).read_bytes(), relative


# --- the build ---------------------------------------------------------------------------------------

def test_the_build_normalises_both_checkpoints(built: BuildResult) -> None:
    config = json.loads((built.code_dir / "kkb_kernel.json").read_text())
    cards = {card["name"]: card for card in config["models"]}
    assert (cards["effnet"]["source_key"], cards["resnet"]["source_key"]) == ("state_dict", "model_ema")
    assert (cards["effnet"]["dtype"], cards["resnet"]["dtype"]) == ("float32", "float16")
    assert cards["effnet"]["custom_transforms"] == ["refkernel.transforms.BorderMask"]
    assert cards["effnet"]["normalize_in_pipeline"] and not cards["resnet"]["normalize_in_pipeline"]
    weights = sorted(p.relative_to(built.weights_dir).as_posix() for p in built.weights_dir.rglob("*") if p.is_file())
    assert weights == ["dataset-metadata.json", "manifest.json", "weights/effnet.safetensors", "weights/resnet.safetensors"]
    assert (built.code_dir / "kkb_runtime" / "__main__.py").is_file() and (built.code_dir / "refkernel" / "transforms.py").is_file()


# --- the predict step ----------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["effnet", "resnet"])
def test_predict_writes_a_valid_prediction_csv(built: BuildResult, tmp_path: Path, model: str) -> None:
    out = tmp_path / f"{model}.csv"
    result = run_step(built, ["predict", "--model", model, "--out", str(out)], step_env(built, COMPETITION / "hidden"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"[kkb] {model}: " in result.stdout and "on cpu" in result.stdout
    frame = pd.read_csv(out, dtype={"id": str})
    sample = pd.read_csv(COMPETITION / "hidden" / "sample_submission.csv", dtype={"id": str})
    assert list(frame.columns) == list(sample.columns)
    assert list(frame["id"]) == list(sample["id"])
    values = frame[CLASSES].to_numpy()
    assert np.isfinite(values).all() and np.allclose(values.sum(axis=1), 1.0, atol=1e-4)
    loss, accuracy = log_loss(frame)
    assert loss < 0.3 and accuracy > 0.9, (loss, accuracy)  # chance is ln 4 = 1.39 and 0.25


def test_row_limit_and_step_out(built: BuildResult, tmp_path: Path) -> None:
    out = tmp_path / "limited.csv"
    env = step_env(built, COMPETITION / "public", out, KKB_ROW_LIMIT="3")
    result = run_step(built, ["predict", "--model", "resnet"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    frame = pd.read_csv(out, dtype={"id": str})
    assert list(frame["id"]) == ["p0000", "p0001", "p0002"]


def test_an_unknown_model_is_one_error_line(built: BuildResult, tmp_path: Path) -> None:
    result = run_step(built, ["predict", "--model", "vit", "--out", str(tmp_path / "x.csv")],
                      step_env(built, COMPETITION / "public"), tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"kkb_runtime: error: no model named 'vit' in {built.code_dir / 'kkb_kernel.json'} (known: effnet, resnet)")


# --- the notebook's flow: both steps, ensembled --------------------------------------------------------

NOTEBOOK_FLOW = """
import json, kkb_runtime
run = kkb_runtime.start()
decision = run.fast_commit()
if not decision.fast:
    run.run_steps(); run.combine(); run.round(); run.check_and_write()
print(json.dumps(run.summary()))
"""


def sandbox(built: BuildResult, root: Path, data: Path) -> Path:
    """A Kaggle-like input tree: the competition and both datasets mounted where Kaggle puts them."""
    mounts = {"competitions/kkb-shapes": data,
              f"datasets/{built.code_dataset}": built.code_dir, f"datasets/{built.weights_dataset}": built.weights_dir}
    for target, source in mounts.items():
        (root / "input" / target).parent.mkdir(parents=True, exist_ok=True)
        (root / "input" / target).symlink_to(source)
    (root / "working").mkdir()
    return root


def run_notebook_flow(built: BuildResult, root: Path, rerun: bool) -> dict[str, Any]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "PYTHONPATH": str(built.code_dir), "KKB_KAGGLE_ROOT": str(root)}
    if rerun:
        env["KAGGLE_IS_COMPETITION_RERUN"] = "true"
    result = subprocess.run([sys.executable, "-c", NOTEBOOK_FLOW], cwd=root / "working", env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_rerun_ensembles_both_models(built: BuildResult, tmp_path: Path) -> None:
    root = sandbox(built, tmp_path, COMPETITION / "hidden")
    summary = run_notebook_flow(built, root, rerun=True)
    assert [step["name"] for step in summary["steps"]] == ["effnet", "resnet"]
    submission = pd.read_csv(root / "working" / "submission.csv", dtype={"id": str})
    assert len(submission) == 300
    assert submission[CLASSES].to_numpy().round(5).tolist() == submission[CLASSES].to_numpy().tolist()  # decimals = 5
    steps = [pd.read_csv(step["output"], dtype={"id": str}).set_index("id") for step in summary["steps"]]
    mean = ((steps[0] + steps[1]) / 2).round(5).loc[submission["id"]]
    assert np.allclose(submission[CLASSES].to_numpy(), mean[CLASSES].to_numpy(), atol=1e-5)
    loss, accuracy = log_loss(submission)
    assert loss < 0.15 and accuracy > 0.95, (loss, accuracy)


def test_the_commit_run_takes_the_fast_path(built: BuildResult, tmp_path: Path) -> None:
    root = sandbox(built, tmp_path, COMPETITION / "public")
    summary = run_notebook_flow(built, root, rerun=False)
    assert summary["fast_commit"] is True and summary["steps"] == []
    written = pd.read_csv(root / "working" / "submission.csv", dtype={"id": str})
    assert written.equals(pd.read_csv(COMPETITION / "public" / "sample_submission.csv", dtype={"id": str}))


def test_kkb_build_every_way_finds_the_build_unchanged(built: BuildResult, tmp_path: Path) -> None:
    """As people call it (from inside the folder, its parent, by absolute path, through a space and a symlink):
    the same build folder, nothing to prepare again."""
    build_every_way(REFERENCE, tmp_path, built.out_dir, env={"KAGGLE_USERNAME": "tester"})


def test_an_unchanged_rebuild_reuses_the_prepared_models(reference_assets: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Preparing loads every checkpoint with torch: a rebuild with nothing changed must not."""
    import shutil

    from builder.bundle import card_run

    kernel = Path(shutil.copytree(reference_assets, tmp_path / "reference", ignore=shutil.ignore_patterns(".kkb")))
    first = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out", owner="tester"))
    calls: list[int] = []
    original = card_run._sandboxed  # the build's sandboxed run of the cards: preparing, checking

    def counted(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(card_run, "_sandboxed", counted)
    again = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out", owner="tester"))
    assert calls == [] and (again.weights_hash, again.code_hash) == (first.weights_hash, first.code_hash)
    (kernel / "weights" / "effnet.pth").write_bytes((kernel / "weights" / "effnet.pth").read_bytes() + b"")  # same bytes
    build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out", owner="tester"))
    assert calls == []  # a new mtime alone does not count: the key is the content
    spec = (kernel / "kernel.toml").read_text().replace("batch_size = 64", "batch_size = 32", 1)
    (kernel / "kernel.toml").write_text(spec)
    changed = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out", owner="tester"))
    assert calls == [1] and changed.weights_hash == first.weights_hash and changed.code_hash != first.code_hash
