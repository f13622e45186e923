"""Kaggle's limits in kkb's words, without a server: the refusal texts it recognises, the reset, what a run
found mounted against what was pushed, the history's runs and deletions, answers that are not JSON."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import requests

from builder import cli
from builder.cli.remote_views import limit_lines
from builder.errors import EXIT_OK
from builder.project.mounted import Expected, MountedInput, differences, read_mounted
from builder.remote.history import ENDED_REPLACED, KERNEL_DELETED, PUSH, RUN, History
from builder.remote.kaggle_api import QuotaLine, is_transient, retry_reason, translate_error
from builder.remote.kaggle_api.client import _json_answers_only
from builder.remote.kaggle_api.translate import limit_refusal
from builder.remote.limits import Limits, RunningSession, SubmissionsLeft, next_reset


@pytest.mark.parametrize(("text", "limit"), [
    ("Maximum batch GPU session count of 2 reached", "session cap"),
    ("session count of 2 reached", "session cap"),
    ("TooManyAssignments", "session cap"),
    ("Kaggle answered HTTP 412 while pushing the kernel: Precondition failed", "session cap"),
    ("Unable to start a GPU session: no accelerator quota left", "quota"),
    ("Accelerator Quota Exceeded", "quota"),
    ("You've exceeded the number of hours allowed to use GPU", "quota"),
    ("Notebook not found", None),
    ("Machine shape NvidiaH100 is not available to this account", None),
])
def test_kaggles_refusals_of_a_push_over_a_limit_are_recognised(text: str, limit: str | None) -> None:
    assert limit_refusal(text) == limit


def test_the_daily_limit_resets_at_the_next_midnight_utc() -> None:
    late = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)
    assert next_reset(late) == datetime(2026, 12, 2, tzinfo=timezone.utc)
    left = SubmissionsLeft(5, 0, 40, False, next_reset(late))
    assert left.reset_words(late).startswith("00:00 UTC (") and left.reset_words(late).endswith(", in 1 min)")
    limits = Limits("comp", left, QuotaLine(3600 * 28.5, 3600 * 30), None, datetime(2026, 12, 5, tzinfo=timezone.utc),
                    (RunningSession("me/a", 3, "running", "NvidiaTeslaT4", "GPU"),), notes=("Kaggle did not say x",))
    lines = limit_lines(limits)
    assert lines[0].startswith("submissions: 0 left today (5 made today); resets 00:00 UTC")
    assert lines[1:] == ["GPU quota: 1.5 h left of 30.0 h this week; refreshes Sat 05 Dec 00:00 UTC",
                         "sessions: 1 of 2 GPU sessions running (me/a v3 (running, GPU NvidiaTeslaT4))",
                         "note: Kaggle did not say x"]
    assert limits.to_json()["gpu_quota"] == {"used_hours": 28.5, "total_hours": 30.0, "left_hours": 1.5,
                                             "refresh_at": "2026-12-05T00:00:00Z"}


PUSHED = [Expected("code", "me/k-code", "sha256:" + "c" * 64, 2, "me/k-code/2"),
          Expected("weights", "me/k-weights", "sha256:" + "b" * 64, 4, "me/k-weights/4")]


@pytest.mark.parametrize(("found", "sentence"), [
    ([MountedInput("weights", "me/k-weights", "dataset", "sha256:" + "a" * 64, "datasets/me/k-weights")],
     "the weights Kaggle mounted are version 3, kkb pushed version 4 (me/k-weights; the pin me/k-weights/4 was dropped)"),
    ([MountedInput("weights", "me/k-weights", "dataset", "sha256:" + "9" * 64, "k-weights")],
     "the weights Kaggle mounted are another version (sha256:999999999999…), kkb pushed version 4 (me/k-weights; the pin "
     "me/k-weights/4 was dropped)"),
    ([MountedInput("weights", "me/k-weights", "dataset", None, None)],
     "the weights (me/k-weights) were not mounted, kkb pushed version 4 (me/k-weights; the pin me/k-weights/4 was dropped)"),
], ids=["older-version", "unknown-version", "not-mounted"])
def test_what_a_run_mounted_is_told_against_what_was_pushed(found: list[MountedInput], sentence: str) -> None:
    code = MountedInput("code", "me/k-code", "dataset", "sha256:" + "c" * 64, "datasets/me/k-code")
    known = {"sha256:" + "a" * 64: 3}
    diffs = differences([code, *found], PUSHED, lambda item: known.get(item.digest or ""))
    assert [diff.sentence() for diff in diffs] == [sentence]


def test_a_record_of_mounted_inputs_is_read_and_a_missing_one_is_none(tmp_path: Path) -> None:
    assert read_mounted(tmp_path / "kkb_mounted.json") is None
    (tmp_path / "kkb_mounted.json").write_text(json.dumps({"format": 1, "inputs": [
        {"role": "code", "ref": "me/k-code", "kind": "dataset", "digest": "sha256:x", "path": "datasets/me/k-code"}]}))
    assert read_mounted(tmp_path / "kkb_mounted.json") == [
        MountedInput("code", "me/k-code", "dataset", "sha256:x", "datasets/me/k-code")]


def test_a_deleted_kernel_is_another_kernel_for_the_history(tmp_path: Path) -> None:
    history = History.for_kernel(tmp_path)
    history.append(PUSH, kernel="me/k", kernel_version=1, code_hash="sha256:old")
    history.append(RUN, kernel="me/k", version=1, status="running", ended=ENDED_REPLACED, session="GPU NvidiaTeslaT4",
                   billed_seconds=3600.0)
    history.append(KERNEL_DELETED, kernel="me/k", versions=[1], reason=ENDED_REPLACED)
    assert history.last(PUSH, kernel="me/k", kernel_version=1) is None  # v1 before the deletion is not today's v1
    assert history.last(PUSH, kernel_version=1) is not None and history.kernel_records("me/k") == []
    history.append(PUSH, kernel="me/k", kernel_version=1, code_hash="sha256:new")
    assert history.last(PUSH, kernel="me/k", kernel_version=1)["code_hash"] == "sha256:new"  # type: ignore[index]
    runs = [row for row in history.rows() if row.kind == "run"]
    assert [(r.kernel_version, r.status, r.session, r.billed_seconds) for r in runs] == \
        [(1, "replaced", "GPU NvidiaTeslaT4", 3600.0)]


def test_kkb_history_shows_each_run_with_its_session_and_billed_time(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    History.for_kernel(tmp_path).append(RUN, kernel="me/k", version=2, status="complete", ended="complete",
                                        session="GPU NvidiaTeslaT4", billed_seconds=4000.0)
    assert cli.main(["history", str(tmp_path)]) == EXIT_OK
    assert "complete (GPU NvidiaTeslaT4, billed 1 h 06 min)" in " ".join(capsys.readouterr().out.split())
    assert cli.main(["history", str(tmp_path), "--json"]) == EXIT_OK
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert (row["kind"], row["status"], row["session"], row["billed_seconds"]) == \
        ("run", "complete", "GPU NvidiaTeslaT4", 4000.0)


class _Http:
    """A stand-in for kagglesdk's HTTP client whose parser meets a page that is not JSON."""

    def _prepare_response(self, response_type: object, http_response: requests.Response) -> object:
        return http_response.json()  # what kagglesdk's parser does with a body it believes to be JSON


@pytest.mark.parametrize("status", [200, 429, 503])
def test_an_html_page_is_throttling_not_a_json_decode_error(status: int) -> None:
    answer = requests.Response()
    answer.status_code, answer._content = status, b"<!DOCTYPE html><html><title>Error</title></html>"
    answer.headers["Content-Type"] = "application/json"  # as the field notes saw it: decoded as JSON
    http = _Http()
    _json_answers_only(http)
    with pytest.raises(requests.HTTPError) as raised:
        http._prepare_response(object, answer)
    error = translate_error(raised.value, "pushing the kernel")
    assert error.message == (f"Kaggle is throttling: it answered HTTP {status} with an HTML page (not the API's JSON) "
                             "while pushing the kernel") and "Expecting value" not in str(error)
    assert is_transient(raised.value) and retry_reason(raised.value) == \
        (f"Kaggle is throttling (HTTP {status}, an HTML page)")
