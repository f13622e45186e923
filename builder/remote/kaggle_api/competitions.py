"""``competitions.CompetitionApiService``: a competition's data files, code submissions and their scores."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import RemoteError
from builder.remote.kaggle_api.calls import KaggleCalls
from builder.remote.kaggle_api.translate import scrub


@dataclass(frozen=True)
class Submission:
    ref: int
    status: str  # lower-case SubmissionStatus name: pending, complete, error
    public_score: str
    private_score: str
    error_description: str
    description: str
    date: str


@dataclass(frozen=True)
class SubmissionLimits:
    """``GetSubmissionLimits``: the team's submissions (the daily limit is team-wide and resets at 00:00 UTC)."""

    used_today: int
    left_today: int  # what the team may still submit now (0: none until the reset, or the lifetime cap)
    total: int
    limited_by_total: bool  # the competition's lifetime cap, not the day's, is what is left


class CompetitionCalls(KaggleCalls):
    """The competition operations of :class:`~builder.remote.kaggle_api.KaggleAdapter`."""

    def download_competition(self, competition: str, folder: Path) -> Path:
        """The competition's data files, downloaded (``DownloadDataFiles``) and unpacked into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)

        def download() -> None:
            self.api.competition_download_files(competition, path=str(folder), force=True, quiet=True)

        self.call("downloading the competition data", download, subject=competition)
        for archive in sorted(folder.glob("*.zip")):  # all files come as <competition>.zip
            with zipfile.ZipFile(archive) as bundle:
                _safe_extract(bundle, folder)
            archive.unlink()
        return folder

    def submit_code(
        self, competition: str, kernel: str, version: int, file_name: str, message: str
    ) -> tuple[int, str]:
        """``CreateCodeSubmission``: returns (submission ref, the server's message)."""

        def submit() -> Any:
            return self.api.competition_submit_code(
                file_name, message, competition=competition, kernel=kernel, kernel_version=version, quiet=True
            )

        response = self.call("submitting to the competition", submit, subject=competition, idempotent=False)
        ref = getattr(response, "ref", None)
        server_message = str(getattr(response, "message", "") or "")
        if not ref:
            raise RemoteError(
                f"Kaggle did not accept the submission to {competition}: {scrub(server_message) or 'no submission ref'}",
                hint="check the daily submission limit and that the kernel version finished",
            )
        return int(ref), server_message

    def submission_limits(self, competition: str) -> SubmissionLimits:
        def get() -> Any:
            return self.api.competition_get_submission_limits(competition)

        limits = self.call("reading the submission limits", get, subject=competition)
        return SubmissionLimits(used_today=int(getattr(limits, "num_today", 0) or 0),
                                left_today=int(getattr(limits, "num_allowed_now", 0) or 0),
                                total=int(getattr(limits, "num_total", 0) or 0),
                                limited_by_total=bool(getattr(limits, "limited_by_total", False)))

    def submission(self, ref: int) -> Submission:
        def get() -> Any:
            from kagglesdk.competitions.types.competition_api_service import ApiGetSubmissionRequest

            request = ApiGetSubmissionRequest()
            request.ref = int(ref)
            with self._client() as kaggle:
                return kaggle.competitions.competition_api_client.get_submission(request)

        return _submission(self.call("reading the submission", get, subject=f"#{ref}"))

    def submissions(self, competition: str) -> list[Submission]:
        def get() -> Any:
            return self.api.competition_submissions(competition)

        return [_submission(item) for item in self.call("listing submissions", get, subject=competition) or []]


def _safe_extract(bundle: zipfile.ZipFile, folder: Path) -> None:
    root = folder.resolve()
    for member in bundle.namelist():
        target = (folder / member).resolve()
        if target != root and root not in target.parents:
            raise RemoteError(f"the competition archive holds a path outside its folder: {member!r}",
                              hint="download the data with `kaggle competitions download` and pass --data")
    bundle.extractall(folder)


def _submission(item: Any) -> Submission:
    status = getattr(item, "status", None)
    name = getattr(status, "name", str(status or "pending")).lower()
    date = getattr(item, "date", None)
    return Submission(
        ref=int(getattr(item, "ref", 0) or 0),
        status=name,
        public_score=str(getattr(item, "public_score", "") or ""),
        private_score=str(getattr(item, "private_score", "") or ""),
        error_description=str(getattr(item, "error_description", "") or ""),
        description=str(getattr(item, "description", "") or ""),
        date=date.isoformat() if date is not None and hasattr(date, "isoformat") else str(date or ""),
    )
