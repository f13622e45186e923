"""``models.ModelApiService``: Kaggle Models, their variations ("instances") and versions, kept on disk.

The part of the API the real client (kaggle 2.2.5) uses to publish and read a model: ``CreateModel``
(``kaggle models create``), ``CreateModelInstance`` (the first version of a variation, with its
files), ``CreateModelInstanceVersion``, ``GetModel``, ``GetModelInstance`` (its ``versionNumber`` is
the newest *ready* version: kkb polls it as the model's status), ``ListModelInstanceVersionFiles``,
``DownloadModelInstanceVersion`` (one file by ``path``, or the whole version as ``<model>.tar.gz``).

Like datasets, each version is a full snapshot of what was uploaded for it (``dir_mode`` archives are
unpacked into folders), and a new version is ready only after ``ServerSettings.dataset_ready_seconds``
and ``dataset_ready_polls`` status polls. A private model is invisible (404) to anyone but its owner.
Kernel runs mount a version at ``models/<owner>/<model>/<framework>/<variation>/<version>``::

    <data>/models/<owner>/<slug>/model.json
    <data>/models/<owner>/<slug>/instances/<framework>/<variation>/versions/<n>/files/...

Frameworks travel as kagglesdk enum names (``MODEL_FRAMEWORK_PY_TORCH``) and appear in paths and
``model_sources`` in their short form (``pytorch``).
"""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from builder.local_kaggle.blobs import Blob, Blobs
from builder.local_kaggle.files import UploadRejected, storage_url, store_version, tree, uploaded_files
from builder.local_kaggle.names import SLUG
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.store import OwnedRecords, Store, VersionRecord
from builder.local_kaggle.wire import Call, Handler, Json, Redirect, bad_request, compact, iso, not_found, now, paginate_call

SERVICE = "models.ModelApiService"
READY, PROCESSING = "READY", "PROCESSING"
# kagglesdk.models.types.model_enums.ModelFramework names (without the prefix), as the client sends them.
FRAMEWORKS = ("TENSOR_FLOW_1", "TENSOR_FLOW_2", "TF_LITE", "TF_JS", "PY_TORCH", "JAX", "FLAX", "PAX", "MAX_TEXT",
              "GEMMA_CPP", "GGML", "GGUF", "CORAL", "SCIKIT_LEARN", "MXNET", "ONNX", "KERAS", "TRANSFORMERS", "API",
              "OTHER", "TENSOR_RT_LLM", "TRITON", "VLLM")
_PREFIX = "MODEL_FRAMEWORK_"
_SHORT = {name.replace("_", "").lower(): name for name in FRAMEWORKS}
_VARIATION = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class ModelInstance(TypedDict):
    """A variation (``<framework>/<slug>``) and its versions, oldest first."""

    id: int
    framework: str  # the short form: pytorch
    slug: str
    overview: str
    usage: str
    licenseName: str
    created: float
    versions: list[VersionRecord]


class ModelRecord(TypedDict):
    """``<data>/models/<owner>/<slug>/model.json``: a model and its variations, keyed ``<framework>/<slug>``."""

    id: int
    owner: str
    slug: str
    title: str
    subtitle: str
    description: str
    isPrivate: bool
    created: float
    instances: dict[str, ModelInstance]


@dataclass(frozen=True)
class MountedModel:
    """A model version a kernel run mounts at ``models/<owner>/<model>/<framework>/<variation>/<version>``."""

    ref: str
    target: str
    files: Path


def framework_short(value: str) -> str | None:
    """``MODEL_FRAMEWORK_PY_TORCH`` / ``PyTorch`` / ``pytorch`` → ``pytorch``; None when unknown."""
    short = value.upper().removeprefix(_PREFIX).replace("_", "").lower()
    return short if short in _SHORT else None


class Models:
    def __init__(self, store: Store, blobs: Blobs, settings: ServerSettings) -> None:
        self._store = store
        self._records = OwnedRecords(store, "models", "model.json")
        self._blobs = blobs
        self._settings = settings

    def routes(self) -> dict[str, Handler]:
        handlers: dict[str, Handler] = {
            "CreateModel": self.create_model,
            "CreateModelInstance": self.create_model_instance,
            "CreateModelInstanceVersion": self.create_model_instance_version,
            "GetModel": self.get_model,
            "GetModelInstance": self.get_model_instance,
            "ListModelInstanceVersionFiles": self.list_model_instance_version_files,
            "DownloadModelInstanceVersion": self.download_model_instance_version,
        }
        return {f"{SERVICE}/{name}": handler for name, handler in handlers.items()}

    # -- create ------------------------------------------------------------------------------

    def create_model(self, call: Call) -> Json:
        user = call.require_user()
        owner, slug, title = call.text("ownerSlug") or user, call.text("slug"), call.text("title")
        if owner != user:
            return _failed(f"You do not have permission to create models for {owner!r}")
        if not SLUG.match(slug) or not 3 <= len(slug) <= 50:
            return _failed(f"Invalid model slug {slug!r}: 3-50 lower-case letters, digits and '-'")
        if not 3 <= len(title) <= 50:
            return _failed("The model title must be between 3 and 50 characters")
        with self._store.lock:
            if self._records.load(owner, slug) is not None:
                return _failed(f"The model {owner}/{slug} already exists")
            record: ModelRecord = {"id": self._store.next_id("model"), "owner": owner, "slug": slug, "title": title,
                      "subtitle": call.text("subtitle"), "description": call.text("description"),
                      "isPrivate": call.flag("isPrivate", True), "created": now(), "instances": {}}
            self._records.save(record)
        return {"id": record["id"], "ref": f"{owner}/{slug}", "url": f"{call.base_url}/models/{owner}/{slug}"}

    def create_model_instance(self, call: Call) -> Json:
        user = call.require_user()
        record = self._visible(call.text("ownerSlug"), call.text("modelSlug"), user)
        body = call.body.get("body") or {}
        framework = framework_short(str(body.get("framework") or ""))
        variation = str(body.get("instanceSlug") or "")
        if record["owner"] != user:
            return _failed("You do not have permission to add a variation to this model")
        if framework is None:
            return _failed(f"Invalid framework {body.get('framework')!r}")
        if not _VARIATION.match(variation):
            return _failed(f"Invalid instance slug {variation!r}: lower-case letters, digits, '-', '_' and '.'")
        if not body.get("licenseName"):
            return _failed("Please specify a license")
        with self._store.lock:
            record = self._records.load(record["owner"], record["slug"]) or record
            key = f"{framework}/{variation}"
            if key in record["instances"]:
                return _failed(f"The variation {key} of {record['owner']}/{record['slug']} already exists")
            instance: ModelInstance = {"id": self._store.next_id("modelInstance"), "framework": framework, "slug": variation,
                        "overview": str(body.get("overview") or ""), "usage": str(body.get("usage") or ""),
                        "licenseName": str(body["licenseName"]), "created": now(), "versions": []}
            try:
                self._add_version(record, instance, user, body, "Initial release")
            except UploadRejected as exc:
                return _failed(str(exc))
            record["instances"][key] = instance
            self._records.save(record)
        return self._created(record, instance, call.base_url)

    def create_model_instance_version(self, call: Call) -> Json:
        user = call.require_user()
        record, instance = self._instance(call, user)
        if record["owner"] != user:
            return _failed("You do not have permission to create a new version of this model")
        body = call.body.get("body") or {}
        with self._store.lock:
            record = self._records.load(record["owner"], record["slug"]) or record
            instance = record["instances"][f"{instance['framework']}/{instance['slug']}"]
            try:
                self._add_version(record, instance, user, body, str(body.get("versionNotes") or ""))
            except UploadRejected as exc:
                return _failed(str(exc))
            self._records.save(record)
        return self._created(record, instance, call.base_url)

    def _add_version(self, record: ModelRecord, instance: ModelInstance, user: str, body: Json, notes: str) -> None:
        uploads = self._uploads(user, body)
        if not uploads:
            raise UploadRejected("A model version needs at least one file")
        number = 1 + max((v["number"] for v in instance["versions"]), default=0)
        store_version(uploads, self._version_dir(record, instance, number))
        created = now()
        instance["versions"].append({"number": number, "notes": notes, "created": created, "creator": user,
                                     "readyAt": created + self._settings.dataset_ready_seconds,
                                     "pollsNeeded": self._settings.dataset_ready_polls, "polls": 0,
                                     "status": PROCESSING})

    def _uploads(self, user: str, body: Json) -> list[tuple[str, Blob]]:
        return uploaded_files(self._blobs, user, body, "MODEL")

    def _created(self, record: ModelRecord, instance: ModelInstance, base_url: str) -> Json:
        ref = f"{record['owner']}/{record['slug']}/{instance['framework']}/{instance['slug']}"
        number = instance["versions"][-1]["number"]
        return {"id": instance["id"], "ref": ref, "url": f"{base_url}/models/{ref}/{number}"}

    # -- read --------------------------------------------------------------------------------

    def get_model(self, call: Call) -> Json:
        record = self._visible(call.text("ownerSlug"), call.text("modelSlug"), call.user)
        ref = f"{record['owner']}/{record['slug']}"
        return compact({
            "id": record["id"], "ref": ref, "title": record["title"], "subtitle": record["subtitle"] or None,
            "author": record["owner"], "slug": record["slug"], "isPrivate": record["isPrivate"],
            "description": record["description"] or None, "url": f"{call.base_url}/models/{ref}",
            "instances": [self._api_instance(record, instance, call.base_url) for instance in record["instances"].values()],
        })

    def get_model_instance(self, call: Call) -> Json:
        """The variation; ``versionNumber`` is its newest ready version (a poll counts towards readiness)."""
        record, instance = self._instance(call, call.user)
        for version in instance["versions"]:
            self._ready(record, instance, version, count_poll=True)
        record, instance = self._instance(call, call.user)
        return self._api_instance(record, instance, call.base_url)

    def list_model_instance_version_files(self, call: Call) -> Json:
        record, instance = self._instance(call, call.user)
        version = self._version(record, instance, call.integer("versionNumber"))
        folder = self._files_dir(record, instance, version["number"])
        rows = [{"name": rel, "size": path.stat().st_size, "creationDate": iso(version["created"])}
                for rel, path in tree(folder)]
        page, token = paginate_call(rows, call)
        return {"files": page, "nextPageToken": token}

    def download_model_instance_version(self, call: Call) -> Redirect:
        record, instance = self._instance(call, call.user)
        version = self._version(record, instance, call.integer("versionNumber"))
        folder = self._files_dir(record, instance, version["number"])
        name = call.text("path")
        if name:
            target = (folder / name).resolve()
            if not target.is_file() or folder.resolve() not in target.parents:
                raise not_found(f"File {name!r} not found in version {version['number']}")
        else:
            with self._store.lock:
                target = _tar_gz(folder, folder.parent / "archive" / f"{record['slug']}.tar.gz")
        return Redirect(storage_url(self._store, call.base_url, target))

    # -- for kernel runs ---------------------------------------------------------------------

    def mount(self, source: str, user: str) -> MountedModel | None:
        """What a kernel's ``owner/model/framework/variation/VERSION`` source mounts; None if invalid
        (malformed, unknown, unreadable, or that version not ready)."""
        parts = source.strip("/").split("/")
        if len(parts) != 5 or not parts[4].isdigit():
            return None
        owner, slug, framework, variation, number = parts
        short = framework_short(framework)
        record: ModelRecord | None = self._records.load(owner, slug)
        if record is None or short is None or not _can_read(record, user):
            return None
        instance = record["instances"].get(f"{short}/{variation}")
        version = next((v for v in (instance["versions"] if instance else []) if v["number"] == int(number)), None)
        if instance is None or version is None or not self._ready(record, instance, version):
            return None
        target = f"models/{owner}/{slug}/{short}/{variation}/{number}"
        return MountedModel(source, target, self._files_dir(record, instance, int(number)))

    # -- internals ---------------------------------------------------------------------------

    def _visible(self, owner: str, slug: str, user: str | None) -> ModelRecord:
        record: ModelRecord | None = self._records.load(owner, slug)
        if record is None or not _can_read(record, user):
            raise not_found(f"Model {owner}/{slug} not found")
        return record

    def _instance(self, call: Call, user: str | None) -> tuple[ModelRecord, ModelInstance]:
        record = self._visible(call.text("ownerSlug"), call.text("modelSlug"), user)
        framework = framework_short(call.text("framework"))
        if framework is None:
            raise bad_request(f"Invalid framework {call.text('framework')!r}")
        instance = record["instances"].get(f"{framework}/{call.text('instanceSlug')}")
        if instance is None:
            raise not_found(f"Model variation {record['owner']}/{record['slug']}/{framework}/"
                            f"{call.text('instanceSlug')} not found")
        return record, instance

    def _version(self, record: ModelRecord, instance: ModelInstance, number: int | None) -> VersionRecord:
        if number is None:
            ready = [v for v in instance["versions"] if self._ready(record, instance, v)]
            version = ready[-1] if ready else None
        else:
            version = next((v for v in instance["versions"] if v["number"] == number), None)
        if version is None:
            raise not_found(f"Version {number} of {record['owner']}/{record['slug']}/{instance['framework']}/"
                            f"{instance['slug']} not found")
        return version

    def _ready(self, record: ModelRecord, instance: ModelInstance, version: VersionRecord, count_poll: bool = False) -> bool:
        if version["status"] == READY:
            return True
        with self._store.lock:
            fresh: ModelRecord = self._records.load(record["owner"], record["slug"]) or record
            stored_instance = fresh["instances"].get(f"{instance['framework']}/{instance['slug']}", instance)
            stored = next((v for v in stored_instance["versions"] if v["number"] == version["number"]), version)
            ready = stored["status"] == READY or (now() >= stored["readyAt"] and stored["polls"] >= stored["pollsNeeded"])
            if ready and stored["status"] != READY:
                stored["status"] = READY
                self._records.save(fresh)
            elif not ready and count_poll:
                stored["polls"] += 1
                self._records.save(fresh)
            version.update(stored)
        return ready

    def _version_dir(self, record: ModelRecord, instance: ModelInstance, number: int) -> Path:
        return (self._records.dir(record["owner"], record["slug"]) / "instances" / instance["framework"]
                / instance["slug"] / "versions" / str(number))

    def _files_dir(self, record: ModelRecord, instance: ModelInstance, number: int) -> Path:
        return self._version_dir(record, instance, number) / "files"

    def _api_instance(self, record: ModelRecord, instance: ModelInstance, base_url: str) -> Json:
        ready = [v for v in instance["versions"] if v["status"] == READY]
        latest = ready[-1]["number"] if ready else None
        files = tree(self._files_dir(record, instance, latest)) if latest else []
        ref = f"{record['owner']}/{record['slug']}/{instance['framework']}/{instance['slug']}"
        return compact({
            "id": instance["id"], "slug": instance["slug"], "framework": _PREFIX + _SHORT[instance["framework"]],
            "overview": instance["overview"] or None, "usage": instance["usage"] or None,
            "licenseName": instance["licenseName"], "versionNumber": latest, "url": f"{base_url}/models/{ref}",
            "totalUncompressedBytes": sum(path.stat().st_size for _, path in files),
        })


def _can_read(record: ModelRecord, user: str | None) -> bool:
    return not record["isPrivate"] or record["owner"] == user


def _failed(message: str) -> Json:
    # The client reads ``error`` (``id`` 0 means nothing was created) and exits 0 on it.
    return {"id": 0, "ref": "", "url": "", "error": message}


def _tar_gz(folder: Path, archive: Path) -> Path:
    """The whole version as one ``.tar.gz`` (what ``kaggle models instances versions download`` unpacks)."""
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as bundle:
        for rel, path in tree(folder):
            bundle.add(path, arcname=rel)
    partial.replace(archive)
    return archive
