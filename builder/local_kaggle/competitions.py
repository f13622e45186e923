"""``competitions.CompetitionApiService``: code competitions, submissions and their scoring rerun.

A code submission names a kernel version. Kaggle accepts it only when that version's commit run
completed, has internet off, has the competition attached and wrote the named output file, and when
the team has submissions left today (``daily_submission_limit``, counted per UTC day of the server's clock,
``clock.py``: a test moves it past midnight). The submission is PENDING while the scoring rerun runs (the same
notebook, ``KAGGLE_IS_COMPETITION_RERUN`` set, ``hidden/`` mounted in place of ``public/``), then
COMPLETE with its public score, or ERROR with Kaggle's error description. The rerun's log stays on
disk (``submissions/<ref>/log.json``) and is never served: Kaggle does not show rerun tracebacks.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from builder.kkb_runtime.vocabulary import Scenario, Verdict
from builder.local_kaggle import names
from builder.local_kaggle.blobs import Blobs
from builder.local_kaggle.clock import DAY_S, Clock
from builder.local_kaggle.competition import CompetitionConfig, load_competition
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.files import remove_tree, storage_url, tree, zip_tree
from builder.local_kaggle.kernels import COMPLETE, Kernels, KernelVersion
from builder.local_kaggle.leaderboard import leaderboard, write_leaderboard_zip
from builder.local_kaggle.listing import CompetitionRow, list_competitions
from builder.local_kaggle.runner import KernelRunner, RunRequest
from builder.local_kaggle.scoring import ScoringError, score_submission
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import (
    ApiError,
    Call,
    Handler,
    Json,
    Redirect,
    bad_request,
    compact,
    iso,
    not_found,
    now,
    paginate_call,
)
from builder.local_kaggle.worker import JobQueue
from builder.rehearse.evalapi import rehearse_gateway_rerun, verdict_name, verdict_reason
from builder.run.gateway import Gateway
from builder.run.sandbox import Mount

SERVICE = "competitions.CompetitionApiService"
PENDING, ERROR = "PENDING", "ERROR"
KAGGLE_ERROR = Verdict.KAGGLE_ERROR.value
SCORING_ERROR = Verdict.SCORING_ERROR.value


class Competitions:
    def __init__(self, store: Store, blobs: Blobs, kernels: Kernels, faults: Faults, settings: ServerSettings,
                 runner: KernelRunner, jobs: JobQueue, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._blobs = blobs
        self._kernels = kernels
        self._faults = faults
        self._settings = settings
        self._runner = runner
        self._jobs = jobs

    def routes(self) -> dict[str, Handler]:
        handlers: dict[str, Handler] = {
            "ListCompetitions": self.list_competitions,
            "GetCompetition": self.get_competition,
            "ListDataFiles": self.list_data_files,
            "DownloadDataFiles": self.download_data_files,
            "DownloadDataFile": self.download_data_file,
            "CreateCodeSubmission": self.create_code_submission,
            "StartSubmissionUpload": self.start_submission_upload,
            "CreateSubmission": self.create_submission,
            "ListSubmissions": self.list_submissions,
            "GetSubmission": self.get_submission,
            "GetSubmissionLimits": self.get_submission_limits,
            "GetLeaderboard": self.get_leaderboard,
            "DownloadLeaderboard": self.download_leaderboard,
        }
        return {f"{SERVICE}/{name}": handler for name, handler in handlers.items()}

    # -- registration ------------------------------------------------------------------------

    def add(self, folder: Path) -> CompetitionConfig:
        """Register (or refresh) a competition from a local folder; its files are copied into the store."""
        config = load_competition(folder)
        with self._store.lock:
            target = self._dir(config.slug)
            staging = target.with_name(f".{config.slug}.staging")
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(folder, staging, ignore=shutil.ignore_patterns("__pycache__", ".*"))
            existing = self._store.read(target / "competition.json") or {}
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            self._store.write(target / "competition.json", {
                **config.to_json(), "id": existing.get("id") or self._store.next_id("competition"),
                "created": existing.get("created") or now(),
            })
        return config

    def public_dir(self, slug: str) -> Path | None:
        """What a commit run mounts for this competition; None when there is no such competition."""
        return self._dir(slug) / "public" if self._record(slug) else None

    def config(self, slug: str) -> CompetitionConfig | None:
        data = self._record(slug)
        return CompetitionConfig.from_json({k: data[k] for k in data if k not in ("id", "created")}) if data else None

    # -- competitions and their data ---------------------------------------------------------

    def list_competitions(self, call: Call) -> Json:
        """Filters and order as ``listing.list_competitions`` decides (group, category, search, sortBy)."""
        root = self._store.path("competitions")
        slugs = sorted(p.parent.name for p in root.glob("*/competition.json")) if root.exists() else []
        submissions = self._all_submissions()
        rows = [CompetitionRow(s, self._record(s) or {}, {r["user"] for r in submissions if r["competition"] == s})
                for s in slugs]
        page, token = paginate_call(list_competitions(rows, call), call)
        return {"competitions": [self._api_competition(row.slug, call) for row in page], "nextPageToken": token}

    def get_leaderboard(self, call: Call) -> Json:
        config = self._require(call.text("competitionName"))
        page, token = paginate_call(self._leaderboard(config), call)
        return {"submissions": page, "nextPageToken": token}

    def download_leaderboard(self, call: Call) -> Redirect:
        config = self._require(call.text("competitionName"))
        with self._store.lock:
            archive = write_leaderboard_zip(self._leaderboard(config), config.slug,
                                            self._dir(config.slug) / ".archive" / f"{config.slug}-leaderboard.zip")
        return Redirect(storage_url(self._store, call.base_url, archive))

    def _leaderboard(self, config: CompetitionConfig) -> list[Json]:
        return leaderboard([s for s in self._all_submissions() if s["competition"] == config.slug], config.metric)

    def get_competition(self, call: Call) -> Json:
        return self._api_competition(self._require(call.text("competitionName")).slug, call)

    def list_data_files(self, call: Call) -> Json:
        config = self._require(call.text("competitionName"))
        rows = [{"ref": rel, "name": rel, "totalBytes": path.stat().st_size,
                 "url": storage_url(self._store, call.base_url, path),
                 "creationDate": iso(path.stat().st_mtime)} for rel, path in tree(self._dir(config.slug) / "public")]
        page, token = paginate_call(rows, call)
        return {"files": page, "nextPageToken": token}

    def download_data_files(self, call: Call) -> Redirect:
        config = self._require(call.text("competitionName"))
        with self._store.lock:
            archive = zip_tree(self._dir(config.slug) / "public", self._dir(config.slug) / ".archive" / f"{config.slug}.zip")
        return Redirect(storage_url(self._store, call.base_url, archive))

    def download_data_file(self, call: Call) -> Redirect:
        config = self._require(call.text("competitionName"))
        target = names.inside(self._dir(config.slug) / "public", call.text("fileName"), "file name")
        if not target.is_file():
            raise not_found(f"File {call.text('fileName')!r} not found in competition {config.slug}")
        return Redirect(storage_url(self._store, call.base_url, target))

    # -- submissions -------------------------------------------------------------------------

    def create_code_submission(self, call: Call) -> Json:
        user = call.require_user()
        config = self._require(call.text("competitionName"))
        owner, slug = call.text("kernelOwner"), call.text("kernelSlug")
        file_name = names.relative_path(call.text("fileName") or "submission.csv", "output file name")
        try:
            version = self._kernels.version(owner, slug, call.integer("kernelVersion"), user)
        except ApiError:
            raise not_found(f"Notebook {owner}/{slug} (version {call.integer('kernelVersion') or 'latest'}) not found") from None
        _check_submittable(version, config, file_name)
        with self._store.lock:
            used = self._used_today(config.slug, user)
            if used >= config.daily_submission_limit:
                raise bad_request(f"Your team has used its daily Submission allowance ({config.daily_submission_limit}) "
                                  "today, please try again tomorrow UTC.")
            ref = self._store.next_id("submission")
            self._save(ref, {
                "ref": ref, "competition": config.slug, "user": user, "date": self._clock.now(), "status": PENDING,
                "kernelOwner": version.owner, "kernelSlug": version.slug, "kernelVersion": version.number,
                "fileName": file_name, "description": call.text("submissionDescription"),
            })
        self._jobs.put(("score", str(ref)))
        return {"message": f"Successfully submitted to {config.title}", "ref": ref}

    def start_submission_upload(self, call: Call) -> Json:
        user = call.require_user()
        config = self._require(call.text("competitionName"))
        return self._blobs.start(user, "SUBMISSION", names.file_name(call.text("fileName") or f"{config.slug}.csv",
                                                                     "submission file name"),
                                 call.integer("contentLength") or 0, call.base_url)

    def create_submission(self, call: Call) -> Json:
        call.require_user()
        self._require(call.text("competitionName"))
        # Every local competition is a code competition, as the ones kkb targets are.
        raise bad_request("This competition only accepts submissions from notebooks: submit a notebook version "
                          "(competitions submit -k OWNER/SLUG -v VERSION -f submission.csv)")

    def list_submissions(self, call: Call) -> Json:
        user = call.require_user()
        config = self._require(call.text("competitionName"))
        rows = [s for s in self._all_submissions() if s["competition"] == config.slug and s["user"] == user]
        group = call.text("group").upper()
        if group.endswith("SUCCESSFUL"):
            rows = [s for s in rows if s["status"] == COMPLETE]
        sort = call.text("sortBy").upper()
        if sort.endswith("PUBLIC_SCORE"):
            rows.sort(key=lambda s: float(s.get("publicScore") or "-inf"), reverse=True)
        elif sort.endswith("NAME"):
            rows.sort(key=lambda s: s["fileName"])
        else:
            rows.sort(key=lambda s: s["date"], reverse=True)
        page, token = paginate_call(rows, call)
        return {"submissions": [self._api_submission(s, call.base_url) for s in page], "nextPageToken": token}

    def get_submission(self, call: Call) -> Json:
        user = call.require_user()
        record = self._load(call.integer("ref") or 0)
        if record is None or record["user"] != user:
            raise not_found(f"Submission {call.integer('ref')} not found")
        return self._api_submission(record, call.base_url)

    def get_submission_limits(self, call: Call) -> Json:
        user = call.require_user()
        config = self._require(call.text("competitionName"))
        today = self._used_today(config.slug, user)
        total = sum(1 for s in self._all_submissions() if s["competition"] == config.slug and s["user"] == user)
        return {"numToday": today, "numTotal": total,
                "numAllowedNow": max(0, config.daily_submission_limit - today), "limitedByTotal": False}

    # -- the scoring rerun (worker side) -----------------------------------------------------

    def recover(self) -> None:
        for record in self._all_submissions():
            if record["status"] == PENDING:
                self._jobs.put(("score", str(record["ref"])))

    def execute_scoring(self, ref: str) -> None:
        """Score a PENDING submission; whatever goes wrong on the way ends it as ERROR, never PENDING."""
        try:
            self._execute_scoring(ref)
        except Exception as exc:  # the last line: a bug in the server is "Kaggle Error" with the exception
            self._finish(ref, error=f"{KAGGLE_ERROR}: {type(exc).__name__}: {exc}",
                         log=[{"stream_name": "stderr", "time": 0.0, "data": f"{type(exc).__name__}: {exc}\n"}])

    def _execute_scoring(self, ref: str) -> None:
        record = self._load(int(ref))
        if record is None or record["status"] != PENDING:
            return
        config = self.config(record["competition"])
        try:
            version = self._kernels.version(record["kernelOwner"], record["kernelSlug"], record["kernelVersion"],
                                            record["user"])
        except ApiError:
            version = None
        if config is None or version is None:
            self._finish(ref, error=KAGGLE_ERROR, log=[])
            return
        fault = self._faults.take_kernel_failure(version.ref, Scenario.RERUN)
        if fault is not None:
            message = str(fault.get("message") or "RuntimeError: injected failure (local Kaggle fault)")
            self._finish(ref, error=fault.get("description") or Verdict.THREW.value,
                         log=[{"stream_name": "stderr", "time": 0.0, "data": message + "\n"}])
            return
        root = self._store.path("runs", f"score-{ref}-{uuid.uuid4().hex[:8]}")
        try:
            self._rerun(ref, record, config, version, root)
        except Exception as exc:  # a broken executor is Kaggle's fault, as on Kaggle
            self._finish(ref, error=f"{KAGGLE_ERROR}: {type(exc).__name__}: {exc}",
                         log=[{"stream_name": "stderr", "time": 0.0, "data": f"{type(exc).__name__}: {exc}\n"}])
        finally:
            remove_tree(root)

    def _rerun(self, ref: str, record: Json, config: CompetitionConfig, version: KernelVersion, root: Path) -> None:
        competition_dir = self._dir(config.slug)
        mounts = self._kernels.mounts(version.meta, {config.slug: competition_dir / "hidden"})
        timeout = self._settings.rerun_timeout_seconds or config.time_limit_hours * 3600
        if config.evaluation_api is not None:
            self._gateway_rerun(ref, config, version, mounts, root, timeout)
            return
        request = RunRequest(notebook=self._kernels.code_file(version.folder, version.meta),
                             mounts=mounts, rerun=True, timeout_seconds=timeout, root=root / "sandbox",
                             kernel_type=version.meta["kernelType"])
        result = self._runner.run(request)
        submission_file = result.working_dir / record["fileName"]
        verdict = self._runner.judge(result, kernel_type=version.meta["kernelType"], submission_file=submission_file,
                                     sample_submission=competition_dir / "hidden" / "sample_submission.csv",
                                     id_column=config.id_column, target_columns=config.target_columns,
                                     machine_shape=version.meta.get("machineShape"), column_types=config.column_types)
        if verdict.name != Verdict.OK:
            self._finish(ref, error=verdict.name, log=result.log, reason=verdict.reason)
            return
        self._score(ref, config, competition_dir, submission_file, result.log, submission_file.stat().st_size)

    def _score(self, ref: str, config: CompetitionConfig, competition_dir: Path, submission_file: Path,
               log: list[dict[str, Any]], total_bytes: int) -> None:
        try:
            scores = score_submission(submission_file, competition_dir / "answers.csv", config.metric,
                                      config.id_column, config.target_columns, competition_dir,
                                      column_types=config.column_types, metric_args=config.metric_args)
        except ScoringError as exc:
            self._finish(ref, error=SCORING_ERROR, log=log, reason=str(exc))
            return
        self._finish(ref, error=None, log=log, public=_format(scores.public), private=_format(scores.private),
                     total_bytes=total_bytes)

    def _gateway_rerun(self, ref: str, config: CompetitionConfig, version: KernelVersion, mounts: tuple[Mount, ...], root: Path,
                       timeout: float) -> None:
        """An evaluation-API competition: the notebook runs as serve() and the competition's gateway drives
        it from another process over the hidden data; the gateway's submission.parquet is what is scored."""
        import pandas as pd
        api = dict(config.evaluation_api or {})  # set: only an evaluation-API competition comes here
        gateway = Gateway(**{**api, "gateway_paths": tuple(api["gateway_paths"])})
        result = rehearse_gateway_rerun(self._kernels.code_file(version.folder, version.meta), gateway, config.slug,
                                        tuple(mounts), root / "sandbox",
                                        timeout_seconds=timeout)
        log = [{"stream_name": stream, "time": 0.0, "data": text}
               for stream, text in (("stdout", result.notebook_stdout), ("stderr", result.notebook_stderr)) if text]
        verdict = verdict_name(result.report)
        if verdict != Verdict.OK or result.submission is None:
            self._finish(ref, error=verdict if verdict != Verdict.OK else SCORING_ERROR, log=log,
                         reason=verdict_reason(result.report))
            return
        scored = root / "submission.csv"  # the scorer reads CSV; the gateway wrote parquet
        pd.read_parquet(result.submission).to_csv(scored, index=False)
        self._score(ref, config, competition_dir=self._dir(config.slug), submission_file=scored, log=log,
                    total_bytes=result.submission.stat().st_size)

    def _finish(self, ref: str, error: str | None, log: list[dict[str, Any]], reason: str = "",
                public: str | None = None, private: str | None = None, total_bytes: int | None = None) -> None:
        if self._jobs.closed:  # the server stopped during the rerun: the next one scores it again
            return
        folder = self._store.path("submissions", ref)
        self._store.write_text(folder / "log.json", json.dumps(log))
        with self._store.lock:
            record = self._load(int(ref)) or {}
            # The local Kaggle names the reason a scoring error hides (kaggle.com never does): kkb submit shows it.
            described = f"{error}: {reason}" if error == SCORING_ERROR and reason else error
            record.update({"status": ERROR if error else COMPLETE, "errorDescription": described, "reason": reason,
                           "publicScore": public, "privateScore": private, "totalBytes": total_bytes,
                           "finished": now()})
            self._save(int(ref), record)

    # -- internals ---------------------------------------------------------------------------

    def _dir(self, slug: str) -> Path:
        return self._store.path("competitions", names.slug(slug, "competition slug"))

    def _record(self, slug: str) -> Json | None:
        if not names.is_slug(slug):
            return None
        record: Json | None = self._store.read(self._dir(slug) / "competition.json")
        return record

    def _require(self, slug: str) -> CompetitionConfig:
        config = self.config(slug)
        if config is None:
            raise not_found(f"Competition {slug!r} not found")
        return config

    def _load(self, ref: int) -> Json | None:
        submission: Json | None = self._store.read(self._store.path("submissions", ref, "submission.json"))
        return submission

    def _save(self, ref: int, record: Json) -> None:
        self._store.write(self._store.path("submissions", ref, "submission.json"), record)

    def _all_submissions(self) -> list[Json]:
        root = self._store.path("submissions")
        return [r for r in (self._store.read(p) for p in root.glob("*/submission.json")) if r] if root.exists() else []

    def _used_today(self, slug: str, user: str) -> int:
        """Submissions counted against today's (UTC) allowance; Kaggle's own errors do not count."""
        midnight = self._clock.day_start()
        return sum(1 for s in self._all_submissions()
                   if s["competition"] == slug and s["user"] == user and midnight <= s["date"] < midnight + DAY_S
                   and not str(s.get("errorDescription") or "").startswith(KAGGLE_ERROR))

    def _api_competition(self, slug: str, call: Call) -> Json:
        data = self._record(slug) or {}
        return compact({
            "id": data.get("id", 0), "ref": f"{call.base_url}/competitions/{slug}", "title": data.get("title"),
            "url": f"{call.base_url}/competitions/{slug}", "description": data.get("description") or None,
            "category": "Featured", "reward": "Knowledge", "organizationName": "local Kaggle",
            "deadline": iso(4102444800.0),  # 2100-01-01: local competitions never close
            "enabledDate": iso(data.get("created", now())), "maxDailySubmissions": data.get("daily_submission_limit"),
            "evaluationMetric": data.get("metric"), "isKernelsSubmissionsOnly": True, "hostName": "local",
            "teamCount": len({s["user"] for s in self._all_submissions() if s["competition"] == slug}),
            "userHasEntered": call.user is not None,
        })

    def _api_submission(self, record: Json, base_url: str) -> Json:
        return compact({
            "ref": record["ref"], "totalBytes": record.get("totalBytes"), "date": iso(record["date"]),
            "description": record.get("description") or None, "errorDescription": record.get("errorDescription"),
            "fileName": record["fileName"], "publicScore": record.get("publicScore"),
            "privateScore": record.get("privateScore"), "status": record["status"],
            "submittedBy": record["user"], "submittedByRef": record["user"], "teamName": record["user"],
            "url": f"{base_url}/competitions/{record['competition']}/submissions#{record['ref']}",
        })


def _check_submittable(version: KernelVersion, config: CompetitionConfig, file_name: str) -> None:
    status = version.session.get("status")
    if status != COMPLETE:
        raise bad_request(f"Notebook version {version.number} of {version.ref} has not completed successfully "
                          f"(status {status}); only a completed version can be submitted")
    if version.meta.get("enableInternet", True):
        raise bad_request("Submissions to this competition must have internet access disabled: "
                          "push a version with enable_internet false")
    if config.slug not in version.meta["mounts"]["competitions"]:
        raise bad_request(f"The notebook must have the competition's data ({config.slug}) attached")
    if not (version.output_dir / file_name).is_file():
        raise bad_request(f"Notebook version {version.number} of {version.ref} has no output file named {file_name!r}")


def _format(value: float) -> str:
    return f"{value:.5f}"

