"""builder.remote.history: append-only, durable, torn-line tolerant; intents; the history table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.remote.history import DATASET, DATASET_INTENT, PUSH, SCORE, SUBMISSION, History, history_path


def _field(record: dict[str, Any] | None, key: str) -> Any:
    """``key`` of a history record that must be there."""
    assert record is not None
    return record[key]


def test_append_and_read_back(tmp_path: Path) -> None:
    history = History.for_kernel(tmp_path)
    assert history.records() == [] and history.rows() == []
    history.append(PUSH, kernel="me/k", kernel_version=1, code_hash="sha256:" + "a" * 64)
    history.append(PUSH, kernel="me/k", kernel_version=2, code_hash="sha256:" + "b" * 64)
    assert history_path(tmp_path) == tmp_path / ".kkb" / "history.jsonl"
    lines = history_path(tmp_path).read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["event"] == PUSH for line in lines)
    assert _field(history.last(PUSH), "kernel_version") == 2
    assert _field(history.last(PUSH, kernel_version=1), "code_hash").endswith("a" * 64)
    assert history.last(PUSH, kernel="other/k") is None


def test_torn_last_line_is_skipped_and_appending_goes_on(tmp_path: Path) -> None:
    history = History.for_kernel(tmp_path)
    history.append(PUSH, kernel="me/k", kernel_version=1)
    with history_path(tmp_path).open("a") as handle:
        handle.write('{"event": "push", "kernel": "me/k", "kernel_ver')  # a crash mid-write
    assert [r["kernel_version"] for r in history.records()] == [1]
    history.append(PUSH, kernel="me/k", kernel_version=2)
    assert [r["kernel_version"] for r in history.records()] == [1, 2]


def test_open_intent_is_closed_by_its_result(tmp_path: Path) -> None:
    history = History.for_kernel(tmp_path)
    history.append(DATASET_INTENT, ref="me/w", hash="h1", version_before=1)
    assert _field(history.open_intent(DATASET_INTENT, DATASET, "ref", "me/w"), "hash") == "h1"
    assert history.open_intent(DATASET_INTENT, DATASET, "ref", "me/other") is None
    history.append(DATASET, ref="me/w", hash="h1", version=2)
    assert history.open_intent(DATASET_INTENT, DATASET, "ref", "me/w") is None


def test_rows_join_submissions_with_their_latest_score(tmp_path: Path) -> None:
    history = History.for_kernel(tmp_path)
    history.append(PUSH, kernel="me/k", kernel_version=3, kernel_pushed=True, code_hash="sha256:c", weights_hash=None,
                   code_version=2, weights_version=None)
    history.append(SUBMISSION, ref=7, kernel="me/k", kernel_version=3, code_hash="sha256:c", code_version=2)
    history.append(SUBMISSION, ref=8, kernel="me/k", kernel_version=3)
    history.append(SCORE, ref=7, status="complete", public_score="0.91")
    push_row, first, second = history.rows()
    assert (push_row.kind, push_row.kernel_version, push_row.status, push_row.weights_hash) == ("push", 3, "pushed", "")
    assert (first.submission_ref, first.status, first.score) == (7, "complete", "0.91")
    assert (second.submission_ref, second.status, second.score) == (8, "pending", "")


def test_history_file_is_private_to_the_project_and_ignored_by_git() -> None:
    ignore = (Path(__file__).resolve().parent.parent / ".gitignore").read_text().splitlines()
    assert "kernels/*/.kkb/" in ignore


def test_lookups_only_see_the_server_in_use(tmp_path: Path) -> None:
    local = History.for_kernel(tmp_path, server="http://127.0.0.1:8123")
    real = History.for_kernel(tmp_path)
    local.append(PUSH, kernel="me/k", kernel_version=5)
    local.append(DATASET_INTENT, ref="me/w", hash="h", version_before=None)
    assert real.last(PUSH) is None and real.open_intent(DATASET_INTENT, DATASET, "ref", "me/w") is None
    real.append(PUSH, kernel="me/k", kernel_version=1)
    assert _field(local.last(PUSH), "kernel_version") == 5 and _field(real.last(PUSH), "kernel_version") == 1
    assert [(r.server, r.kernel_version) for r in real.rows()] == [("http://127.0.0.1:8123", 5), ("kaggle.com", 1)]
