"""``--rerun-scale``: a bigger hidden test made by replicating test rows and files under new ids."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from builder.errors import DryRunError
from builder.run.sandbox import scale_competition_data
from tests.support.files import build_file_tree


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"id": str})


def test_tabular_test_rows_are_replicated_with_new_ids_and_a_matching_sample(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "id,target\np0,0\np1,0\n",
        "test.csv": "id,x\np0,1.5\np1,2.5\n",
        "train.csv": "id,x,target\nq0,1,1\nq1,2,0\nq2,3,1\n",  # other ids: not a test table
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 3, id_column="id")

    sample, test = _csv(scaled.path / "sample_submission.csv"), _csv(scaled.path / "test.csv")
    assert scaled.rows == 6 and len(sample) == 6 and sample["id"].is_unique
    assert list(sample["id"]) == ["p0", "p1", "p0_r1", "p1_r1", "p0_r2", "p1_r2"]
    assert list(test["id"]) == list(sample["id"]) and list(test["x"]) == [1.5, 2.5] * 3
    assert (scaled.path / "train.csv").read_text() == (source / "train.csv").read_text()
    assert scaled.replicated == ("sample_submission.csv", "test.csv")
    # the source is never written through the hard links
    assert (source / "test.csv").read_text() == "id,x\np0,1.5\np1,2.5\n"
    assert (source / "sample_submission.csv").read_text() == "id,target\np0,0\np1,0\n"


def test_numeric_ids_stay_numeric(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {"sample_submission.csv": "id,target\n10,0\n11,0\n12,0\n",
                                                   "test.csv": "id,x\n10,1\n11,2\n12,3\n"})
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="id", test="test.csv")
    assert list(_csv(scaled.path / "test.csv")["id"]) == ["10", "11", "12", "23", "24", "25"]


def test_test_files_named_by_id_are_copied_under_new_names(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "image_id,label\nimg_a,0\nimg_b,0\n",
        "test.csv": "image_id,path\nimg_a,test_images/img_a.jpg\nimg_b,test_images/img_b.jpg\n",
        "test_images/img_a.jpg": b"\xff\xd8a", "test_images/img_b.jpg": b"\xff\xd8b",
        "test_series/img_a/0.dcm": b"dicom",
        "test_images/readme.txt": "not an image of the test",
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="image_id")

    images = sorted(path.name for path in (scaled.path / "test_images").iterdir())
    assert images == ["img_a.jpg", "img_a_r1.jpg", "img_b.jpg", "img_b_r1.jpg", "readme.txt"]
    assert (scaled.path / "test_images/img_b_r1.jpg").read_bytes() == b"\xff\xd8b"
    assert (scaled.path / "test_series/img_a_r1/0.dcm").read_bytes() == b"dicom"
    test = pd.read_csv(scaled.path / "test.csv")
    assert list(test["path"])[-1] == "test_images/img_b_r1.jpg"  # the table follows the renamed files
    assert len(_csv(scaled.path / "sample_submission.csv").rename(columns={"image_id": "id"})) == 4


def test_scale_one_is_a_plain_copy_and_bad_input_is_an_error(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {"sample_submission.csv": "id,target\na,0\n", "test.csv": "id,x\na,1\n"})
    scaled = scale_competition_data(source, tmp_path / "one", 1, id_column="id")
    assert (scaled.path / "test.csv").read_text().splitlines() == ["id,x", "a,1"]
    with pytest.raises(DryRunError, match="at least 1"):
        scale_competition_data(source, tmp_path / "zero", 0, id_column="id")
    with pytest.raises(DryRunError, match="no id column 'row_id'"):
        scale_competition_data(source, tmp_path / "bad", 2, id_column="row_id")


def test_ids_that_carry_an_extension_keep_it_last(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "image_id,label\nabc.jpg,4\nd.e.f.jpg,4\n",
        "test_images/abc.jpg": b"\xff\xd8a", "test_images/d.e.f.jpg": b"\xff\xd8d",
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="image_id", test="test_images")
    ids = list(pd.read_csv(scaled.path / "sample_submission.csv")["image_id"])
    assert ids == ["abc.jpg", "d.e.f.jpg", "abc_r1.jpg", "d.e.f_r1.jpg"]
    assert sorted(path.name for path in (scaled.path / "test_images").iterdir()) == [
        "abc.jpg", "abc_r1.jpg", "d.e.f.jpg", "d.e.f_r1.jpg"]
