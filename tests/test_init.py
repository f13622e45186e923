"""``kkb init --competition``: a kernel project from the sample submission that builds and dry-runs as generated."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import cli
from builder.build import BuildSettings, build_kernel
from builder.errors import RemoteError, SpecError
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.project.init import InitSettings, init_from_competition, init_from_folder, init_project
from builder.project.spec import load_spec
from builder.rehearse.dryrun import DryRunSettings, dry_run
from tests.support.demo_kaggle import serve_local_kaggle
from tests.support.files import KERNELS
from tests.support.pulled import pulled_kernel

PUBLIC = KERNELS / "minimal" / "data" / "competition" / "public"
USER, KEY = "kkb-demo", "local-test-key-0123456789"
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


def _compare_golden(text: str, name: str, update: bool) -> None:
    path = GOLDEN / name
    if update:
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed: rerun with --update-golden if that is intended"


def test_generated_project_builds_and_dry_runs(tmp_path: Path) -> None:
    data = Path(shutil.copytree(PUBLIC, tmp_path / "kernels" / "new" / "data"))
    result = init_from_competition(tmp_path / "kernels" / "new", "kkb-minimal", data, owner=USER)
    assert [path.name for path in result.written] == ["kernel.toml", "predict.py"]
    assert (result.id_column, [(c.name, c.dtype) for c in result.targets]) == ("id", [("target", "float64")])
    spec = load_spec(tmp_path / "kernels" / "new")
    assert (spec.competition.data, spec.competition.test, spec.submission.target_columns) == ("data", "test.csv", ["target"])
    text = (tmp_path / "kernels" / "new" / "kernel.toml").read_text()
    for section in ("[kernel]", "[competition]", "[code]", "[weights]", "[install]", "# [[models]]", "# [[inputs]]",
                    "[[steps]]", "[submission]", "[fast_commit]", "# [evaluation_api]"):
        assert f"\n{section}" in text
    report = dry_run(DryRunSettings(kernel_dir=tmp_path / "kernels" / "new", out_dir=tmp_path / "build"))
    assert report.ok, report.to_json()
    assert [s.scenario for s in report.scenarios] == ["commit", "rerun"]
    assert report.scenarios[1].steps[0]["name"] == "predict"  # the rerun ran predict.py, and its output passed


def test_the_scaffold_for_a_competition_sample_is_the_golden_one(tmp_path: Path, update_golden: bool) -> None:
    data = Path(shutil.copytree(PUBLIC, tmp_path / "new" / "data" / "kkb-minimal"))
    init_from_competition(tmp_path / "new", "kkb-minimal", data, owner=USER)
    _compare_golden((tmp_path / "new" / "kernel.toml").read_text(), "init_competition.kernel.toml", update_golden)
    _compare_golden((tmp_path / "new" / "predict.py").read_text(), "init_competition.predict.py", update_golden)


def test_the_scaffold_for_a_pulled_folder_is_the_golden_one(tmp_path: Path, update_golden: bool) -> None:
    init_from_folder(tmp_path / "new", pulled_kernel(tmp_path / "pulled"))
    _compare_golden((tmp_path / "new" / "kernel.toml").read_text(), "init_from.kernel.toml", update_golden)
    _compare_golden((tmp_path / "new" / "notebook.py").read_text(), "init_from.notebook.py", update_golden)


@pytest.mark.parametrize("path", ["competition", "from-with-data", "from-without-data", "from-own-datasets-only",
                                  "from-repeated-slugs"])
def test_every_init_path_writes_a_project_that_builds(tmp_path: Path, path: str) -> None:
    kernel = tmp_path / "new"
    if path == "competition":
        init_from_competition(kernel, "kkb-minimal", Path(shutil.copytree(PUBLIC, tmp_path / "data")), owner=USER)
    elif path == "from-with-data":
        init_from_folder(kernel, pulled_kernel(tmp_path / "pulled"), data_dir=PUBLIC)
    elif path == "from-without-data":
        init_from_folder(kernel, pulled_kernel(tmp_path / "pulled"))
    elif path == "from-own-datasets-only":
        init_from_folder(kernel, pulled_kernel(tmp_path / "pulled", dataset_sources=[
            "kkb-demo/my-inference-weights", "kkb-demo/my-inference-code"]))
    else:
        init_from_folder(kernel, pulled_kernel(tmp_path / "pulled", dataset_sources=["alice/timm-pkg", "bob/timm-pkg"],
                                               model_sources=["alice/bert/pytorch/base/1", "alice/bert/pytorch/large/2"]))
    built = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert built.kernel_id == f"{USER}/{load_spec(kernel).kernel.kernel_slug}"


def test_without_data_the_sample_defines_the_targets_and_the_next_steps_name_what_works(tmp_path: Path) -> None:
    kernel = tmp_path / "new"
    result = init_from_folder(kernel, pulled_kernel(tmp_path / "pulled"))
    spec = load_spec(kernel)
    assert (spec.competition.data, spec.submission.target_columns) == ("data/kkb-minimal", [])
    assert result.next_steps == (
        f"kkb build {kernel}",
        f"kaggle competitions download -c kkb-minimal -p {kernel}/data/kkb-minimal "
        f"&& unzip -o {kernel}/data/kkb-minimal/kkb-minimal.zip -d {kernel}/data/kkb-minimal",
        f"kaggle datasets download someone/timm-pkg --unzip -p {kernel}/inputs/timm-pkg",
        f"kaggle datasets download kkb-demo/my-inference-weights -p {kernel}/weights --unzip, then "
        f'[weights] include = ["weights/**"] in {kernel}/kernel.toml',
        f"kkb dry-run {kernel}",
    )
    # Following them works: the data and the stand-in in place, the dry run gets past its checks and runs.
    shutil.copytree(PUBLIC, kernel / "data" / "kkb-minimal")
    (kernel / "inputs" / "timm-pkg").mkdir(parents=True)
    report = dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "build", scenario=Scenario.COMMIT))
    assert [s.scenario for s in report.scenarios] == ["commit"]


def test_the_users_own_datasets_become_weights_and_code_with_a_suggested_card(tmp_path: Path) -> None:
    source = pulled_kernel(tmp_path / "pulled", dataset_sources=["kkb-demo/my-inference-weights/3", "kkb-demo/tools-code",
                                                                 "someone/timm-pkg"])
    result = init_from_folder(tmp_path / "new", source, data_dir=PUBLIC)
    spec = load_spec(tmp_path / "new")
    assert (spec.weights.dataset, spec.code.dataset) == ("kkb-demo/my-inference-weights", "kkb-demo/tools-code")
    assert [item.ref for item in spec.inputs] == ["someone/timm-pkg"]
    assert ("/kaggle/input/my-inference-weights/model.pth", "[weights] kkb-demo/my-inference-weights, built by kkb "
            "(read it from $KKB_WEIGHTS_DIR/weights/...)") in [(read.path, read.input) for read in result.reads]
    assert any(note.startswith("kkb-demo/my-inference-weights is your own weights dataset: kkb builds it as [weights] "
                               "dataset (not an input)") for note in result.notes)
    text = (tmp_path / "new" / "kernel.toml").read_text()
    assert "# [[models]]  # the code builds timm 'resnet18'" in text
    assert '# arch = "resnet18"' in text and '# checkpoint = "weights/model.pth"' in text


def test_integer_zero_placeholders_of_several_targets_are_written_as_floats(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sample_submission.csv").write_text("StudyInstanceUID,ETT - Abnormal,ETT - Normal,CVC - Normal\n"
                                                "1.2.3,0,0,0\n1.2.4,0,0,0\n")
    assert cli.main(["init", str(tmp_path / "new"), "--competition", "kkb-clip", "--data", str(data), "--owner", USER]) == 0
    spec = load_spec(tmp_path / "new")
    assert spec.submission.column_types == {"ETT - Abnormal": "float", "ETT - Normal": "float", "CVC - Normal": "float"}
    text = (tmp_path / "new" / "kernel.toml").read_text()
    assert ("# the sample holds integer 0s in ETT - Abnormal, ETT - Normal, CVC - Normal: placeholders of probabilities "
            "(the scorer reads the predictions as numbers), so kkb writes them as floats; set \"int\" if the competition "
            "scores labels\ncolumn_types = { ") in text
    assert "'ETT - Abnormal': 'float64'" in (tmp_path / "new" / "predict.py").read_text()
    out = capsys.readouterr().out
    assert "ETT - Abnormal (int64 -> float)" in out and '[submission] column_types: ETT - Abnormal, ETT - Normal, CVC - ' \
        'Normal = "float"' in out


def test_one_integer_target_is_only_noted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sample_submission.csv").write_text("ImageId,Label\n1,0\n2,0\n")
    result = init_from_competition(tmp_path / "new", "digit-recognizer", data, owner=USER)
    assert load_spec(tmp_path / "new").submission.column_types == {}
    assert result.notes == ("target 'Label' is an integer column in the sample: if the competition scores probabilities "
                            "(AUC, log loss), set [submission] column_types = { Label = \"float\" }",)


@pytest.mark.loopback
def test_downloads_the_competition_data_through_the_client(server: LocalKaggle, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    kernel = tmp_path / "kernels" / "new"
    assert cli.main(["init", str(kernel), "--competition", "kkb-minimal"]) == 0
    assert (kernel / "data" / "kkb-minimal" / "sample_submission.csv").read_bytes() == (PUBLIC / "sample_submission.csv").read_bytes()
    spec = load_spec(kernel)
    assert (spec.kernel.owner, spec.competition.data) == (USER, "data/kkb-minimal")
    assert "targets target (float64)" in capsys.readouterr().out


@pytest.mark.loopback
def test_unknown_competition_download_names_the_fix_and_leaves_nothing(server: LocalKaggle, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", str(tmp_path / "k"), "--competition", "no-such-thing"]) == 3
    err = capsys.readouterr().err
    assert "HTTP 404 while downloading the competition data no-such-thing" in err and "pass --data DIR" in err
    assert not (tmp_path / "k").exists()


def test_a_failed_download_removes_only_the_folders_it_created(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()

    def download(kernel_dir: Path, slug: str) -> Path:
        (kernel_dir / "data" / slug).mkdir(parents=True)
        raise RemoteError("HTTP 403 while downloading the competition data kkb-minimal", hint="accept the rules")

    with pytest.raises(RemoteError):
        init_project(InitSettings(kernel_dir=tmp_path / "kernels" / "new", competition="kkb-minimal", owner=USER), download)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kernels"]


@pytest.mark.parametrize("slug", ["../../escape-me", "/tmp/anywhere", "C/Foo", "kkb-minimal/../../x", ""])
def test_a_bad_slug_is_refused_before_anything_touches_the_disk(tmp_path: Path, slug: str) -> None:
    calls: list[str] = []

    def download(kernel_dir: Path, competition: str) -> Path:
        calls.append(competition)
        return kernel_dir

    kernel = tmp_path / "a" / "b" / "new"
    with pytest.raises(SpecError) as caught:
        init_project(InitSettings(kernel_dir=kernel, competition=slug, owner=USER), download)
    assert (caught.value.message, caught.value.hint) == (
        f"'{slug}' is not a competition slug (lowercase letters, digits and '-')",
        "use the name in the competition's URL: kaggle.com/competitions/<slug>")
    assert calls == [] and list(tmp_path.iterdir()) == []


def test_the_command_refuses_an_escaping_slug_before_it_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "kernels/new", "--competition", "../../escape-me", "--owner", USER]) == 1
    assert "'../../escape-me' is not a competition slug" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "escape-me").exists()


def test_without_data_or_a_download_the_library_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        init_project(InitSettings(kernel_dir=tmp_path / "new", competition="kkb-minimal", owner=USER))
    assert (caught.value.message, caught.value.hint) == (
        "--competition kkb-minimal: no --data, and this caller cannot download", "pass --data DIR (the unpacked competition data)")


@pytest.mark.parametrize(
    ("setup", "message", "hint"),
    [
        pytest.param("existing", "{kernel}: already holds kernel.toml; kkb init does not overwrite a project",
                     "pick a new folder, e.g. kernels/<name>", id="existing"),
        pytest.param("no-sample", "{data}: no sample submission (looked for sample_submission.csv, "
                     "sample_submission.parquet; candidates: none)",
                     "pass --data the competition's data folder; kkb reads the submission's columns from its sample",
                     id="no-sample"),
        pytest.param("bad-slug", "'C/Foo' is not a competition slug (lowercase letters, digits and '-')",
                     "use the name in the competition's URL: kaggle.com/competitions/<slug>", id="bad-slug"),
        pytest.param("no-owner", "--owner: not given, and no Kaggle username in KAGGLE_USERNAME or kaggle.json",
                     "pass --owner YOUR_KAGGLE_USERNAME (it becomes [kernel] owner, which kkb build needs)", id="no-owner"),
    ],
)
def test_bad_init(tmp_path: Path, setup: str, message: str, hint: str) -> None:
    kernel, data = tmp_path / "kernel", Path(shutil.copytree(PUBLIC, tmp_path / "data"))
    slug = "C/Foo" if setup == "bad-slug" else "kkb-minimal"
    if setup == "existing":
        kernel.mkdir()
        (kernel / "kernel.toml").write_text("")
    if setup == "no-sample":
        (data / "sample_submission.csv").unlink()
    with pytest.raises(SpecError) as caught:
        init_from_competition(kernel, slug, data, owner=None if setup == "no-owner" else USER)
    assert (caught.value.message, caught.value.hint) == (message.format(kernel=kernel, data=data), hint)
    assert setup == "existing" or not kernel.exists()  # nothing half-written


def test_init_without_a_source_is_a_usage_error(tmp_path: Path) -> None:
    assert cli.main(["init", str(tmp_path / "k")]) == 64


def test_init_from_prints_what_it_mapped_and_the_next_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = tmp_path / "new"
    assert cli.main(["init", str(kernel), "--from", str(pulled_kernel(tmp_path / "pulled"))]) == 0
    out = capsys.readouterr().out
    assert "/kaggle/input/timm-pkg/timm.whl → dataset someone/timm-pkg (find_input('timm-pkg'))" in out
    assert "not mapped: my-inference.ipynb: '!pip install --no-index /kaggle/input/timm-pkg/timm.whl'" in out
    assert f"next: kkb build {kernel}\n" in out and out.rstrip().endswith(f"kkb dry-run {kernel}")
