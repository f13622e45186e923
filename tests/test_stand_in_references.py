"""``--rerun-scale`` replicates what the test's rows reference: partitions, files and folders named by a key,
joined tables, an id composed of keys; what it cannot follow is refused by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from builder.errors import DryRunError
from builder.kkb_runtime.references import StandInConfig
from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.run.sandbox import scale_competition_data
from tests.support.files import build_file_tree


def optiver_like(root: Path, *, stocks: tuple[int, ...] = (0, 3), times: tuple[int, ...] = (4, 32, 34)) -> Path:
    """test.csv rows (stock_id, time_id, row_id) pointing at book_test.parquet/stock_id=N/ partitions, a train
    side with more stocks (never replicated), row_id = f"{stock_id}-{time_id}"."""
    rows = [(s, t) for s in stocks for t in times]
    build_file_tree(root, {
        "test.csv": "stock_id,time_id,row_id\n" + "".join(f"{s},{t},{s}-{t}\n" for s, t in rows),
        "sample_submission.csv": "row_id,target\n" + "".join(f"{s}-{t},0.003\n" for s, t in rows),
        "train.csv": "stock_id,time_id,target\n" + "".join(f"{s},{t},0.001\n" for s in range(6) for t in (5, 11)),
    })
    for stock in stocks:
        for side in ("book_test.parquet", "trade_test.parquet"):
            folder = root / side / f"stock_id={stock}"
            folder.mkdir(parents=True)
            pd.DataFrame({"time_id": [t for t in times for _ in range(4)],
                          "price": [1.0 + stock * 0.1 + t * 0.001 + i * 0.0001 for t in times for i in range(4)]},
                         ).to_parquet(folder / "part-0.parquet", index=False)
    for stock in range(6):
        folder = root / "book_train.parquet" / f"stock_id={stock}"
        folder.mkdir(parents=True)
        pd.DataFrame({"time_id": [5, 11], "price": [1.0, 1.1]}).to_parquet(folder / "part-0.parquet", index=False)
    return root


def test_hive_partitions_are_replicated_under_new_keys_and_the_composed_id_is_rebuilt(tmp_path: Path) -> None:
    source = optiver_like(tmp_path / "public")
    scaled = scale_competition_data(source, tmp_path / "scaled", 3, id_column="row_id")

    test = pd.read_csv(scaled.path / "test.csv")
    sample = pd.read_csv(scaled.path / "sample_submission.csv")
    # stock ids shift past the largest seen anywhere (book_train has 0..5): 6 per copy
    assert sorted(test["stock_id"].unique()) == [0, 3, 6, 9, 12, 15]
    assert list(test["row_id"]) == [f"{s}-{t}" for s, t in zip(test["stock_id"], test["time_id"], strict=True)]
    assert list(sample["row_id"]) == list(test["row_id"]) and scaled.rows == 18
    for side in ("book_test.parquet", "trade_test.parquet"):
        stocks = sorted(int(p.name.split("=")[1]) for p in (scaled.path / side).iterdir())
        assert stocks == [0, 3, 6, 9, 12, 15]
        assert (pd.read_parquet(scaled.path / side / "stock_id=9").equals(pd.read_parquet(source / side / "stock_id=3")))
    assert sorted(p.name for p in (scaled.path / "book_train.parquet").iterdir()) == [f"stock_id={s}" for s in range(6)]
    assert scaled.description == ("stand-in: test.csv rows x 3; book_test.parquet partitions by stock_id x 3; "
                                  "trade_test.parquet partitions by stock_id x 3; id rebuilt as {stock_id}-{time_id}; "
                                  "new stock_id per copy")
    assert sorted(p.name for p in (source / "book_test.parquet").iterdir()) == ["stock_id=0", "stock_id=3"]


def test_files_named_by_a_key_column_follow_their_rows(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "row_id,label\nr0,0\nr1,0\nr2,0\n",
        "test.csv": "row_id,clip_id,start\nr0,clipA,0\nr1,clipA,5\nr2,clipB,0\n",
        "test_audio/clipA.npy": b"A", "test_audio/clipB.npy": b"B", "train_audio/clipA.npy": b"train",
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="row_id")

    test = pd.read_csv(scaled.path / "test.csv")
    assert list(test["clip_id"]) == ["clipA", "clipA", "clipB", "clipA_r1", "clipA_r1", "clipB_r1"]
    assert (scaled.path / "test_audio/clipB_r1.npy").read_bytes() == b"B"
    assert sorted(p.name for p in (scaled.path / "train_audio").iterdir()) == ["clipA.npy"]
    assert "test_audio files by clip_id x 2" in scaled.description


def test_a_key_that_is_a_file_name_keeps_its_extension(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "id,label\np0,0\np1,0\n",
        "test.csv": "id,image\np0,a.jpg\np1,b.jpg\n",
        "test_images/a.jpg": b"\xff\xd8a", "test_images/b.jpg": b"\xff\xd8b",
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="id")

    assert list(pd.read_csv(scaled.path / "test.csv")["image"]) == ["a.jpg", "b.jpg", "a_r1.jpg", "b_r1.jpg"]
    assert (scaled.path / "test_images/b_r1.jpg").read_bytes() == b"\xff\xd8b"


def test_per_id_folders_are_copied_under_new_keys(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "row_id,score\n10_0,0\n10_1,0\n12_0,0\n",
        "test.csv": "row_id,patient_id,slice\n10_0,10,0\n10_1,10,1\n12_0,12,0\n",
        "test/10/0.dcm": b"p10s0", "test/10/1.dcm": b"p10s1", "test/12/0.dcm": b"p12s0",
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="row_id")

    test = pd.read_csv(scaled.path / "test.csv", dtype={"row_id": str})
    assert list(test["patient_id"]) == [10, 10, 12, 23, 23, 25]
    assert list(test["row_id"]) == ["10_0", "10_1", "12_0", "23_0", "23_1", "25_0"]
    assert (scaled.path / "test/23/1.dcm").read_bytes() == b"p10s1"
    assert (scaled.path / "test/25/0.dcm").read_bytes() == b"p12s0"


def test_a_second_table_joined_by_key_gets_the_new_keys_rows(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "id,target\na,0\nb,0\n",
        "test.csv": "id,session_id\na,7\nb,8\n",
        "test_events.csv": "session_id,event,value\n7,click,1\n7,view,2\n8,click,3\n",
        "train_events.csv": "session_id,event,value\n1,click,1\n7,view,2\n",
    })
    scaled = scale_competition_data(source, tmp_path / "scaled", 3, id_column="id")

    events = pd.read_csv(scaled.path / "test_events.csv")
    test = pd.read_csv(scaled.path / "test.csv")
    assert list(test["session_id"]) == [7, 8, 16, 17, 25, 26]
    assert list(test["id"]) == ["a", "b", "a_r1", "b_r1", "a_r2", "b_r2"]
    assert events.groupby("session_id")["value"].sum().to_dict() == {7: 3, 8: 3, 16: 3, 17: 3, 25: 3, 26: 3}
    assert (scaled.path / "train_events.csv").read_text() == (source / "train_events.csv").read_text()
    assert "test_events.csv rows by session_id x 3" in scaled.description


def test_the_stand_in_section_states_a_key_inside_the_partitions(tmp_path: Path) -> None:
    """keys = ["time_id"]: the stocks stay (a model that uses stock_id predicts as before), the rows inside each
    partition are replicated under new time ids."""
    source = optiver_like(tmp_path / "public", stocks=(0,))
    stated = StandInConfig(keys=("time_id",), tables=("book_test.parquet", "trade_test.parquet"))
    scaled = scale_competition_data(source, tmp_path / "scaled", 2, id_column="row_id", stand_in=stated)

    test = pd.read_csv(scaled.path / "test.csv")
    assert list(test["row_id"]) == ["0-4", "0-32", "0-34", "0-39", "0-67", "0-69"]
    book = pd.read_parquet(scaled.path / "book_test.parquet" / "stock_id=0")
    assert sorted(book["time_id"].unique()) == [4, 32, 34, 39, 67, 69] and len(book) == 24
    assert scaled.description.endswith("(as [competition.stand_in] states)")


def test_test_data_it_cannot_follow_is_refused_by_name(tmp_path: Path) -> None:
    source = build_file_tree(tmp_path / "public", {
        "sample_submission.csv": "id,target\na,0\nb,0\n",
        "test.csv": "id,x\na,1\nb,2\n",
        "test_side_info.csv": "code,weight\nq,1\n",  # shares no column with test.csv: joined how?
    })
    with pytest.raises(DryRunError) as caught:
        scale_competition_data(source, tmp_path / "scaled", 2, id_column="id")
    assert caught.value.message == (f"{source}: cannot replicate the test consistently: test_side_info.csv is test data "
                                    "kkb cannot follow from test.csv's rows (replicated rows would have no data there)")
    assert caught.value.hint is not None and "[competition.stand_in]" in caught.value.hint
    assert scale_competition_data(source, tmp_path / "one", 1, id_column="id").rows == 2  # x1 copies as it is


FIXTURE = Path(__file__).parent / "kernels" / "partitioned"


@pytest.mark.loopback
@pytest.mark.slow
def test_a_partitioned_test_dry_runs_at_ten_times_with_real_data_in_every_replicated_row(tmp_path: Path) -> None:
    lines: list[str] = []
    data = optiver_like(tmp_path / "public", stocks=(0,))
    report = dry_run(DryRunSettings(kernel_dir=FIXTURE, data_dir=data, out_dir=tmp_path / "build", scenario=Scenario.RERUN,
                                    rerun_scale=10, progress=lines.append))

    rerun, = report.scenarios
    assert report.ok, rerun.verdict
    predictions = pd.read_csv(rerun.submission)
    assert len(predictions) == 30 and predictions["target"].notna().all()
    # every replicated row predicts what its original did: the data behind it is the original's
    public = pd.read_csv(data / "test.csv")
    originals = dict(zip(public["row_id"], predictions["target"][:3], strict=True))
    scaled_test = [f"{s}-{t}" for s, t in zip(public["stock_id"], public["time_id"], strict=True)]
    assert list(predictions["target"]) == [originals[row] for row in scaled_test] * 10
    assert predictions["target"].nunique() == 3
    assert rerun.stand_in == ("stand-in: test.csv rows x 10; book_test.parquet partitions by stock_id x 10; trade_test.parquet "
                              "partitions by stock_id x 10; id rebuilt as {stock_id}-{time_id}; new stock_id per copy")
    # the projection's second size (x20) is replicated the same way: real data again, no collapse
    assert "rerun: a second run on 60 rows (2x) to separate fixed from per-row time" in lines
    # and so are the larger ones where 30 and 60 rows took the same time within its noise
    larger = [int(line.split()[4]) for line in lines if line.startswith("rerun: a run on ")]
    assert rerun.projection is not None and {c["points"][-1][0] for c in rerun.projection["components"]} == {
        larger[-1] if larger else 60}
    assert not [w for w in rerun.warnings if "distinct" in w]


@pytest.mark.loopback
@pytest.mark.slow
def test_a_stand_in_whose_replicated_rows_have_no_data_gets_the_collapse_warning(tmp_path: Path) -> None:
    """The rows copied, the partitions they point at left out (what copying test.csv alone gives): every new row
    predicts the model's default; the warning names the step and the column."""
    data = optiver_like(tmp_path / "public", stocks=(0,))
    stand_in = tmp_path / "hidden"
    shutil.copytree(data, stand_in)
    rows = [(s, t) for s in range(10) for t in (4, 32, 34)]
    (stand_in / "test.csv").write_text("stock_id,time_id,row_id\n" + "".join(f"{s},{t},{s}-{t}\n" for s, t in rows))
    (stand_in / "sample_submission.csv").write_text("row_id,target\n" + "".join(f"{s}-{t},0.003\n" for s, t in rows))
    report = dry_run(DryRunSettings(kernel_dir=FIXTURE, data_dir=data, rerun_data_dir=stand_in, out_dir=tmp_path / "build",
                                    scenario=Scenario.RERUN))

    rerun, = report.scenarios
    assert rerun.verdict.name == "OK"  # a well-formed file: only its values show it
    hint = "the replicated rows may have no data: check what the test's rows reference"
    assert [w.split(": check")[0] for w in rerun.warnings if hint in w] == [
        "step 'predict': column 'target': 1 distinct prediction for the 27 replicated rows; on the public test 3 of 3 "
        "were distinct: the replicated rows may have no data",
        "submission.csv: column 'target': 1 distinct prediction for the 27 replicated rows; on the public test 3 of 3 "
        "were distinct: the replicated rows may have no data"]


@pytest.mark.parametrize(("stated", "message"), [
    (StandInConfig(keys=("stock",)),
     "[competition.stand_in] keys: 'stock' is not a column of test.csv (stock_id, time_id, row_id)"),
    (StandInConfig(id="{stock_id}-{time}"),
     "[competition.stand_in] id: 'time' is not a column of test.csv (stock_id, time_id, row_id)"),
    (StandInConfig(files=("test_audio/clip.ogg",)), "[competition.stand_in] files: 'test_audio/clip.ogg' names no key"),
    (StandInConfig(tables=("book.parquet",)),
     "[competition.stand_in] tables: 'book.parquet' is neither a table nor a partitioned dataset in "),
])
def test_a_stand_in_section_naming_what_is_not_there_is_refused(tmp_path: Path, stated: StandInConfig, message: str) -> None:
    source = optiver_like(tmp_path / "public", stocks=(0,))
    with pytest.raises(DryRunError) as caught:
        scale_competition_data(source, tmp_path / "scaled", 2, id_column="row_id", stand_in=stated)
    assert caught.value.message.startswith(message) and caught.value.hint


def test_stated_tables_replace_detection_and_a_stated_key_is_followed_once(tmp_path: Path) -> None:
    source = optiver_like(tmp_path / "public", stocks=(0,))
    stated = StandInConfig(keys=("stock_id",), tables=("book_test.parquet", "trade_test.parquet"))
    scaled = scale_competition_data(source, tmp_path / "scaled", 3, id_column="row_id", stand_in=stated)

    for side in ("book_test.parquet", "trade_test.parquet"):
        assert sorted(p.name for p in (scaled.path / side).iterdir()) == ["stock_id=0", "stock_id=12", "stock_id=6"]
    assert scaled.description == ("stand-in: test.csv rows x 3; book_test.parquet partitions by stock_id x 3; "
                                  "trade_test.parquet partitions by stock_id x 3; id rebuilt as {stock_id}-{time_id}; "
                                  "new stock_id per copy (as [competition.stand_in] states)")
