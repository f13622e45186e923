"""Collapsed predictions are named: replicated rows with no data, another test far less distinct."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.rehearse.collapse import HINT, collapse_warnings
from tests.support.files import build_file_tree

PUBLIC = {"a", "b", "c"}


def _csv(rows: list[tuple[str, str]]) -> str:
    return "id,target\n" + "".join(f"{i},{v}\n" for i, v in rows)


@pytest.mark.parametrize(("replicated", "expected"), [
    pytest.param([("a1", "0.5"), ("b1", "0.5"), ("c1", "0.5")],
                 "out.csv: column 'target': 1 distinct prediction for the 3 replicated rows; on the public test 3 of 3 "
                 f"were distinct: {HINT}", id="constant"),
    pytest.param([("a1", ""), ("b1", ""), ("c1", "")],
                 "out.csv: column 'target': no predictions (NaN) for the 3 replicated rows; on the public test 3 of 3 "
                 f"were distinct: {HINT}", id="all-nan"),
    pytest.param([("a1", "0.1"), ("b1", "0.2"), ("c1", "0.3")], None, id="faithful"),
    pytest.param([("a1", "0.11"), ("b1", "0.25"), ("c1", "0.3")], None, id="other-values-as-distinct"),
])
def test_replicated_rows_against_the_public_rows(tmp_path: Path, replicated: list[tuple[str, str]], expected: str | None) -> None:
    out = build_file_tree(tmp_path, {"out.csv": _csv([("a", "0.1"), ("b", "0.2"), ("c", "0.3"), *replicated])}) / "out.csv"
    assert collapse_warnings({"out.csv": out}, "id", ["target"], PUBLIC) == ([expected] if expected else [])


def test_another_test_is_judged_against_the_commit_run_only_for_continuous_values(tmp_path: Path) -> None:
    build_file_tree(tmp_path, {
        "commit.csv": _csv([("a", "0.13"), ("b", "0.27"), ("c", "0.31")]),
        "rerun.csv": _csv([(f"h{i}", "0.5" if i % 2 else "0.7") for i in range(40)]),
        "labels-commit.csv": _csv([("a", "0"), ("b", "1"), ("c", "2")]),
        "labels-rerun.csv": _csv([(f"h{i}", str(i % 3)) for i in range(40)]),
    })
    found = collapse_warnings({"submission.csv": tmp_path / "rerun.csv", "labels": tmp_path / "labels-rerun.csv"}, "id",
                              ["target"], PUBLIC, {"submission.csv": tmp_path / "commit.csv", "labels": tmp_path / "labels-commit.csv"})
    assert found == [f"submission.csv: column 'target': 2 distinct predictions for 40 rows; on the public test 3 of 3 were "
                     f"distinct: {HINT}"]  # class labels repeat by nature: never judged by their count
