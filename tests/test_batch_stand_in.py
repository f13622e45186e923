"""``--rerun-scale`` for an evaluation-API competition: more batches along the gateway's key, never wider ones.

Unit tests on small tmp trees (a flat date-keyed CSV, Jane Street's ``test.parquet/date_id=N/`` partitions with a
``lags.parquet`` beside it, a stated key, the refusals); the dry run of ``kernels/evalapi`` itself is in
``tests/test_evalapi.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from builder.errors import DryRunError
from builder.project.spec import KernelSpec, parse_spec
from builder.run.batch_stand_in import replicate_batches
from tests.support.files import KERNELS, build_file_tree

GATEWAY = '''from kaggle_evaluation.core import templates


class JsGateway(templates.Gateway):
    def generate_data_batches(self):
        for date_id in self.dates:
            test = self.test.filter(date_id=date_id).group_by("time_id", maintain_order=True)
            yield test
'''


def _spec(gateway_paths: list[str], **stand_in: str) -> KernelSpec:
    return parse_spec({"kernel": {"title": "Series kernel"},
                       "competition": {"slug": "series", "stand_in": stand_in},
                       "submission": {"kind": "evaluation-api", "id_column": "row_id", "target_columns": ["target"]},
                       "evaluation_api": {"module": "kaggle_evaluation.js_inference_server", "server_class": "S",
                                          "predict": "model:predict", "gateway_paths": gateway_paths}})


def _partitioned(tmp_path: Path) -> Path:
    """Jane Street's shape: test.parquet/date_id=N/part-0.parquet (row_id int, time_id, symbol_id), lags.parquet by date."""
    data = build_file_tree(tmp_path / "data", {"kaggle_evaluation/js_gateway.py": GATEWAY, "kaggle_evaluation/__init__.py": ""})
    rows = 0
    for date_id in (10, 11):
        frame = pd.DataFrame({"row_id": range(rows, rows + 4), "time_id": [0, 0, 1, 1], "symbol_id": [0, 1, 0, 1],
                              "feature": [0.5, 1.5, 2.5, 3.5]})
        folder = data / "test.parquet" / f"date_id={date_id}"
        folder.mkdir(parents=True)
        frame.to_parquet(folder / "part-0.parquet", index=False)
        rows += 4
    pd.DataFrame({"date_id": [10, 10, 11, 11], "symbol_id": [0, 1, 0, 1], "responder_lag": [0.1, 0.2, 0.3, 0.4]}
                 ).to_parquet(data / "lags.parquet", index=False)
    pd.DataFrame({"row_id": range(rows), "target": 0.0}).to_csv(data / "sample_submission.csv", index=False)
    pd.DataFrame({"date_id": [0], "x": [1]}).to_csv(data / "train.csv", index=False)  # the gateway never reads it
    return data


def test_partitions_get_new_dates_each_with_only_its_own_rows(tmp_path: Path) -> None:
    data = _partitioned(tmp_path)
    scaled = replicate_batches(_spec(["test.parquet", "lags.parquet"]), data, tmp_path / "scaled", 3)
    test = scaled.path / "test.parquet"
    assert sorted(folder.name for folder in test.iterdir()) == [f"date_id={d}" for d in (10, 11, 12, 13, 14, 15)]
    for date_id in (12, 13, 14, 15):  # the copies after the last date, one partition each
        part = pd.read_parquet(test / f"date_id={date_id}" / "part-0.parquet")
        original = pd.read_parquet(test / f"date_id={10 + date_id % 2}" / "part-0.parquet")
        assert part["time_id"].tolist() == original["time_id"].tolist()  # the batch's grouping and order kept
        assert part["row_id"].dtype == "int64" and part["row_id"].min() >= 8  # ids in the test's own type, new
    whole = pd.read_parquet(test)
    assert len(whole) == 24 and whole["row_id"].is_unique and whole.groupby("date_id", observed=True).size().eq(4).all()
    lags = pd.read_parquet(scaled.path / "lags.parquet")
    assert lags["date_id"].tolist() == [10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15]
    sample = pd.read_csv(scaled.path / "sample_submission.csv")
    assert sample["row_id"].dtype == "int64" and set(sample["row_id"]) == set(whole["row_id"]) and scaled.rows == 24
    assert (scaled.path / "train.csv").read_text() == (data / "train.csv").read_text()
    assert "test.parquet, lags.parquet x 3 along date_id (the gateway's batches: 2 -> 6" in scaled.description
    assert "test.parquet is partitioned by it" in scaled.description
    assert pd.read_parquet(data / "test.parquet")["row_id"].max() == 7  # the source is never written through


def test_the_gateways_grouping_names_the_key_of_a_flat_table(tmp_path: Path) -> None:
    spec = parse_spec({**_spec(["test.csv"]).model_dump(mode="json", exclude_defaults=True),
                       "evaluation_api": {"module": "kaggle_evaluation.kkb_evalapi_inference_server", "server_class": "S",
                                          "predict": "model:predict", "gateway_paths": ["test.csv"]}})
    data = Path(shutil.copytree(KERNELS / "evalapi" / "data" / "competition" / "public", tmp_path / "public"))
    scaled = replicate_batches(spec, data, tmp_path / "scaled", 5)
    test = pd.read_csv(scaled.path / "test.csv")
    assert test["date_id"].tolist() == [date for date in range(15) for _ in range(4)]  # 3 dates -> 15, in order
    assert test["row_id"].tolist() == list(range(60)) and scaled.rows == 60
    assert "groups the test by it" in scaled.description


@pytest.mark.parametrize(
    ("stand_in", "paths", "message"),
    [
        ({}, ["test.csv"], "cannot find the key the competition's gateway (kaggle_evaluation.js_gateway) serves the test by: "
                           "no partition folder in test.csv, no groupby/group_by/partition_by of one of their columns in "
                           "js_gateway.py"),
        ({"batch_key": "symbol"}, ["test.csv"], "the gateway's batch key 'symbol' (as [competition.stand_in] batch_key "
                                                "states) holds text ('a')"),
        ({"batch_key": "nope"}, ["test.csv"], "the gateway's batch key 'nope' (as [competition.stand_in] batch_key "
                                              "states) is in none of the tables the gateway reads (test.csv)"),
        ({}, ["missing.csv"], "the gateway's missing.csv is missing from the competition data"),
    ],
)
def test_refused_naming_what_kkb_looked_at(tmp_path: Path, stand_in: dict[str, str], paths: list[str], message: str) -> None:
    data = build_file_tree(tmp_path / "data", {"kaggle_evaluation/js_gateway.py": "class G: pass\n",
                                               "test.csv": "row_id,symbol,x\n0,a,1\n1,b,2\n",
                                               "sample_submission.csv": "row_id,target\n0,0\n1,0\n"})
    with pytest.raises(DryRunError) as caught:
        replicate_batches(_spec(paths, **stand_in), data, tmp_path / "scaled", 2)
    assert message in caught.value.message
    if "cannot find the key" in message:
        assert caught.value.hint and "[competition.stand_in] batch_key" in caught.value.hint


def test_a_stated_key_wins(tmp_path: Path) -> None:
    data = build_file_tree(tmp_path / "data", {"kaggle_evaluation/js_gateway.py": "",
                                               "test.csv": "row_id,step,x\nr0,0,1\nr1,0,2\nr2,1,3\n",
                                               "sample_submission.csv": "row_id,target\nr0,0\nr1,0\nr2,0\n"})
    scaled = replicate_batches(_spec(["test.csv"], batch_key="step"), data, tmp_path / "scaled", 2)
    test = pd.read_csv(scaled.path / "test.csv")
    assert test["step"].tolist() == [0, 0, 1, 2, 2, 3] and test["row_id"].tolist() == ["r0", "r1", "r2", "r0_r1", "r1_r1", "r2_r1"]
