"""``kkb init --competition``: a kernel project from the sample submission that builds and dry-runs as generated."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import cli
from builder.errors import SpecError
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.project.init import init_from_competition, init_from_folder
from builder.project.spec import load_spec
from builder.rehearse.dryrun import DryRunSettings, dry_run
from tests.support.demo_kaggle import serve_local_kaggle
from tests.support.files import KERNELS

PUBLIC = KERNELS / "minimal" / "data" / "competition" / "public"
USER, KEY = "kkb-demo", "local-test-key-0123456789"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


def test_generated_project_builds_and_dry_runs(tmp_path: Path) -> None:
    data = Path(shutil.copytree(PUBLIC, tmp_path / "kernels" / "new" / "data"))
    result = init_from_competition(tmp_path / "kernels" / "new", "kkb-minimal", data)
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
def test_unknown_competition_download_names_the_fix(server: LocalKaggle, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", str(tmp_path / "k"), "--competition", "no-such-thing"]) == 3
    err = capsys.readouterr().err
    assert "HTTP 404 while downloading the competition data no-such-thing" in err and "pass --data DIR" in err


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
        init_from_competition(kernel, slug, data)
    assert (caught.value.message, caught.value.hint) == (message.format(kernel=kernel, data=data), hint)
    assert setup == "existing" or not kernel.exists()  # nothing half-written


def test_init_from_needs_a_pulled_folder(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        init_from_folder(tmp_path / "kernel", tmp_path)
    assert caught.value.message == f"{tmp_path / 'kernel-metadata.json'}: file not found"
    assert caught.value.hint == "pass --from a folder written by `kaggle kernels pull OWNER/SLUG -p DIR -m`"


def test_init_without_a_source_is_a_usage_error(tmp_path: Path) -> None:
    assert cli.main(["init", str(tmp_path / "k")]) == 64
