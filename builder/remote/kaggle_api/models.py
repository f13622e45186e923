"""``models.ModelApiService``: Kaggle Models (weights published as a Model), their variations and versions."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from builder.errors import RemoteError
from builder.remote.kaggle_api.calls import KaggleCalls, split_ref, unwrap_zip
from builder.remote.kaggle_api.staging import stable_upload_folder
from builder.remote.kaggle_api.translate import scrub, status_of


class ModelCalls(KaggleCalls):
    """The model operations of :class:`~builder.remote.kaggle_api.KaggleAdapter`."""

    def model_version_readable(self, ref: str) -> bool:
        """Whether the model version ``owner/model/framework/variation/VERSION`` exists and this user may read it."""
        from kagglesdk.models.types.model_api_service import ApiListModelInstanceVersionFilesRequest

        owner, model, framework, variation, version = ref.split("/")

        def get() -> bool:
            request = ApiListModelInstanceVersionFilesRequest()
            request.owner_slug, request.model_slug, request.instance_slug = owner, model, variation
            request.framework = self._framework(framework)
            request.version_number, request.page_size = int(version), 1
            with self._client() as kaggle:
                try:
                    kaggle.models.model_api_client.list_model_instance_version_files(request)
                except Exception as exc:
                    if status_of(exc) in (400, 403, 404):
                        return False
                    raise
            return True

        return self.call("looking up a model input", get, subject=ref)

    def model_exists(self, model: str) -> bool:
        """Whether ``owner/model-slug`` exists (and this user can see it)."""
        from kagglesdk.models.types.model_api_service import ApiGetModelRequest

        owner, slug = split_ref(model)

        def get() -> bool:
            request = ApiGetModelRequest()
            request.owner_slug, request.model_slug = owner, slug
            return self._unless_absent(lambda kaggle: kaggle.models.model_api_client.get_model(request)) is not None

        return self.call("reading the model", get, subject=model)

    def model_instance_version(self, instance: str) -> int | None:
        """The newest ready version of ``owner/model/framework/variation``: None when the variation does not
        exist, 0 when it exists but no version is ready yet (Kaggle is still processing the first one)."""
        from kagglesdk.models.types.model_api_service import ApiGetModelInstanceRequest

        owner, model, framework, variation = instance.split("/")

        def get() -> int | None:
            request = ApiGetModelInstanceRequest()
            request.owner_slug, request.model_slug, request.instance_slug = owner, model, variation
            request.framework = self._framework(framework)
            instance = self._unless_absent(lambda kaggle: kaggle.models.model_api_client.get_model_instance(request))
            return None if instance is None else int(instance.version_number or 0)

        return self.call("reading the model variation", get, subject=instance)

    def model_file(self, instance: str, version: int, file_name: str) -> bytes | None:
        """One file of a model version, or None when it (or the version) is missing."""
        from kagglesdk.models.types.model_api_service import ApiDownloadModelInstanceVersionRequest

        owner, model, framework, variation = instance.split("/")

        def get() -> bytes | None:
            request = ApiDownloadModelInstanceVersionRequest()
            request.owner_slug, request.model_slug, request.instance_slug = owner, model, variation
            request.framework, request.version_number, request.path = self._framework(framework), version, file_name
            content = self._unless_absent(lambda kaggle: kaggle.models.model_api_client.download_model_instance_version(request).content)
            return None if content is None else unwrap_zip(content, file_name)

        return self.call("downloading a model file", get, subject=f"{instance}/{version}/{file_name}")

    def create_model(self, folder: Path) -> None:
        """``CreateModel`` from ``model-metadata.json`` in ``folder``."""
        response = self.call("creating the model", lambda: self.api.model_create_new(str(folder)),
                             subject=str(folder), idempotent=False)
        self._model_created(response, "creating the model", folder)

    def create_model_instance(self, folder: Path) -> None:
        """``CreateModelInstance`` (the variation and its version 1) from ``model-instance-metadata.json`` and the files."""
        def create() -> Any:
            with stable_upload_folder(folder) as upload:
                return self.api.model_instance_create(str(upload), quiet=True, dir_mode="tar")

        response = self.call("creating the model variation", create, subject=str(folder), idempotent=False)
        self._model_created(response, "creating the model variation", folder)

    def version_model_instance(self, instance: str, folder: Path, notes: str) -> None:
        """``CreateModelInstanceVersion``: the files of ``folder`` as the variation's next version."""
        def version() -> Any:
            with stable_upload_folder(folder) as upload:
                return self.api.model_instance_version_create(instance, str(upload), notes, quiet=True, dir_mode="tar")

        response = self.call("creating a model version", version, subject=instance, idempotent=False)
        self._model_created(response, "creating a model version", folder)

    def _model_created(self, response: Any, action: str, folder: Path) -> None:
        # Like datasets, refusals come back in a 200 body (``error``; ``id`` 0) and the CLI exits 0 on them.
        error = str(getattr(response, "error", "") or "")
        if error or not getattr(response, "id", 0):
            raise RemoteError(f"Kaggle refused {action} from {folder}: {scrub(error or 'no id in the answer')}",
                              hint=self._owner_hint(_model_owner(folder)) if "permission" in error.lower()
                              else "see model-metadata.json and model-instance-metadata.json in " + str(folder))

    def _framework(self, name: str) -> Any:
        """``pytorch`` → ``ModelFramework.MODEL_FRAMEWORK_PY_TORCH``, as the client's own commands map it."""
        from kagglesdk.models.types.model_enums import ModelFramework

        return self.api.lookup_enum(ModelFramework, ModelFramework.MODEL_FRAMEWORK_API, name)


def _model_owner(folder: Path) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return str(json.loads((folder / "model-metadata.json").read_text())["ownerSlug"]) + "/"
    return ""
