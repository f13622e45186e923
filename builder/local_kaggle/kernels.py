"""``kernels.KernelsApiService``: kernels, their versions, and the commit run of each version.

What Kaggle does and this copies:

* a new kernel's slug is ``slugify(title)``: pushing ``id: me/foo`` titled "Bar Baz" creates ``me/bar-baz``
  (and ``me/foo`` stays unknown: status on it is a 403 ``Permission 'kernels.get' was denied``);
* sources that do not exist (or are not visible) are listed in ``invalid*Sources`` and simply not
  attached; a dataset source mounts its newest READY version, a notebook source its newest COMPLETE one,
  fixed at push time; a version pin (``owner/slug/N``) is dropped unless ``ServerSettings.honour_pins``;
* each pushed version is a session of its owner's account (``accounts.py``): a GPU push over the session cap
  or without quota left is refused; QUEUED, then RUNNING in a background worker (billing), then COMPLETE or
  ERROR; what the run left in ``/kaggle/working`` is the version's output, next to its log;
* deleting a kernel ends its sessions (their billing stops) and drops what a run still going would report.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle.accounts import Accounts, accelerator_of
from builder.local_kaggle.datasets import Datasets
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.files import remove_tree, storage_url, tree
from builder.local_kaggle.image import declare_image
from builder.local_kaggle.kernel_push import KERNEL_FIELDS, PushRefused, api_metadata, check_code
from builder.local_kaggle.listing import KernelRow, list_kernels
from builder.local_kaggle.models import MountedModel
from builder.local_kaggle.runner import KernelRunner, RunRequest, RunResult
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.store import OwnedRecords, Store
from builder.local_kaggle.wire import (
    ApiError,
    Call,
    Handler,
    Json,
    compact,
    forbidden,
    iso,
    not_found,
    now,
    paginate_call,
    version_number,
)
from builder.local_kaggle.worker import JobQueue
from builder.project.ids import kernel_slug
from builder.run.sandbox import Mount

SERVICE = "kernels.KernelsApiService"
QUEUED, RUNNING, COMPLETE, ERROR, NEW_SCRIPT = "QUEUED", "RUNNING", "COMPLETE", "ERROR", "NEW_SCRIPT"
_SOURCE_SUFFIX = {"notebook": ".ipynb", "python": ".py", "r": ".r", "rmarkdown": ".rmd"}


@dataclass(frozen=True)
class KernelVersion:
    """One pushed version, as the competitions service needs it for a code submission."""

    owner: str
    slug: str
    number: int
    meta: Json          # version.json
    session: Json       # session.json
    folder: Path        # kernels/<owner>/<slug>/versions/<n>

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.slug}"

    @property
    def output_dir(self) -> Path:
        return self.folder / "output"


class Kernels:
    def __init__(self, store: Store, datasets: Datasets, faults: Faults, settings: ServerSettings,
                 runner: KernelRunner, jobs: JobQueue, accounts: Accounts) -> None:
        self._store = store
        self._accounts = accounts
        self._records = OwnedRecords(store, "kernels", "kernel.json")
        self._datasets = datasets
        self._faults = faults
        self._settings = settings
        self._runner = runner
        self._jobs = jobs
        # What a competition source mounts in a commit run (its public/ folder), None for an unknown slug.
        # Set by the server once the competitions service exists (it needs this service too).
        self.competition_data: Callable[[str], Path | None] = lambda slug: None
        # What a model source (owner/model/framework/variation/VERSION) mounts for a user, None if invalid;
        # set by the server (builder.local_kaggle.models).
        self.model_mount: Callable[[str, str], MountedModel | None] = lambda source, user: None

    def routes(self) -> dict[str, Handler]:
        return {f"{SERVICE}/{name}": handler for name, handler in {
            "SaveKernel": self.save_kernel,
            "GetKernelSessionStatus": self.get_kernel_session_status,
            "ListKernelSessionOutput": self.list_kernel_session_output,
            "GetKernel": self.get_kernel,
            "ListKernels": self.list_kernels,
            "ListKernelFiles": self.list_kernel_files,
            "DeleteKernel": self.delete_kernel,
        }.items()}

    # -- push --------------------------------------------------------------------------------

    def save_kernel(self, call: Call) -> Json:
        user = call.require_user()
        quick = call.text("kernelExecutionType").upper() == "QUICK_SAVE"
        with self._store.lock:
            try:
                record = self._target(call, user)
                self._check_machine_shape(call)
                accelerator = accelerator_of({"machineShape": call.body.get("machineShape"),
                                              "enableGpu": call.flag("enableGpu", False),
                                              "enableTpu": call.flag("enableTpu", False)})
                self._check_session(user, None if quick else accelerator)
            except PushRefused as exc:
                return {"ref": "", "url": "", "error": str(exc)}
            sources, invalid = self._sources(call, user)
            number = int(record.get("latestVersion", 0)) + 1
            meta = self._version_meta(call, record, number, sources, quick)
            folder = self._records.dir(record["owner"], record["slug"]) / "versions" / str(number)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / meta["sourceFile"]).write_text(call.text("text"), encoding="utf-8")
            self._store.write(folder / "version.json", meta)
            session: Json = {"status": NEW_SCRIPT if quick else QUEUED, "queued": now()}
            if not quick:  # a run is a session of the account: it holds a slot from now and bills once it starts
                session["sessionId"] = self._accounts.open(user, f"{record['owner']}/{record['slug']}", number,
                                                           accelerator)
            self._store.write(folder / "session.json", session)
            record.update({k: meta[k] for k in KERNEL_FIELDS})
            record["latestVersion"] = number
            record["lastPushed"] = meta["created"]
            self._records.save(record)
        if not quick:  # the session in the job: a kernel deleted and pushed again has a v1 of its own
            self._jobs.put(("commit", record["owner"], record["slug"], str(number), str(session.get("sessionId", ""))))
        ref = f"{record['owner']}/{record['slug']}"
        return {"ref": f"/code/{ref}", "url": f"{call.base_url}/code/{ref}", "versionNumber": number,
                "error": "", "invalidTags": [], "kernelId": record["id"], **invalid}

    def _check_session(self, user: str, accelerator: str | None) -> None:
        """A GPU or TPU push the account cannot start now: no quota left, or at the GPU session cap."""
        refusal = self._accounts.refusal(user, accelerator)
        if refusal is None:
            return
        if refusal.status is not None:
            raise ApiError(refusal.status, refusal.message)
        raise PushRefused(refusal.message)

    def _target(self, call: Call, user: str) -> Json:
        """The kernel this push versions, created when new (its slug comes from its title)."""
        if call.integer("id") is not None:
            record = next((r for r in self._records.all() if r["id"] == call.integer("id")), None)
            if record is None or record["owner"] != user:
                raise PushRefused("Notebook not found")
            return self._retitle(record, call)
        owner, _, requested = call.text("slug").rpartition("/")
        owner = owner or user
        if owner != user:
            raise PushRefused("Notebook not found")
        existing = self._records.load(owner, requested)
        if existing is not None:
            return self._retitle(existing, call)
        title = call.text("newTitle") or requested
        slug = kernel_slug(title)
        if len(title) < 5 or len(slug) < 5:
            raise PushRefused("The title must be at least 5 characters and give a slug of at least 5 characters")
        if len(title) > 50:
            raise PushRefused("The title must be at most 50 characters")
        check_code(call)
        existing = self._records.load(owner, slug)
        if existing is not None:  # the title names a kernel that exists: Kaggle versions that one
            return self._retitle(existing, call)
        return {"id": self._store.next_id("kernel"), "owner": owner, "slug": slug, "title": title,
                "created": now(), "latestVersion": 0}

    def _check_machine_shape(self, call: Call) -> None:
        shape, allowed = call.body.get("machineShape"), self._settings.machine_shapes
        if shape and allowed is not None and shape not in allowed:
            raise PushRefused(f"Machine shape {shape} is not available to this account")

    def _retitle(self, record: Json, call: Call) -> Json:
        check_code(call)
        if call.text("newTitle"):
            record["title"] = call.text("newTitle")
        return record

    def _sources(self, call: Call, user: str) -> tuple[Json, Json]:
        """Valid sources pinned for this version, and the invalid ones named like Kaggle names them."""
        datasets, bad_datasets = [], []
        for source in call.strings("datasetDataSources"):
            mounted = self._datasets.mount(source, user)
            if mounted is None:
                bad_datasets.append(source)
            else:
                datasets.append({"ref": source, "owner": mounted.owner, "slug": mounted.slug, "version": mounted.version,
                                 "pinned": mounted.pinned})
        competitions: list[str] = []
        bad_competitions: list[str] = []
        for slug in call.strings("competitionDataSources"):
            (competitions if self.competition_data(slug) is not None else bad_competitions).append(slug)
        kernels, bad_kernels = [], []
        for source in call.strings("kernelDataSources"):
            pinned = self._kernel_source(source, user)
            if pinned is None:
                bad_kernels.append(source)
            else:
                kernels.append(pinned)
        models, bad_models = [], []
        for source in call.strings("modelDataSources"):
            model = self.model_mount(source, user)
            if model is None:
                bad_models.append(source)
            else:
                models.append({"ref": source, "target": model.target, "files": self._store.relative(model.files)})
        return ({"datasets": datasets, "competitions": competitions, "kernels": kernels, "models": models},
                {"invalidDatasetSources": bad_datasets, "invalidCompetitionSources": bad_competitions,
                 "invalidKernelSources": bad_kernels, "invalidModelSources": bad_models})

    def _kernel_source(self, source: str, user: str) -> Json | None:
        """What a notebook source mounts: its newest COMPLETE version (a pin ``/N`` names a complete version, and is
        dropped for the newest unless ``honour_pins``); a ``staleMount`` fault mounts the one before."""
        found = self._records.source(source, lambda record: self._can_read(record, user))
        if found is None:
            return None
        record, asked = found
        folder = self._records.dir(record["owner"], record["slug"]) / "versions"
        complete = [number for number in range(int(record.get("latestVersion", 0)), 0, -1)
                    if (self._store.read(folder / str(number) / "session.json") or {}).get("status") == COMPLETE]
        pinned = int(asked.lstrip("v")) if asked is not None and asked.lstrip("v").isdigit() else None
        if not complete or (asked is not None and pinned not in complete):
            return None
        chosen = complete.index(pinned) if pinned is not None and self._settings.honour_pins else 0
        if self._faults.take_stale_mount(source) and chosen + 1 < len(complete):
            chosen += 1
        return {"ref": source, "owner": record["owner"], "slug": record["slug"], "version": complete[chosen],
                "pinned": pinned}

    def _version_meta(self, call: Call, record: Json, number: int, sources: Json, quick: bool) -> Json:
        kernel_type = call.text("kernelType", "notebook").lower()
        language = call.text("language", "python").lower()
        return {
            "number": number, "created": now(), "title": record["title"], "language": language,
            "kernelType": kernel_type,
            "sourceFile": "source" + (_SOURCE_SUFFIX["notebook"] if kernel_type == "notebook" else _SOURCE_SUFFIX.get(language, ".txt")),
            "isPrivate": call.flag("isPrivate", True), "enableGpu": call.flag("enableGpu", False),
            "enableTpu": call.flag("enableTpu", False), "enableInternet": call.flag("enableInternet", True),
            "machineShape": call.body.get("machineShape"), "dockerImage": call.body.get("dockerImage"),
            "keywords": call.strings("categoryIds"), "timeoutSeconds": call.integer("sessionTimeoutSeconds"),
            "executionType": "QUICK_SAVE" if quick else "SAVE_AND_RUN_ALL",
            "datasetSources": [d["ref"] for d in sources["datasets"]],
            "competitionSources": sources["competitions"],
            "kernelSources": [k["ref"] for k in sources["kernels"]],
            "modelSources": [m["ref"] for m in sources["models"]],
            "mounts": sources,
        }

    # -- read --------------------------------------------------------------------------------

    def get_kernel_session_status(self, call: Call) -> Json:
        version = self.version(call.text("userName"), call.text("kernelSlug"),
                               version_number(call.body.get("versionLabel")), call.user)
        return compact({"status": version.session["status"], "failureMessage": version.session.get("failureMessage")})

    def list_kernel_session_output(self, call: Call) -> Json:
        version = self.version(call.text("userName"), call.text("kernelSlug"),
                               version_number(call.body.get("versionLabel")), call.user)
        files = [{"fileName": rel, "url": storage_url(self._store, call.base_url, path)}
                 for rel, path in tree(version.output_dir)]
        page, token = paginate_call(files, call)
        log_path = version.folder / "log.json"
        log = log_path.read_text(encoding="utf-8") if log_path.exists() else None
        return compact({"files": page, "log": log, "nextPageToken": token})

    def get_kernel(self, call: Call) -> Json:
        version = self.version(call.text("userName"), call.text("kernelSlug"),
                               version_number(call.body.get("versionLabel")), call.user)
        record = self._records.load(version.owner, version.slug) or {}
        source = (version.folder / version.meta["sourceFile"]).read_text(encoding="utf-8")
        return {"metadata": api_metadata(record, version.meta),
                "blob": {"source": source, "language": version.meta["language"],
                         "kernelType": version.meta["kernelType"], "slug": version.slug}}

    def list_kernels(self, call: Call) -> Json:
        """Filters and order as ``listing.list_kernels`` decides (``--mine`` is ``group: PROFILE``)."""
        rows = [KernelRow(r, self._output_names(r)) for r in self._records.all() if self._can_read(r, call.user)]
        page, token = paginate_call(list_kernels(rows, call), call)
        return {"kernels": [api_metadata(row.record, row.record) for row in page], "nextPageToken": token}

    def list_kernel_files(self, call: Call) -> Json:
        """``kaggle kernels files``: the output files of a version (``ApiListKernelFilesItem``)."""
        version = self.version(call.text("userName"), call.text("kernelSlug"),
                               version_number(call.body.get("versionLabel")), call.user)
        rows = [{"name": rel, "size": path.stat().st_size, "creationDate": iso(path.stat().st_mtime)}
                for rel, path in tree(version.output_dir)]
        page, token = paginate_call(rows, call)
        return {"files": page, "nextPageToken": token}

    def _output_names(self, record: Json) -> list[str]:
        folder = self._records.dir(record["owner"], record["slug"]) / "versions" / str(record.get("latestVersion", 0))
        return [rel for rel, _ in tree(folder / "output")]

    def delete_kernel(self, call: Call) -> Json:
        user = call.require_user()
        version = self.version(call.text("userName"), call.text("kernelSlug"), None, user)
        if version.owner != user:
            return {"errorMessage": "You do not have permission to delete this notebook"}
        with self._store.lock:
            self._accounts.end_kernel(version.ref, "deleted")  # Kaggle's one way to stop a session: billing ends
            shutil.rmtree(self._records.dir(version.owner, version.slug), ignore_errors=True)
        return {}

    def version(self, owner: str, slug: str, number: int | None, user: str | None) -> KernelVersion:
        """A visible kernel's version (the latest when ``number`` is None); Kaggle's 403 when not visible."""
        record = self._records.load(owner, slug)
        if record is None or not self._can_read(record, user):
            raise forbidden("Permission 'kernels.get' was denied")
        number = number or int(record.get("latestVersion", 0))
        folder = self._records.dir(owner, slug) / "versions" / str(number)
        meta = self._store.read(folder / "version.json")
        if meta is None:
            raise not_found(f"Version {number} of {owner}/{slug} not found")
        return KernelVersion(owner, slug, number, meta, self._store.read(folder / "session.json", {}), folder)

    # -- the commit run (worker side) --------------------------------------------------------

    def recover(self) -> None:
        """Re-queue versions whose run had not finished when the server last stopped."""
        root = self._store.path("kernels")
        for session_path in sorted(root.glob("*/*/versions/*/session.json")) if root.exists() else []:
            session = self._store.read(session_path, {})
            if session.get("status") in (QUEUED, RUNNING):
                folder = session_path.parent
                owner, slug = folder.parent.parent.parent.name, folder.parent.parent.name
                self._set_session(folder, status=QUEUED)
                self._jobs.put(("commit", owner, slug, folder.name, str(session.get("sessionId", ""))))

    def execute_commit(self, owner: str, slug: str, number: str, session: str = "") -> None:
        """Run a queued version; whatever goes wrong on the way ends it as ERROR with the exception, never RUNNING.

        ``session``: the session the job was queued for; a version of a kernel since deleted (and maybe pushed
        again, a v1 of its own) is not run."""
        folder = self._records.dir(owner, slug) / "versions" / number
        if str(self._store.read(folder / "session.json", {}).get("sessionId", "")) != session:
            return
        try:
            self._execute_commit(owner, slug, number, folder)
        except Exception as exc:  # the last line: a bug in the server ends the run, visibly, as Kaggle's error
            if self._jobs.closed:
                return
            self._finish(folder, ok=False, failure=f"Kaggle Error: {type(exc).__name__}: {exc}",
                         log=[{"stream_name": "stderr", "time": 0.0, "data": f"{type(exc).__name__}: {exc}\n"}])

    def _execute_commit(self, owner: str, slug: str, number: str, folder: Path) -> None:
        meta = self._store.read(folder / "version.json")
        session = self._store.read(folder / "session.json", {})
        if meta is None or session.get("status") not in (QUEUED, RUNNING):
            return
        self._set_session(folder, status=RUNNING, started=now())
        if session.get("sessionId") is not None:
            self._accounts.start(int(session["sessionId"]))
        fault = self._faults.take_kernel_failure(f"{owner}/{slug}", Scenario.COMMIT)
        if fault is not None:
            message = str(fault.get("message") or "RuntimeError: injected failure (local Kaggle fault)")
            self._finish(folder, ok=False, failure=message, log=injected_failure_log(message))
            return
        if meta["language"] not in ("python",):
            self._finish(folder, ok=False, failure=f"The local Kaggle runs Python kernels only, not {meta['language']}",
                         log=[])
            return
        root = self._store.path("runs", f"commit-{owner}-{slug}-{number}-{uuid.uuid4().hex[:8]}")
        try:
            request = RunRequest(notebook=self.code_file(folder, meta), mounts=self.mounts(meta),
                                 rerun=False, timeout_seconds=meta.get("timeoutSeconds") or self._settings.commit_timeout_seconds,
                                 root=root / "sandbox", kernel_type=meta["kernelType"],
                                 visible=self._settings.internet_folders if meta.get("enableInternet") else ())
            result = self._runner.run(request)
            if self._jobs.closed:  # the server stopped meanwhile: the next one runs this version again
                return
            if not self._still_ours(folder, session.get("sessionId")):
                return  # its kernel was deleted meanwhile (and maybe pushed again): nothing of this run is kept
            self._keep_output(result, folder / "output")
            declare_image(self._settings.image, folder / "output")  # the image this local Kaggle plays, if any
            self._finish(folder, ok=result.ok, failure=result.failure, log=result.log)
        except Exception as exc:  # a broken executor is "Kaggle Error", not a crashed worker
            if self._jobs.closed:
                return
            self._finish(folder, ok=False, failure=f"Kaggle Error: {type(exc).__name__}: {exc}",
                         log=[{"stream_name": "stderr", "time": 0.0, "data": f"{type(exc).__name__}: {exc}\n"}])
        finally:
            remove_tree(root)

    def mounts(self, meta: Json, competition_override: dict[str, Path] | None = None) -> tuple[Mount, ...]:
        """The inputs of a run: pinned dataset versions, competition data (``public/`` unless overridden,
        e.g. by ``hidden/`` for a scoring rerun) and other kernels' outputs."""
        override = competition_override or {}
        mounts: list[Mount] = []
        for pinned in meta["mounts"]["datasets"]:
            files = self._store.path("datasets", pinned["owner"], pinned["slug"], "versions", pinned["version"], "files")
            mounts.append(Mount(files, f"datasets/{pinned['owner']}/{pinned['slug']}"))
        for slug in meta["mounts"]["competitions"]:
            source = override.get(slug) or self.competition_data(slug)
            if source is not None:
                mounts.append(Mount(Path(source), f"competitions/{slug}"))
        for pinned in meta["mounts"]["kernels"]:
            output = self._records.dir(pinned["owner"], pinned["slug"]) / "versions" / str(pinned["version"]) / "output"
            mounts.append(Mount(output, f"notebooks/{pinned['owner']}/{pinned['slug']}"))
        for pinned in meta["mounts"].get("models", []):  # versions pushed before models existed have none
            mounts.append(Mount(self._store.path(pinned["files"]), pinned["target"]))
        return tuple(mounts)

    def code_file(self, folder: Path, meta: Json) -> Path:
        """The version's code as pushed: a notebook, or a script (``kernelType``), each run as Kaggle runs that form."""
        source: str = meta["sourceFile"]
        return folder / source

    def _keep_output(self, result: RunResult, output: Path) -> None:
        shutil.rmtree(output, ignore_errors=True)
        try:
            output.mkdir()  # never parents: a version deleted meanwhile must not come back as a bare folder
        except FileNotFoundError:
            return
        if not result.working_dir.is_dir():
            return
        for rel, path in tree(result.working_dir):
            if path.is_symlink():  # a link could point anywhere on this machine: not an output
                continue
            target = output / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)

    def _finish(self, folder: Path, ok: bool, failure: str | None, log: list[dict[str, Any]]) -> None:
        with self._store.lock:
            if not (folder / "version.json").is_file():
                return  # the kernel was deleted: its session ended then
            # Served verbatim as ListKernelSessionOutput's ``log``: a JSON array in Kaggle's key order.
            self._store.write_text(folder / "log.json", json.dumps(log))
            self._set_session(folder, status=COMPLETE if ok else ERROR, finished=now(),
                              failureMessage=None if ok else (failure or "The notebook failed"))
            number = self._store.read(folder / "session.json", {}).get("sessionId")
            if number is not None:
                self._accounts.end(int(number), "complete" if ok else "error")

    def _still_ours(self, folder: Path, session_id: Any) -> bool:
        """Whether the version this run belongs to still exists with this very session (not deleted, not re-pushed)."""
        current = self._store.read(folder / "session.json", {})
        return (folder / "version.json").is_file() and current.get("sessionId") == session_id

    def _set_session(self, folder: Path, **changes: Any) -> None:
        with self._store.lock:
            if not (folder / "version.json").is_file():
                return
            session = self._store.read(folder / "session.json", {})
            session.update(changes)
            self._store.write(folder / "session.json", {k: v for k, v in session.items() if v is not None})

    # -- internals ---------------------------------------------------------------------------

    def _can_read(self, record: Json, user: str | None) -> bool:
        return not record.get("isPrivate", True) or record["owner"] == user



def injected_failure_log(message: str) -> list[dict[str, Any]]:
    return [{"stream_name": "stderr", "time": 0.0,
             "data": f"Traceback (most recent call last):\n  (local Kaggle fault injection)\n{message}\n"}]

