"""The local Kaggle's parts without HTTP: metrics, competition folders, uploads as trees, faults, binding."""

from __future__ import annotations

import io
import math
import re
import zipfile
from pathlib import Path

import pytest

from builder.errors import LocalKaggleError
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import LocalKaggle, load_competition
from builder.local_kaggle.blobs import Blob
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.files import UploadRejected, materialize, tree
from builder.local_kaggle.scoring import ScoringError, score_submission
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import ApiError, Call, paginate_call
from tests.support.files import build_file_tree
from tests.support.local_kaggle import make_competition

# -- metrics ---------------------------------------------------------------------------------


def score(tmp_path: Path, metric: str, answers: str, submission: str, targets: tuple[str, ...] = ("y",),
          extra: dict[str, str] | None = None) -> tuple[float, float]:
    build_file_tree(tmp_path, {"answers.csv": answers, "sub.csv": submission, **(extra or {})})
    scores = score_submission(tmp_path / "sub.csv", tmp_path / "answers.csv", metric, "id", targets, tmp_path)
    return scores.public, scores.private


@pytest.mark.parametrize(
    ("metric", "answers", "submission", "expected"),
    [
        ("accuracy", "id,y\n1,a\n2,b\n3,a\n4,b\n", "id,y\n4,b\n3,a\n2,a\n1,a\n", 0.75),  # any row order
        ("accuracy", "id,y\n1,1\n2,0\n", "id,y\n1,1.0\n2,0\n", 1.0),                   # 1 == 1.0
        ("auc", "id,y\n1,1\n2,0\n3,1\n4,0\n", "id,y\n1,0.9\n2,0.1\n3,0.4\n4,0.5\n", 0.75),
        ("logloss", "id,y\n1,1\n2,0\n", "id,y\n1,0.5\n2,0.5\n", math.log(2)),
        ("rmse", "id,y\n1,1\n2,3\n", "id,y\n1,2\n2,1\n", math.sqrt(2.5)),
        ("spearman", "id,y\n1,1\n2,2\n3,3\n", "id,y\n1,10\n2,20\n3,30\n", 1.0),
    ],
    ids=["accuracy", "accuracy-numeric", "auc", "logloss", "rmse", "spearman"],
)
def test_builtin_metrics(tmp_path: Path, metric: str, answers: str, submission: str, expected: float) -> None:
    public, private = score(tmp_path, metric, answers, submission)
    assert public == pytest.approx(expected) and private == pytest.approx(expected)


def test_multiclass_logloss_normalises_rows(tmp_path: Path) -> None:
    public, _ = score(tmp_path, "logloss", "id,a,b\n1,1,0\n2,0,1\n", "id,a,b\n1,2,2\n2,1,3\n", targets=("a", "b"))
    assert public == pytest.approx(-(math.log(0.5) + math.log(0.75)) / 2)


def test_usage_column_splits_public_and_private(tmp_path: Path) -> None:
    answers = "id,y,Usage\n1,1,Public\n2,0,Public\n3,1,Private\n4,0,Private\n"
    assert score(tmp_path, "accuracy", answers, "id,y\n1,1\n2,0\n3,0\n4,1\n") == (1.0, 0.0)


def test_python_metric_file(tmp_path: Path) -> None:
    metric = "def score(solution, submission):\n    return float(abs(solution['y'] - submission['y']).max())\n"
    public, _ = score(tmp_path, "python:m.py", "id,y\n1,1\n2,5\n", "id,y\n1,1\n2,2\n", extra={"m.py": metric})
    assert public == 3.0


@pytest.mark.parametrize(
    ("submission", "message"),
    [
        ("id,z\n1,1\n2,0\n", "missing column(s): y; extra column(s): z"),
        ("id,y\n1,1\n", "row count: expected 2 rows (as the sample submission), got 1"),
        ("id,y\n1,1\n1,0\n", "duplicate ids: 1 (e.g. '1'), 1 extra row(s)"),
        ("id,y\n1,1\n9,0\n", "ids do not match the sample submission: 1 missing (e.g. '2'), 1 unexpected (e.g. '9')"),
        ("id,y\n1,1\n2,\n", "NaN in target column 'y': 1 rows"),
        ("id,y\n1,yes\n2,no\n", "non-numeric values in target column 'y': 2 rows"),
        ("", "not a readable CSV"),
    ],
    ids=["column", "rows", "duplicates", "unknown-id", "empty", "non-numeric", "empty-file"],
)
def test_unscorable_submissions(tmp_path: Path, submission: str, message: str) -> None:
    with pytest.raises(ScoringError, match=re.escape(message)):
        score(tmp_path, "rmse", "id,y\n1,1\n2,0\n", submission)


def test_scoring_refuses_floats_where_the_sample_holds_integers(tmp_path: Path) -> None:
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "sample_submission.csv").write_text("id,label\na.jpg,0\nb.jpg,0\n")
    with pytest.raises(ScoringError, match=r"float values in column 'label', where the sample submission holds integers"):
        score(tmp_path, "accuracy", "id,label\na.jpg,1\nb.jpg,3\n", "id,label\na.jpg,1.0\nb.jpg,3.0\n", ("label",))
    assert score(tmp_path, "accuracy", "id,label\na.jpg,1\nb.jpg,3\n", "id,label\nb.jpg,3\na.jpg,1\n", ("label",)) == (1.0, 1.0)


def test_auc_with_one_class_is_a_scoring_error(tmp_path: Path) -> None:
    with pytest.raises(ScoringError, match="one class only"):
        score(tmp_path, "auc", "id,y\n1,1\n2,1\n", "id,y\n1,0.3\n2,0.6\n")


# -- competition folders ---------------------------------------------------------------------


def test_a_competition_folder_loads(tmp_path: Path) -> None:
    config = load_competition(make_competition(tmp_path / "c"))
    assert (config.slug, config.metric, config.target_columns, config.daily_submission_limit) == (
        "tiny-parity", "accuracy", ("label",), 5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"competition.toml": 'slug = "x-y"\nmetric = "spearmen"\nid_column = "id"\ntarget_columns = "label"\n'},
         r"unknown metric 'spearmen' \(did you mean 'spearman'\?\)"),
        ({"competition.toml": 'slug = "x-y"\nmetrc = "auc"\nmetric = "auc"\nid_column = "id"\ntarget_columns = "label"\n'},
         "unknown key 'metrc'"),
        ({"competition.toml": 'slug = "X Y"\nmetric = "auc"\nid_column = "id"\ntarget_columns = "label"\n'}, "is not a Kaggle slug"),
        ({"competition.toml": 'slug = "x-y"\nmetric = "auc"\ntarget_columns = "label"\n'}, "missing key 'id_column'"),
        ({"answers.csv": "id,other\n1,2\n"}, r"answers.csv lacks columns \['label'\]"),
        ({"competition.toml": 'slug = "x-y"\nmetric = "python:nope.py"\nid_column = "id"\ntarget_columns = "label"\n'},
         "metric file .* is missing"),
    ],
    ids=["metric", "typo", "slug", "missing-key", "answers-columns", "metric-file"],
)
def test_bad_competition_folders(tmp_path: Path, change: dict[str, str], message: str) -> None:
    folder = make_competition(tmp_path / "c", extra=change)
    with pytest.raises(LocalKaggleError, match=message):
        load_competition(folder)


def test_a_missing_hidden_sample_is_named(tmp_path: Path) -> None:
    folder = make_competition(tmp_path / "c")
    (folder / "hidden" / "sample_submission.csv").unlink()
    with pytest.raises(LocalKaggleError, match="hidden/sample_submission.csv is missing") as raised:
        load_competition(folder)
    assert "scoring rerun" in (raised.value.hint or "")


# -- uploads as trees ------------------------------------------------------------------------


def blob(tmp_path: Path, name: str, data: bytes) -> Blob:
    path = tmp_path / "blobs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Blob(token="t", name=name, kind="DATASET", path=path, size=len(data))


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buffer.getvalue()


def test_archives_become_folders(tmp_path: Path) -> None:
    materialize([("", blob(tmp_path, "a.csv", b"a")), ("", blob(tmp_path, "w.zip", zipped({"f/x.bin": "x", ".cfg": "c"})))],
                tmp_path / "out")
    assert [rel for rel, _ in tree(tmp_path / "out")] == ["a.csv", "w/.cfg", "w/f/x.bin"]


@pytest.mark.parametrize(
    "uploads",
    [
        [("", "d"), ("", "d.zip")],          # the file d and the folder d/
        [("", "x.csv"), ("", "x.csv")],
    ],
    ids=["file-and-folder", "same-file"],
)
def test_duplicate_paths_are_refused(tmp_path: Path, uploads: list[tuple[str, str]]) -> None:
    blobs = [(prefix, blob(tmp_path / str(i), name, zipped({"k": "v"}) if name.endswith(".zip") else b"v"))
             for i, (prefix, name) in enumerate(uploads)]
    with pytest.raises(UploadRejected, match="Path must be unique"):
        materialize(blobs, tmp_path / "out")


def test_a_zip_slip_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ApiError, match=r"Invalid archive entry '../../etc/x' in evil.zip: '.' and '..' are not names"):
        materialize([("", blob(tmp_path, "evil.zip", zipped({"../../etc/x": "x"})))], tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- faults and binding ----------------------------------------------------------------------


def test_faults_count_down_and_persist(tmp_path: Path) -> None:
    faults = Faults(Store(tmp_path))
    faults.fail_rpc("SaveKernel", status=500, times=2)
    assert faults.take_rpc("kernels.KernelsApiService/ListKernels") is None
    taken = faults.take_rpc("kernels.KernelsApiService/SaveKernel")
    assert taken is not None and taken["status"] == 500
    assert Faults(Store(tmp_path)).snapshot()["rpc"][0]["times"] == 1  # a restart keeps the count
    assert faults.take_rpc("SaveKernel") is not None
    assert faults.take_rpc("SaveKernel") is None


def test_kernel_faults_match_phase_and_kernel(tmp_path: Path) -> None:
    faults = Faults(Store(tmp_path))
    faults.fail_kernel("alice/one-kernel", phase=Scenario.RERUN)
    assert faults.take_kernel_failure("alice/one-kernel", Scenario.COMMIT) is None
    assert faults.take_kernel_failure("alice/other-kernel", Scenario.RERUN) is None
    assert faults.take_kernel_failure("alice/one-kernel", Scenario.RERUN) is not None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda f: f.fail_rpc("X", status=200), "must be an HTTP error"),
        (lambda f: f.break_upload(fraction=1.5), "fraction must be in"),
        (lambda f: f.fail_kernel(phase="later"), "unknown kernel fault phase"),
        (lambda f: f.stall_dataset(polls=1) or f.fail_rpc("X", times=0), "at least once"),
    ],
    ids=["status", "fraction", "phase", "times"],
)
def test_bad_faults_are_refused(tmp_path: Path, call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LocalKaggleError, match=message):
        call(Faults(Store(tmp_path)))


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_only_loopback_can_be_bound(tmp_path: Path, host: str) -> None:
    with pytest.raises(LocalKaggleError, match="loopback addresses only"):
        LocalKaggle(tmp_path, host=host)


def test_a_bad_user_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LocalKaggleError, match="invalid Kaggle username"):
        LocalKaggle(tmp_path).add_user("Not A Slug", "key")


def test_a_corrupt_record_is_reported(tmp_path: Path) -> None:
    (tmp_path / "users.json").write_text("{broken")
    with pytest.raises(LocalKaggleError, match="users.json is corrupt"):
        LocalKaggle(tmp_path).add_user("alice", "key")


@pytest.mark.parametrize(("body", "cap", "pages"), [
    ({"pageSize": 100}, None, [[0, 1, 2, 3, 4]]),
    ({"pageSize": 100}, 2, [[0, 1], [2, 3], [4]]),  # the server's page size wins over a larger request
    ({"pageSize": 1}, 2, [[0], [1], [2], [3], [4]]),  # and a smaller request is the request's
    ({}, 3, [[0, 1, 2], [3, 4]]),
])
def test_a_list_answer_holds_at_most_the_servers_page_size(body: dict[str, int], cap: int | None,
                                                           pages: list[list[int]]) -> None:
    got, token = [], ""
    while True:
        call = Call(method="kernels.KernelsApiService/ListKernels", body={**body, "pageToken": token}, user="alice",
                    base_url="http://127.0.0.1", max_page_size=cap)
        page, token = paginate_call(list(range(5)), call)
        got.append(page)
        if not token:
            break
    assert got == pages
