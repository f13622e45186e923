"""A competition's public leaderboard: GetLeaderboard and DownloadLeaderboard, in kagglesdk's shapes.

Each team (a local user: teams of one) is ranked by its best public score among its COMPLETE
submissions, best first in the metric's direction (lower is better for rmse and logloss); ties go to
the earlier submission, as on Kaggle. ``ApiLeaderboardSubmission {teamId, teamName, submissionDate,
score}``; ``teamId`` is the ref of the team's first submission, stable for the competition's life.
The download is a zip holding ``<competition>-publicleaderboard.csv`` (``TeamId,TeamName,
SubmissionDate,Score``), the file Kaggle's leaderboard download holds.
"""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path
from typing import Any

from builder.local_kaggle.wire import Json, iso

LOWER_IS_BETTER = frozenset({"rmse", "logloss"})


def leaderboard(submissions: list[Json], metric: str) -> list[Json]:
    """One row per team, best first: ``{teamId, teamName, submissionDate, score}``."""
    first: dict[str, int] = {}
    best: dict[str, Json] = {}
    sign = 1.0 if metric in LOWER_IS_BETTER else -1.0
    for record in sorted(submissions, key=lambda s: (s["date"], s["ref"])):
        team = record["user"]
        first.setdefault(team, int(record["ref"]))
        if record.get("status") != "COMPLETE" or record.get("publicScore") is None:
            continue
        current = best.get(team)
        if current is None or sign * float(record["publicScore"]) < sign * float(current["publicScore"]):
            best[team] = record
    ranked = sorted(best.values(), key=lambda r: (sign * float(r["publicScore"]), r["date"]))
    return [{"teamId": first[r["user"]], "teamName": r["user"], "submissionDate": iso(r["date"]),
             "score": r["publicScore"]} for r in ranked]


def write_leaderboard_zip(rows: list[Json], slug: str, archive: Path) -> Path:
    """``archive`` holding ``<slug>-publicleaderboard.csv`` (written atomically, replaced each time)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["TeamId", "TeamName", "SubmissionDate", "Score"])
    for row in rows:
        writer.writerow([row["teamId"], row["teamName"], _csv_date(row["submissionDate"]), row["score"]])
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{slug}-publicleaderboard.csv", text.getvalue())
    tmp.replace(archive)
    return archive


def _csv_date(value: Any) -> str:
    return str(value).replace("T", " ").rstrip("Z")
