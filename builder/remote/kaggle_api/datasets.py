"""``datasets.DatasetApiService``: a dataset's status, version and files; creating it and its versions."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import RemoteError
from builder.remote.kaggle_api.calls import KaggleCalls, split_ref, unwrap_zip
from builder.remote.kaggle_api.staging import stable_upload_folder
from builder.remote.kaggle_api.translate import logger, scrub


@dataclass(frozen=True)
class DatasetPushed:
    ref: str
    url: str


class DatasetCalls(KaggleCalls):
    """The dataset operations of :class:`~builder.remote.kaggle_api.KaggleAdapter`."""

    def dataset_status(self, ref: str) -> str | None:
        """Lower-case status of the dataset's latest version (``ready``, ...), or None if it does not exist."""
        from kagglesdk.datasets.types.dataset_api_service import ApiGetDatasetStatusRequest

        owner, slug = split_ref(ref)

        def get() -> str | None:
            request = ApiGetDatasetStatusRequest()
            request.owner_slug, request.dataset_slug = owner, slug
            return self._unless_absent(lambda kaggle: kaggle.datasets.dataset_api_client.get_dataset_status(request).status.name.lower())

        return self.call("reading the dataset status", get, subject=ref)

    def dataset_version(self, ref: str) -> int | None:
        """The dataset's current version number (None when the server does not say)."""
        from kagglesdk.datasets.types.dataset_api_service import ApiGetDatasetRequest

        owner, slug = split_ref(ref)

        def get() -> int | None:
            request = ApiGetDatasetRequest()
            request.owner_slug, request.dataset_slug = owner, slug
            with self._client() as kaggle:
                number = kaggle.datasets.dataset_api_client.get_dataset(request).current_version_number
            return int(number) if number else None

        return self.call("reading the dataset version", get, subject=ref)

    def dataset_file(self, ref: str, file_name: str) -> bytes | None:
        """One file of the dataset's latest version, or None when it or the dataset is missing."""
        from kagglesdk.datasets.types.dataset_api_service import ApiDownloadDatasetRequest

        owner, slug = split_ref(ref)

        def get() -> bytes | None:
            request = ApiDownloadDatasetRequest()
            request.owner_slug, request.dataset_slug, request.file_name = owner, slug, file_name
            content = self._unless_absent(lambda kaggle: kaggle.datasets.dataset_api_client.download_dataset(request).content)
            return None if content is None else unwrap_zip(content, file_name)

        return self.call("downloading a dataset file", get, subject=f"{ref}/{file_name}")

    def create_dataset(self, folder: Path, *, public: bool = False) -> DatasetPushed:
        def create() -> Any:
            with stable_upload_folder(folder) as upload:
                return self.api.dataset_create_new(str(upload), public=public, quiet=True, dir_mode="tar")

        response = self.call("creating the dataset", create, subject=_folder_ref(folder), idempotent=False)
        return self._dataset_pushed(response, "creating the dataset", folder)

    def version_dataset(self, folder: Path, notes: str) -> DatasetPushed:
        def version() -> Any:
            with stable_upload_folder(folder) as upload:
                return self.api.dataset_create_version(str(upload), notes, quiet=True, dir_mode="tar")

        response = self.call("creating a dataset version", version, subject=_folder_ref(folder), idempotent=False)
        return self._dataset_pushed(response, "creating a dataset version", folder)

    def _dataset_pushed(self, response: Any, action: str, folder: Path) -> DatasetPushed:
        # The client returns refusals in a 200 body (status "error") and the kaggle CLI exits 0 on them.
        error = getattr(response, "error", None) or ""
        status = str(getattr(response, "status", "") or "").lower()
        invalid_tags = list(getattr(response, "invalid_tags", None) or [])
        if error or status == "error":
            raise RemoteError(
                f"Kaggle refused {action} {_folder_ref(folder)}: {scrub(error or 'status error')}",
                hint=self._owner_hint(_folder_ref(folder)) if "permission" in error.lower()
                else "see the dataset-metadata.json in " + str(folder),
            )
        if invalid_tags:
            logger.info("Kaggle ignored invalid dataset tags: %s", invalid_tags)
        return DatasetPushed(ref=str(getattr(response, "ref", "") or _folder_ref(folder)), url=str(response.url or ""))

    # -- inputs kkb does not build --------------------------------------------------

    def dataset_readable(self, ref: str) -> bool:
        """Whether ``owner/slug`` (or ``owner/slug/VERSION``) exists and this user may read it."""
        from kagglesdk.datasets.types.dataset_api_service import ApiListDatasetFilesRequest

        owner, slug, *version = ref.split("/")

        def get() -> bool:
            request = ApiListDatasetFilesRequest()
            request.owner_slug, request.dataset_slug, request.page_size = owner, slug, 1
            if version:
                request.dataset_version_number = int(version[0])
            response = self._unless_absent(lambda kaggle: kaggle.datasets.dataset_api_client.list_dataset_files(request))
            return response is not None and not getattr(response, "error_message", "")

        return self.call("looking up a dataset input", get, subject=ref)


def _folder_ref(folder: Path) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return str(json.loads((folder / "dataset-metadata.json").read_text())["id"])
    return str(folder)
