"""``datasets.DatasetApiService``: datasets whose every version is a full snapshot of its files.

As on Kaggle: a version holds exactly the files uploaded for it (files not uploaded again are gone),
archives are unpacked into folders, and a new version is not READY for a while (``ServerSettings``
plus the ``datasetNotReady`` fault). Kernels mount the newest READY version. Validation problems are
answered in the body (``status: "error"``, the client exits 0 on them); an unknown or invisible
dataset is a 404.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from builder.local_kaggle import names
from builder.local_kaggle.blobs import Blob, Blobs
from builder.local_kaggle.dataset_metadata import apply_settings, dataset_info
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.files import UploadRejected, storage_url, store_version, tree, uploaded_files, zip_tree
from builder.local_kaggle.listing import DatasetRow, list_datasets
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.store import OwnedRecords, Store, VersionRecord
from builder.local_kaggle.wire import ApiError, Call, Handler, Json, Redirect, compact, iso, not_found, now, paginate_call

SERVICE = "datasets.DatasetApiService"
# Licenses Kaggle accepts in dataset-metadata.json (its public docs).
LICENSES = frozenset({
    "CC0-1.0", "CC-BY-SA-3.0", "CC-BY-SA-4.0", "CC-BY-NC-SA-4.0", "GPL-2.0", "ODbL-1.0", "DbCL-1.0",
    "copyright-authors", "other", "unknown", "CC-BY-4.0", "CC-BY-NC-4.0", "PDDL", "CC-BY-3.0",
    "CC-BY-3.0-IGO", "US-Government-Works", "CC-BY-NC-SA-3.0-IGO", "CDLA-Permissive-1.0",
    "CDLA-Sharing-1.0", "CC-BY-ND-4.0", "CC-BY-NC-ND-4.0", "ODC-BY-1.0", "LGPL-3.0", "AGPL-3.0",
    "FDL-1.3", "EU-ODP-Legal-Notice", "apache-2.0", "GPL-3.0",
})
READY, PROCESSING, DELETED = "READY", "BLOBS_RECEIVED", "DELETED"


@dataclass(frozen=True)
class MountedDataset:
    """A dataset version a kernel run mounts at ``datasets/<owner>/<slug>``."""

    owner: str
    slug: str
    version: int
    files: Path
    pinned: int | None = None  # the version the source named, when it named one (mounted or dropped)


class Datasets:
    def __init__(self, store: Store, blobs: Blobs, faults: Faults, settings: ServerSettings) -> None:
        self._store = store
        self._records = OwnedRecords(store, "datasets", "dataset.json")
        self._blobs = blobs
        self._faults = faults
        self._settings = settings

    def routes(self) -> dict[str, Handler]:
        handlers: dict[str, Handler] = {
            "CreateDataset": self.create_dataset,
            "CreateDatasetVersion": self.create_dataset_version,
            "CreateDatasetVersionById": self.create_dataset_version_by_id,
            "GetDatasetStatus": self.get_dataset_status,
            "GetDataset": self.get_dataset,
            "ListDatasetFiles": self.list_dataset_files,
            "DownloadDataset": self.download_dataset,
            "GetDatasetMetadata": self.get_dataset_metadata,
            "ListDatasets": self.list_datasets,
            "DeleteDataset": self.delete_dataset,
            "UpdateDatasetMetadata": self.update_dataset_metadata,
        }
        return {f"{SERVICE}/{name}": handler for name, handler in handlers.items()}

    # -- create ------------------------------------------------------------------------------

    def create_dataset(self, call: Call) -> Json:
        user = call.require_user()
        owner = call.text("ownerSlug") or user
        slug = call.text("slug")
        title = call.text("title")
        license_name = call.text("licenseName") or "unknown"
        problem = _check_new(owner, user, slug, title, license_name)
        if problem:
            return _failed(problem)
        with self._store.lock:
            if self._records.load(owner, slug) is not None:
                return _failed(f'The requested slug "{slug}" is already in use by a dataset. Please choose another slug.')
            record = {
                "id": self._store.next_id("dataset"), "owner": owner, "slug": slug, "title": title,
                "subtitle": call.body.get("subtitle") or "", "description": call.body.get("description") or "",
                "licenseName": license_name, "isPrivate": call.flag("isPrivate", False),
                "keywords": call.strings("categoryIds"), "created": now(), "versions": [],
            }
            try:
                self._add_version(record, user, call.body, notes="Initial release")
            except UploadRejected as exc:
                shutil.rmtree(self._records.dir(owner, slug), ignore_errors=True)
                return _failed(str(exc))
        return self._created(record, call.base_url)

    def create_dataset_version(self, call: Call) -> Json:
        user = call.require_user()
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), user)
        return self._new_version(record, user, call)

    def create_dataset_version_by_id(self, call: Call) -> Json:
        user = call.require_user()
        wanted = call.integer("id")
        record = next((r for r in self._live_records() if r["id"] == wanted), None)
        if record is None or not self._can_read(record, user):
            raise not_found(f"Dataset with id {wanted} not found")
        return self._new_version(record, user, call)

    def _new_version(self, record: Json, user: str, call: Call) -> Json:
        if record["owner"] != user:
            return _failed("You do not have permission to create a new version of this dataset")
        body = call.body.get("body") or {}
        with self._store.lock:
            record = self._records.load(record["owner"], record["slug"]) or record
            for key in ("subtitle", "description"):
                if body.get(key):
                    record[key] = body[key]
            if body.get("categoryIds"):
                record["keywords"] = list(body["categoryIds"])
            try:
                self._add_version(record, user, body, notes=str(body.get("versionNotes") or ""))
            except UploadRejected as exc:
                return _failed(str(exc))
            if body.get("deleteOldVersions"):
                self._delete_old_versions(record)
        return self._created(record, call.base_url)

    def _add_version(self, record: Json, user: str, body: Json, notes: str) -> None:
        """Materialise the uploads as the next version (a full snapshot) and save the record."""
        uploads = list(self._uploads(user, body))
        if not uploads:
            raise UploadRejected("A dataset version needs at least one file")
        number = 1 + max((v["number"] for v in record["versions"]), default=0)
        store_version(uploads, self._records.dir(record["owner"], record["slug"]) / "versions" / str(number))
        created = now()
        ref = f"{record['owner']}/{record['slug']}"
        record["versions"].append({
            "number": number, "notes": notes, "created": created, "creator": user,
            "readyAt": created + self._settings.dataset_ready_seconds,
            "pollsNeeded": self._settings.dataset_ready_polls + self._faults.take_dataset_stall(ref),
            "polls": 0, "status": PROCESSING,
        })
        record["fileInfo"] = {**record.get("fileInfo", {}), **self._descriptions(user, body)}
        self._records.save(record)

    def _descriptions(self, user: str, body: Json) -> dict[str, Json]:
        """What the client sent from dataset-metadata.json's ``resources`` (``files[].description/columns``)."""
        described: dict[str, Json] = {}
        for entry in body.get("files") or []:
            if not isinstance(entry, dict) or not (entry.get("description") or entry.get("columns")):
                continue
            columns = [compact({"name": str(c.get("name", "")), "description": c.get("description") or None,
                                "type": c.get("type") or None}) for c in entry.get("columns") or [] if isinstance(c, dict)]
            name = self._blobs.resolve(str(entry.get("token")), user, "DATASET").name
            described[name] = compact({"description": entry.get("description") or None, "columns": columns})
        return described

    def _uploads(self, user: str, body: Json) -> list[tuple[str, Blob]]:
        return uploaded_files(self._blobs, user, body, "DATASET")

    def _delete_old_versions(self, record: Json) -> None:
        latest = max(v["number"] for v in record["versions"])
        for version in record["versions"]:
            if version["number"] != latest and version["status"] != DELETED:
                version["status"] = DELETED
                shutil.rmtree(self._records.dir(record["owner"], record["slug"]) / "versions" / str(version["number"]),
                              ignore_errors=True)
        self._records.save(record)

    def _created(self, record: Json, base_url: str) -> Json:
        ref = f"{record['owner']}/{record['slug']}"
        return {"ref": ref, "url": f"{base_url}/datasets/{ref}", "status": "ok", "error": "", "invalidTags": []}

    # -- read --------------------------------------------------------------------------------

    def get_dataset_status(self, call: Call) -> Json:
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), call.user)
        latest = _live(record)[-1]
        ready = self._ready(record, latest, count_poll=True)
        return {"status": READY if ready else latest["status"]}

    def get_dataset(self, call: Call) -> Json:
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), call.user)
        self._count(record, "views", call.user)
        return self._api_dataset(record, call.base_url)

    def list_datasets(self, call: Call) -> Json:
        """Filters and order as ``listing.list_datasets`` decides (group, user, search, fileType, license,
        tagIds, minSize/maxSize, sortBy), then paged by ``pageToken`` or ``page``."""
        rows = [self._row(r) for r in self._live_records() if self._can_read(r, call.user)]
        page, token = paginate_call(list_datasets(rows, call), call)
        return {"datasets": [self._api_dataset(row.record, call.base_url) for row in page], "nextPageToken": token}

    def _row(self, record: Json) -> DatasetRow:
        current = self._current(record)
        files = tree(self._files_dir(record, current)) if current else []
        ref = f"{record['owner']}/{record['slug']}"
        kernels = OwnedRecords(self._store, "kernels", "kernel.json").all()
        return DatasetRow(record, total_bytes=sum(p.stat().st_size for _, p in files), files=[rel for rel, _ in files],
                          updated=current["created"] if current else record["created"],
                          downloads=int(record.get("counters", {}).get("downloads", 0)),
                          notebooks=sum(1 for k in kernels if ref in k.get("datasetSources", [])))

    def list_dataset_files(self, call: Call) -> Json:
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), call.user)
        try:
            version = self._version(record, call.integer("datasetVersionNumber"))
        except ApiError as exc:
            return {"datasetFiles": [], "errorMessage": exc.message}
        folder = self._files_dir(record, version)
        ref = f"{record['owner']}/{record['slug']}"
        rows = [{
            "ref": f"{ref}/{rel}", "datasetRef": ref, "ownerRef": record["owner"], "name": rel,
            "creationDate": iso(version["created"]), "totalBytes": path.stat().st_size,
            "url": storage_url(self._store, call.base_url, path),
        } for rel, path in tree(folder)]
        page, token = paginate_call(rows, call)
        return {"datasetFiles": page, "nextPageToken": token}

    def download_dataset(self, call: Call) -> Redirect:
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), call.user)
        version = self._version(record, call.integer("datasetVersionNumber"))
        folder = self._files_dir(record, version)
        name = call.text("fileName")
        if name:
            target = names.inside(folder, name, "file name")
            if not target.is_file():
                raise not_found(f"File {name!r} not found in {record['owner']}/{record['slug']} version {version['number']}")
        else:
            with self._store.lock:
                target = zip_tree(folder, folder.parent / "archive" / f"{record['slug']}.zip")
        self._count(record, "downloads", call.user)
        return Redirect(storage_url(self._store, call.base_url, target))

    def get_dataset_metadata(self, call: Call) -> Json:
        """``DatasetInfo`` with collaborators, the files ("resources") and the counters."""
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), call.user)
        self._count(record, "views", call.user)
        current = self._current(record)
        files = [(rel, path.stat().st_size) for rel, path in tree(self._files_dir(record, current))] if current else []
        return {"info": dataset_info(record, files)}

    def update_dataset_metadata(self, call: Call) -> Json:
        """``kaggle datasets metadata --update``: ``{errors: [...]}``, nothing changed when there is one."""
        user = call.require_user()
        with self._store.lock:
            record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), user)
            if record["owner"] != user and not any(c.get("username") == user and c.get("role") == "WRITER"
                                                   for c in record.get("collaborators", [])):
                return {"errors": ["You do not have permission to update this dataset's metadata"]}
            current = self._current(record)
            file_names = {rel for rel, _ in tree(self._files_dir(record, current))} if current else set()
            errors = apply_settings(record, call.body.get("settings") or {}, file_names,
                                    lambda name: name in self._users(), LICENSES)
            if not errors:
                self._records.save(record)
        return {"errors": errors}

    def _users(self) -> set[str]:
        return set(self._store.read(self._store.path("users.json"), {}) or {})

    def _count(self, record: Json, counter: str, user: str | None) -> None:
        """Views and downloads, as Kaggle counts them: the owner's own do not count."""
        if user == record["owner"]:
            return
        with self._store.lock:
            fresh = self._records.load(record["owner"], record["slug"]) or record
            counters = fresh.setdefault("counters", {})
            counters[counter] = int(counters.get(counter, 0)) + 1
            self._records.save(fresh)

    def delete_dataset(self, call: Call) -> Json:
        user = call.require_user()
        record = self._visible(call.text("ownerSlug"), call.text("datasetSlug"), user)
        if record["owner"] != user:
            return {"error": "You do not have permission to delete this dataset"}
        with self._store.lock:
            shutil.rmtree(self._records.dir(record["owner"], record["slug"]), ignore_errors=True)
        return {}

    # -- for kernel runs ---------------------------------------------------------------------

    def mount(self, source: str, user: str) -> MountedDataset | None:
        """The version a kernel with ``source`` (``owner/slug`` or ``owner/slug/N``) mounts, ``None`` if invalid.

        The newest READY version, so a kernel pushed before a new version is ready runs on the previous one,
        as on Kaggle; a dataset with no ready version is not a valid source. A pin ``/N`` must name a ready
        version, and is dropped for the newest one unless ``ServerSettings.honour_pins``; a ``staleMount``
        fault mounts the version before the one chosen.
        """
        found = self._records.source(source, lambda record: self._can_read(record, user))
        if found is None:
            return None
        record, number = found
        ready = [v for v in reversed(_live(record)) if self._ready(record, v)]  # newest first
        pinned = int(number) if number is not None and number.isdigit() else None
        if not ready or (number is not None and pinned not in [v["number"] for v in ready]):
            return None
        chosen = next(i for i, v in enumerate(ready) if v["number"] == pinned) \
            if pinned is not None and self._settings.honour_pins else 0
        if self._faults.take_stale_mount(source) and chosen + 1 < len(ready):
            chosen += 1
        version = ready[chosen]
        return MountedDataset(record["owner"], record["slug"], version["number"], self._files_dir(record, version),
                              pinned)

    # -- internals ---------------------------------------------------------------------------

    def _live_records(self) -> list[Json]:
        return [r for r in self._records.all() if _live(r)]

    def _files_dir(self, record: Json, version: VersionRecord) -> Path:
        return self._records.dir(record["owner"], record["slug"]) / "versions" / str(version["number"]) / "files"

    def _can_read(self, record: Json, user: str | None) -> bool:
        return (not record["isPrivate"] or record["owner"] == user
                or any(c.get("username") == user for c in record.get("collaborators", [])))

    def _visible(self, owner: str, slug: str, user: str | None) -> Json:
        record: Json | None = self._records.load(owner, slug)
        if record is None or not _live(record) or not self._can_read(record, user):
            raise not_found(f"Dataset {owner}/{slug} not found")
        return record

    def _ready(self, record: Json, version: VersionRecord, count_poll: bool = False) -> bool:
        """Whether ``version`` is READY; a status poll that sees it not ready counts towards readiness.

        The change is made on a fresh copy of the record under the lock, so that a version added by
        another thread meanwhile is not overwritten.
        """
        if version["status"] in (READY, DELETED):
            return version["status"] == READY
        with self._store.lock:
            fresh: Json = self._records.load(record["owner"], record["slug"]) or record
            versions: list[VersionRecord] = fresh["versions"]
            stored = next((v for v in versions if v["number"] == version["number"]), version)
            ready = stored["status"] == READY or (
                now() >= stored["readyAt"] and stored["polls"] >= stored["pollsNeeded"])
            if ready and stored["status"] != READY:
                stored["status"] = READY
                self._records.save(fresh)
            elif not ready and count_poll:
                stored["polls"] += 1
                self._records.save(fresh)
            version.update(stored)
        return ready

    def _current(self, record: Json, ready_only: bool = False) -> VersionRecord | None:
        live = _live(record)
        ready = [v for v in live if self._ready(record, v)]
        if ready:
            return ready[-1]
        return None if ready_only or not live else live[-1]

    def _version(self, record: Json, number: int | None) -> VersionRecord:
        if number is None:
            version = self._current(record)
        else:
            version = next((v for v in _live(record) if v["number"] == number), None)
        if version is None:
            raise not_found(f"Version {number} of {record['owner']}/{record['slug']} not found")
        return version

    def _api_dataset(self, record: Json, base_url: str) -> Json:
        ref = f"{record['owner']}/{record['slug']}"
        current = self._current(record)
        folder = self._files_dir(record, current) if current else None
        files = tree(folder) if folder else []
        return compact({
            "id": record["id"], "ref": ref, "title": record["title"], "subtitle": record["subtitle"] or None,
            "description": record["description"] or None, "creatorName": record["owner"],
            "creatorUrl": record["owner"], "ownerName": record["owner"], "ownerRef": record["owner"],
            "url": f"{base_url}/datasets/{ref}", "isPrivate": record["isPrivate"],
            "licenseName": record["licenseName"], "totalBytes": sum(p.stat().st_size for _, p in files),
            "lastUpdated": iso(current["created"]) if current else None,
            "currentVersionNumber": current["number"] if current else None,
            "tags": [{"ref": k, "name": k} for k in record["keywords"]],
            "downloadCount": int(record.get("counters", {}).get("downloads", 0)),
            "viewCount": int(record.get("counters", {}).get("views", 0)), "voteCount": 0,
            "versions": [compact({
                "versionNumber": v["number"], "creationDate": iso(v["created"]), "creatorName": v.get("creator"),
                "creatorRef": v.get("creator"), "versionNotes": v["notes"] or None,
                "status": "ready" if self._ready(record, v) else "pending",
            }) for v in _live(record)],
        })


def _live(record: Json) -> list[VersionRecord]:
    versions: list[VersionRecord] = record["versions"]
    return [v for v in versions if v["status"] != DELETED]


def _failed(message: str) -> Json:
    return {"status": "error", "error": message, "invalidTags": []}


def _check_new(owner: str, user: str, slug: str, title: str, license_name: str) -> str | None:
    """What Kaggle refuses in a new dataset's metadata (the client checks some of it too)."""
    if owner != user:
        return f"You do not have permission to create datasets for {owner!r}"
    if not names.is_slug(slug):  # names.py's message, answered in the body as Kaggle answers metadata problems
        try:
            names.slug(slug, "slug")
        except ApiError as exc:
            return exc.message
    if not 6 <= len(slug) <= 50:
        return "The dataset slug must be between 6 and 50 characters"
    if not 6 <= len(title) <= 50:
        return "The dataset title must be between 6 and 50 characters"
    if license_name not in LICENSES:
        return f"Invalid license {license_name!r}"
    return None
