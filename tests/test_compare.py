"""Two submissions compared by id, column by column: the library, ``kkb compare``, the last scored output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder.cli import main
from builder.errors import EXIT_KERNEL, EXIT_OK, KkbError
from builder.project.compare import HEADER, compare_files, default_tolerance
from builder.remote.history import SCORE, SUBMISSION, History
from builder.remote.outputs import OUTPUT, CompareSettings, compare_submissions, last_scored_output
from tests.support.files import KERNELS


def _write(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"qa_id": [f"{i:03d}" for i in range(40)], "a": rng.random(40).round(6),
                          "b": rng.random(40).round(6), "c": rng.random(40).round(6)})
    return _write(tmp_path / "a.csv", frame), frame


def test_an_equal_file_passes_with_every_column_listed(pair: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    path, frame = pair
    shuffled = _write(tmp_path / "b.csv", frame.sample(frac=1.0, random_state=1))  # rows matched by id, not position
    result = compare_files(path, shuffled, "qa_id", decimals=6)
    assert result.ok and result.rows == 40 and result.failures() == []
    assert [c.column for c in result.columns] == ["a", "b", "c"]
    assert all(c.max_abs == 0.0 and c.beyond == 0 and c.pearson == pytest.approx(1.0) for c in result.columns)
    assert result.tolerance == pytest.approx(1e-6) and "decimals = 6" in result.tolerance_basis


def test_one_column_perturbed_by_a_hundredth_fails_naming_it(pair: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    path, frame = pair
    other = _write(tmp_path / "b.csv", frame.assign(b=frame["b"] + 0.01))
    result = compare_files(path, other, "qa_id", decimals=6)
    assert not result.ok
    assert result.worst()[0].column == "b" and result.worst()[0].beyond == 40
    assert result.worst()[0].max_abs == pytest.approx(0.01) and result.worst()[0].mean_abs == pytest.approx(0.01)
    assert result.failures() == ["b (40 of 40 rows beyond 1e-06, max 0.01)"]
    lines = result.lines()
    assert lines[1].split() == ["column", "max", "|diff|", "mean", "|diff|", "rows", "beyond", "pearson", "spearman"]
    assert lines[2].split()[0] == "b" and lines[2].split()[3] == "40"  # worst first


def test_rounding_to_the_decimals_is_within_the_default_tolerance(pair: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    path, frame = pair
    rounded = _write(tmp_path / "b.csv", frame.assign(a=frame["a"].round(4)))
    assert compare_files(path, rounded, "qa_id", decimals=4).ok
    assert not compare_files(path, rounded, "qa_id", decimals=6).ok
    assert default_tolerance(None) == (1e-6, "1e-06 (no rounding configured)")


@pytest.mark.parametrize(("sample_ids", "left_ids", "right_ids", "equal"), [
    pytest.param(["1", "2"], ["1", "2"], ["1.0", "2.0"], True, id="integer-ids-7-and-7.0-are-one-id"),
    pytest.param(["001", "002"], ["001", "002"], ["1", "2"], False, id="text-ids-007-and-7-differ"),
    pytest.param(["a1", "a2"], ["a1", "a2"], ["a2", "a1"], True, id="text-ids-any-order"),
])
def test_ids_are_compared_as_the_sample_types_them(tmp_path: Path, sample_ids: list[str], left_ids: list[str],
                                                   right_ids: list[str], equal: bool) -> None:
    sample = tmp_path / "sample.csv"
    sample.write_text("id,t\n" + "".join(f"{i},0\n" for i in sample_ids))
    values = dict(zip(left_ids, (0.25, 0.5), strict=True))
    left = tmp_path / "l.csv"
    left.write_text("id,t\n" + "".join(f"{i},{values[i]}\n" for i in left_ids))
    right = tmp_path / "r.csv"
    right.write_text("id,t\n" + "".join(f"{i},{values.get(i, values.get(left_ids[k]))}\n" for k, i in enumerate(right_ids)))
    assert compare_files(left, right, "id", sample=sample).ok is equal


def test_missing_ids_columns_and_label_columns_are_named(tmp_path: Path) -> None:
    left = _write(tmp_path / "l.csv", pd.DataFrame({"id": [1, 2, 3], "label": ["x", "y", "z"], "p": [0.1, 0.2, 0.3]}))
    right = _write(tmp_path / "r.csv", pd.DataFrame({"id": [1, 2, 4], "label": ["x", "Y", "z"], "q": [0.1, 0.2, 0.3]}))
    result = compare_files(left, right)
    assert result.id_column == "id" and result.rows == 2
    assert result.failures() == ["label (1 of 2 rows beyond 1e-06)", f"1 id(s) only in {left} (3)",
                                 f"1 id(s) only in {right} (4)", f"column(s) only in {left}: p", f"column(s) only in {right}: q"]


@pytest.mark.parametrize(("content", "message"), [
    pytest.param("id,t\n1,0.5\n1,0.6\n", "id 1 appears more than once in 'id'", id="duplicate-id"),
    pytest.param("key,t\n1,0.5\n", "no id column 'id' (it has: key, t)", id="no-id-column"),
])
def test_bad_files_are_refused_naming_them(tmp_path: Path, content: str, message: str) -> None:
    good = tmp_path / "good.csv"
    good.write_text("id,t\n1,0.5\n")
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    with pytest.raises(KkbError) as caught:
        compare_files(good, bad, "id")
    assert caught.value.message == f"{bad}: {message}"


def test_kkb_compare_prints_the_table_and_exits_2_when_they_differ(pair: tuple[Path, pd.DataFrame], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path, frame = pair
    same = _write(tmp_path / "same.csv", frame)
    other = _write(tmp_path / "other.csv", frame.assign(c=frame["c"] + 0.01))
    assert main(["compare", str(path), str(same)]) == EXIT_OK
    assert main(["compare", str(path), str(other)]) == EXIT_KERNEL
    out = capsys.readouterr()
    expected = compare_files(path, other).lines()
    assert [line.rstrip() for line in expected] == [line for line in out.out.splitlines()[-len(expected):]]
    assert "differs from" in out.err and "c (40 of 40 rows beyond 1e-06" in out.err
    assert main(["compare", str(path), str(other), "--tolerance", "0.02"]) == EXIT_OK
    capsys.readouterr()
    assert main(["compare", str(path), str(other), "--json"]) == EXIT_KERNEL
    payload = json.loads(capsys.readouterr().out)
    assert payload["worst"] == ["c"] and payload["ok"] is False
    assert HEADER[0] == "column"


def _scored(kernel: Path, version: int, ref: int, score: str, frame: pd.DataFrame) -> None:
    history = History.for_kernel(kernel)
    kept = kernel / ".kkb" / "outputs" / f"k-v{version}.submission.csv"
    kept.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(kept, index=False)
    history.append(OUTPUT, kernel="me/k", kernel_version=version, file=str(kept.relative_to(kernel)))
    history.append(SUBMISSION, ref=ref, kernel="me/k", kernel_version=version)
    history.append(SCORE, ref=ref, status="complete", public_score=score)


def test_kkb_compare_against_the_last_scored_version(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    sample = pd.read_csv(kernel / "data/competition/public/sample_submission.csv")
    with pytest.raises(KkbError, match="no scored version with a kept output"):
        last_scored_output(kernel)
    _scored(kernel, 7, 70, "0.412", sample.assign(target=0.5))
    _scored(kernel, 8, 80, "0.420", sample.assign(target=0.25))
    History.for_kernel(kernel).append(SUBMISSION, ref=90, kernel="me/k", kernel_version=9)  # not scored (yet)
    assert last_scored_output(kernel).kernel_version == 8
    new = _write(tmp_path / "new.csv", sample.assign(target=0.25 + 1e-5))  # within decimals = 4
    result = compare_submissions(CompareSettings(left=new, kernel_dir=kernel))
    assert result.ok and result.right == "v8 (0.420)" and "decimals = 4" in result.tolerance_basis
    assert main(["compare", str(new), "--kernel", str(kernel)]) == EXIT_OK
    moved = _write(tmp_path / "moved.csv", sample.assign(target=0.26))
    assert main(["compare", str(moved), "--kernel", str(kernel)]) == EXIT_KERNEL


def test_a_parquet_submission_compares_like_a_csv(pair: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path, frame = pair
    frame.to_parquet(tmp_path / "b.parquet", index=False)
    assert compare_files(path, tmp_path / "b.parquet", "qa_id", decimals=6).ok
    frame.assign(a=frame["a"] + 0.5).to_parquet(tmp_path / "c.parquet", index=False)
    assert compare_files(path, tmp_path / "c.parquet", "qa_id", decimals=6).worst()[0].column == "a"
