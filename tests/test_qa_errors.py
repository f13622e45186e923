"""Mistakes a user makes, found in exploratory QA: each gets one clear message, the right exit code,
and nothing lost or half-pushed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from builder import cli
from builder.errors import RemoteError, SpecError
from builder.project.spec import TTA_NAMES, parse_spec
from builder.remote.history import KERNEL_REFUSED, History
from builder.remote.kaggle_api import KaggleAdapter, KernelPushed
from builder.remote.push import push
from builder.remote.session import PushSettings
from tests.support.fake_kaggle import FAKE_WAITS, FakeKaggle
from tests.support.files import KERNELS


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _edit(kernel: Path, old: str, new: str) -> None:
    spec = kernel / "kernel.toml"
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))


def _error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 1) -> list[str]:
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err.strip().splitlines()


# -- --out: kkb build replaces its output folder, so it must never be a folder of the user's ------


def test_out_that_is_the_kernel_folder_is_refused_and_nothing_is_deleted(kernel: Path, capsys) -> None:
    before = sorted(p.name for p in kernel.iterdir())
    assert _error(capsys, ["build", str(kernel), "--out", str(kernel)]) == [
        f"error: build folder {kernel}: it holds the kernel project {kernel}, and kkb build replaces its output "
        "folder as a whole",
        "hint: pass --out a folder of its own, e.g. --out build/minimal (the default)",
    ]
    assert sorted(p.name for p in kernel.iterdir()) == before


def test_out_that_holds_other_files_is_refused_and_kept(kernel: Path, tmp_path: Path, capsys) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    assert _error(capsys, ["build", str(kernel), "--out", str(notes)]) == [
        f"error: build folder {notes}: not a kkb build folder (it holds todo.txt), and kkb build replaces its "
        "output folder as a whole",
        "hint: pass --out a new or empty folder, e.g. --out build/minimal (the default)",
    ]
    assert (notes / "todo.txt").read_text() == "mine"


def test_out_that_is_a_file_is_refused_and_kept(kernel: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "results.csv"
    target.write_text("id,target\n")
    assert _error(capsys, ["build", str(kernel), "--out", str(target)]) == [
        f"error: build folder {target}: this is a file, not a folder",
        "hint: pass --out a new or empty folder, e.g. --out build/minimal (the default)",
    ]
    assert target.read_text() == "id,target\n"


def test_out_that_cannot_be_created_is_a_user_error_not_an_internal_one(kernel: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    assert _error(capsys, ["build", str(kernel), "--out", str(blocker / "build")]) == [
        f"error: build folder {blocker / 'build'}: cannot write it: File exists ({blocker})",
        "hint: pass --out a folder you can write to",
    ]


def test_out_dot_is_refused_not_an_internal_error(kernel: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)  # replacing the current folder would leave the shell in a deleted folder
    assert _error(capsys, ["build", str(kernel), "--out", "."]) == [  # "." as kkb took it, at the door
        f"error: build folder {out}: it is (or holds) the current folder, and kkb build replaces its output folder as a whole",
        "hint: pass --out another folder, e.g. --out build/minimal",
    ]
    assert cli.main(["build", str(kernel), "--out", "b"]) == 0  # a folder below the current one is fine
    assert cli.main(["build", str(kernel), "--out", "b"]) == 0  # and a build folder is rebuilt in place
    assert (out / "b" / "kernel" / "kkb-minimal-inference.ipynb").is_file()


# -- kernel.toml mistakes the spec now catches before anything runs -------------------------------


def test_title_whose_slug_is_too_short(kernel: Path, capsys) -> None:
    _edit(kernel, 'title = "KKB Minimal Inference"', 'title = "A & B"')
    assert _error(capsys, ["build", str(kernel)]) == [
        f"error: {kernel / 'kernel.toml'}: kernel.title: 'A & B' gives the kernel slug 'a-b'; Kaggle needs a slug of "
        "at least 5 characters",
        "hint: use a title with at least 5 letters or digits; Kaggle derives the kernel slug from it",
    ]


def test_step_with_an_unknown_placeholder(kernel: Path, capsys) -> None:
    _edit(kernel, 'run = "python predict.py --weights ridge.json --out {out}"',
          'run = "python predict.py --weights ridge.json --out {output}"')
    assert _error(capsys, ["build", str(kernel)]) == [
        f"error: {kernel / 'kernel.toml'}: steps[1].run: unknown placeholder '{{output}}' (did you mean '{{out}}'?); "
        "the placeholders are {out}, {code}, {weights}, {data}, {python}",
        "hint: placeholders are filled in each argument: {out} {code} {weights} {data} {python}; "
        "see kernels/minimal/kernel.toml",
    ]


def test_step_with_an_unclosed_quote(kernel: Path, capsys) -> None:
    _edit(kernel, 'run = "python predict.py --weights ridge.json --out {out}"',
          "run = \"python predict.py --weights 'ridge.json --out {out}\"")
    assert _error(capsys, ["build", str(kernel)]) == [
        f"error: {kernel / 'kernel.toml'}: steps[1].run: cannot split \"python predict.py --weights 'ridge.json "
        "--out {out}\" into a command line: No closing quotation",
        "hint: close the quote, or escape it with a backslash; the run string is split like a shell command line",
    ]


def test_step_script_that_is_not_in_the_code_dataset(kernel: Path, capsys) -> None:
    _edit(kernel, 'run = "python predict.py --weights linear.json', 'run = "python predcit.py --weights linear.json')
    assert _error(capsys, ["build", str(kernel)]) == [
        f"error: {kernel / 'kernel.toml'}: steps[0].run: 'predcit.py' is not in the code dataset, so step 'linear' "
        "could not start",
        "hint: did you mean 'predict.py'?",
    ]


def test_step_script_that_exists_but_is_not_included(kernel: Path, capsys) -> None:
    _edit(kernel, 'include = ["predict.py", "minimal/**/*.py"]', 'include = ["minimal/**/*.py"]')
    assert _error(capsys, ["build", str(kernel)]) == [
        f"error: {kernel / 'kernel.toml'}: steps[0].run: 'predict.py' is not in the code dataset, so step 'linear' "
        "could not start",
        "hint: add 'predict.py' to [code] include",
    ]


_MODEL_SPEC = {
    "kernel": {"title": "model card tests", "owner": "me"}, "competition": {"slug": "kkb-shapes"},
    "models": [{"name": "effnet", "arch": "test_efficientnet", "checkpoint": "weights/e.pth", "num_classes": 4}],
    "steps": [{"name": "effnet", "run": "python -m kkb_runtime predict --model effnet --out {out}"}],
}


def _model_spec(**card: object) -> dict:
    spec = json.loads(json.dumps(_MODEL_SPEC))
    spec["models"][0].update(card)
    return spec


def test_predict_step_naming_no_model_card() -> None:
    spec = _model_spec()
    spec["steps"][0]["run"] = "python -m kkb_runtime predict --model effnett --out {out}"
    with pytest.raises(SpecError) as caught:
        parse_spec(spec, source="k/kernel.toml")
    assert (caught.value.message, caught.value.hint) == (
        "k/kernel.toml: [[steps]] 'effnet' predicts with --model 'effnett', which is no [[models]] name "
        "(did you mean 'effnet'?); the cards are: effnet",
        "make --model NAME match a [[models]] name = ... in kernel.toml",
    )
    parse_spec(_model_spec(), source="k/kernel.toml")  # the matching name is fine


def test_unknown_tta_name() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_model_spec(tta=["hflp"]), source="k/kernel.toml")
    assert (caught.value.message, caught.value.hint) == (
        "k/kernel.toml: models[0].tta: unknown TTA 'hflp' (did you mean 'hflip'?); use hflip, vflip, hvflip, "
        "transpose, rot90, rot180, rot270 or 'package.module:function'",
        "a TTA function of your own goes in the code dataset and is named 'package.module:function'",
    )
    parse_spec(_model_spec(tta=["vflip", "refkernel.tta:shift"]))  # built-ins and module:function are fine


def test_tta_names_match_the_runtime() -> None:
    from builder.kkb_runtime.cards.image.tta import BUILTIN_NAMES

    assert TTA_NAMES == BUILTIN_NAMES


# -- push: Kaggle's refusals say what to change ----------------------------------------------------


def test_dataset_refused_for_another_owner_names_the_signed_in_user(tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "dataset-metadata.json").write_text(json.dumps({"id": "kkb-demo/kkb-minimal-inference-weights"}))
    adapter = KaggleAdapter(api=SimpleNamespace(config_values={"username": "me"}))
    response = SimpleNamespace(error="You do not have permission to create datasets for 'kkb-demo'", status="error")
    with pytest.raises(RemoteError) as caught:
        adapter._dataset_pushed(response, "creating the dataset", folder)
    assert caught.value.hint == ("you are signed in as 'me', and 'kkb-demo' is not you: pass --owner me, "
                                 'or set [kernel] owner = "me" in kernel.toml')


def test_unknown_competition_names_the_key_to_fix() -> None:
    adapter = KaggleAdapter(api=SimpleNamespace())
    with pytest.raises(RemoteError) as caught:
        adapter._kernel_pushed(SimpleNamespace(error="", invalid_competition_sources=["kkb-minimall"]))
    assert (caught.value.message, caught.value.hint) == (
        "Kaggle did not attach these inputs to the kernel: competition sources ['kkb-minimall']",
        "check [competition] slug in kernel.toml: it is the name in the competition's URL "
        "(kaggle.com/competitions/<slug>), and you must have accepted its rules",
    )


class _RefusingKaggle(FakeKaggle):
    """Saves the kernel version, then reports that the competition was not attached (as Kaggle does)."""

    refuse: bool = True

    def push_kernel(self, folder: Path, *, timeout_seconds: int | None = None) -> KernelPushed:
        pushed = super().push_kernel(folder, timeout_seconds=timeout_seconds)
        if self.refuse:
            raise RemoteError("Kaggle did not attach these inputs to the kernel: competition sources ['kkb-minimal']")
        return pushed


def test_a_refused_kernel_push_is_pushed_again_not_adopted(kernel: Path) -> None:
    fake = _RefusingKaggle()
    settings = PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=fake, waits=FAKE_WAITS)  # type: ignore[arg-type]
    with pytest.raises(RemoteError):
        push(settings)
    assert History.for_kernel(kernel).last(KERNEL_REFUSED) is not None
    fake.refuse = False  # the user accepted the competition's rules and runs the push again
    fake.calls.clear()
    result = push(settings)
    assert fake.calls == ["kernel kkb-demo/kkb-minimal-inference"]  # a new version with its inputs, not v1
    assert (result.kernel_action, result.kernel_version) == ("pushed", 2)


def test_dry_run_checks_submission_columns_against_the_sample_first(tmp_path: Path) -> None:
    from builder.rehearse.dryrun import DryRunSettings, dry_run

    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "k", ignore=shutil.ignore_patterns(".kkb")))
    spec = (kernel / "kernel.toml").read_text().replace('target_columns = ["target"]', 'target_columns = ["Target"]')
    (kernel / "kernel.toml").write_text(spec)
    with pytest.raises(SpecError) as caught:
        dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "out"))
    sample = kernel / "data/competition/public/sample_submission.csv"
    assert caught.value.message == (f"{kernel / 'kernel.toml'}: submission.target_columns[0]: 'Target' is not a column "
                                    f"of {sample} (id, target)")
    assert caught.value.hint == "did you mean 'target'? the names must match the sample submission's header exactly"
