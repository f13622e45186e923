"""``kernels.KernelsApiService``: pushing a kernel, its version, status, log and output files."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import LimitReached, RemoteError, SessionCapReached
from builder.remote.kaggle_api.calls import KaggleCalls, split_ref
from builder.remote.kaggle_api.translate import QUOTA_HINT, SESSION_CAP_HINT, TransientRemoteError, limit_refusal, scrub


@dataclass(frozen=True)
class KernelPushed:
    ref: str
    url: str
    version: int | None


@dataclass(frozen=True)
class KernelStatus:
    status: str  # lower-case KernelWorkerStatus name: queued, running, complete, error, ...
    failure_message: str


class KernelCalls(KaggleCalls):
    """The kernel operations of :class:`~builder.remote.kaggle_api.KaggleAdapter`."""

    def kernel_version(self, kernel: str) -> int | None:
        """The kernel's current version number, or None when it does not exist (yet)."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelRequest

        owner, slug = split_ref(kernel)

        def get() -> int | None:
            request = ApiGetKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            metadata = self._unless_absent(lambda kaggle: kaggle.kernels.kernels_api_client.get_kernel(request).metadata)
            if metadata is None:
                return None
            number = getattr(metadata, "current_version_number", None)
            return int(number) if number else None

        return self.call("reading the kernel", get, subject=kernel)

    def kernel_source(self, kernel: str) -> str | None:
        """The current version's code as Kaggle serves it (notebook JSON or script), None when there is none."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelRequest

        owner, slug = split_ref(kernel)

        def get() -> str | None:
            request = ApiGetKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            blob = self._unless_absent(lambda kaggle: kaggle.kernels.kernels_api_client.get_kernel(request).blob)
            source = getattr(blob, "source", None) if blob is not None else None
            return str(source) if source else None

        return self.call("reading the kernel's code", get, subject=kernel)

    def push_kernel(self, folder: Path, *, timeout_seconds: int | None = None) -> KernelPushed:
        """``SaveKernel`` from a folder holding ``kernel-metadata.json`` and the notebook."""

        def push() -> Any:
            timeout = str(timeout_seconds) if timeout_seconds else None
            return self.api.kernels_push(str(folder), timeout=timeout)

        try:
            response = self.call("pushing the kernel", push, subject=str(folder), idempotent=False)
        except TransientRemoteError:
            raise
        except RemoteError as exc:  # an HTTP 412 "Precondition failed" is the session cap's answer
            limit = limit_refusal(exc.message)
            if limit is None:
                raise
            raise _limit_reached(limit, exc.message) from exc
        return self._kernel_pushed(response)

    def _kernel_pushed(self, response: Any) -> KernelPushed:
        error = getattr(response, "error", None) or ""
        if error:
            limit = limit_refusal(error)
            if limit is not None:
                raise _limit_reached(limit, f"Kaggle refused the kernel push: {scrub(error)}")
            raise RemoteError(f"Kaggle refused the kernel push: {scrub(error)}", hint=_kernel_error_hint(error))
        invalid = {
            "dataset": list(getattr(response, "invalid_dataset_sources", None) or []),
            "competition": list(getattr(response, "invalid_competition_sources", None) or []),
            "kernel": list(getattr(response, "invalid_kernel_sources", None) or []),
            "model": list(getattr(response, "invalid_model_sources", None) or []),
        }
        bad = {kind: names for kind, names in invalid.items() if names}
        if bad:
            # Kaggle still saves the kernel, just without those inputs: the run would fail later, so stop now.
            listing = "; ".join(f"{kind} sources {names}" for kind, names in bad.items())
            hints = []
            if "competition" in bad:
                hints.append("check [competition] slug in kernel.toml: it is the name in the competition's URL "
                             "(kaggle.com/competitions/<slug>), and you must have accepted its rules")
            if bad.keys() - {"competition"}:
                hints.append("a dataset must be ready and yours (or public)")
            raise RemoteError(f"Kaggle did not attach these inputs to the kernel: {listing}", hint="; ".join(hints))
        version = getattr(response, "version_number", None)
        ref = str(getattr(response, "ref", "") or "")
        return KernelPushed(ref=ref, url=str(getattr(response, "url", "") or ""), version=int(version) if version else None)

    def kernel_status(self, kernel: str, version: int | None = None) -> KernelStatus:
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelSessionStatusRequest

        owner, slug = split_ref(kernel)

        def get() -> KernelStatus:
            request = ApiGetKernelSessionStatusRequest()
            request.user_name, request.kernel_slug = owner, slug
            if version:
                request.version_label = f"v{version}"
            with self._client() as kaggle:
                response = kaggle.kernels.kernels_api_client.get_kernel_session_status(request)
            return KernelStatus(status=response.status.name.lower(), failure_message=response.failure_message or "")

        return self.call("reading the kernel status", get, subject=_versioned(kernel, version))

    def kernel_log(self, kernel: str, version: int | None = None) -> list[dict[str, Any]]:
        """The run's log as Kaggle stores it: ``[{"stream_name", "time", "data"}, ...]`` (empty if none)."""
        from kagglesdk.kernels.types.kernels_api_service import ApiListKernelSessionOutputRequest

        owner, slug = split_ref(kernel)

        def get() -> str:
            request = ApiListKernelSessionOutputRequest()
            request.user_name, request.kernel_slug = owner, slug
            request.page_size, request.page_token = 20, ""
            if version:
                request.version_label = f"v{version}"
            with self._client() as kaggle:
                return kaggle.kernels.kernels_api_client.list_kernel_session_output(request).log or ""

        return parse_log(self.call("fetching the kernel log", get, subject=_versioned(kernel, version)))

    def kernel_output(self, kernel: str, version: int | None, dest: Path, file_pattern: str | None = None) -> list[Path]:
        """Download a run's output files (every page; ``file_pattern``: only names it matches, a regex) and its log
        (``<slug>.log``) into ``dest``."""
        split_ref(kernel)
        dest.mkdir(parents=True, exist_ok=True)

        def download() -> list[str]:
            files, _ = self.api.kernels_output(f"{kernel}/{version}" if version else kernel, str(dest), force=True,
                                               quiet=True, file_pattern=file_pattern)
            return list(files)

        return [Path(path) for path in self.call("downloading the kernel output", download,
                                                 subject=_versioned(kernel, version))]

    def kernel_output_readable(self, ref: str) -> bool:
        """Whether the notebook ``owner/slug`` (or ``owner/slug/VERSION``) exists and this user may read it."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelRequest

        owner, slug, *version = ref.split("/")

        def get() -> bool:
            request = ApiGetKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            if version:
                request.version_label = f"v{version[0]}"
            return self._unless_absent(lambda kaggle: kaggle.kernels.kernels_api_client.get_kernel(request)) is not None

        return self.call("looking up a notebook input", get, subject=ref)


def _limit_reached(limit: str, message: str) -> LimitReached:
    if limit == "session cap":
        return SessionCapReached(f"{message} (the account's GPU sessions are at their cap)", hint=SESSION_CAP_HINT)
    return LimitReached(f"{message} (no GPU quota left this week)", hint=QUOTA_HINT)


def _versioned(ref: str, version: int | None) -> str:
    return f"{ref} v{version}" if version else ref


def _kernel_error_hint(error: str) -> str:
    lowered = error.lower()
    if "machine shape" in lowered or "accelerator" in lowered:
        return ("choose another [kernel] accelerator in kernel.toml (gpu = T4 x2, or none): GPU shapes need a "
                "phone-verified account and weekly quota left, and some shapes only exist in some competitions")
    if "not found" in lowered:
        return "the kernel id in kernel-metadata.json must be owner/slugify(title) and owned by you"
    if "title" in lowered or "slug" in lowered:
        return "Kaggle derives the slug from the title: keep [kernel] title and slug consistent"
    return "see kernel-metadata.json in the build output"


def parse_log(text: str) -> list[dict[str, Any]]:
    """Kaggle's log is a JSON array of ``{stream_name, time, data}``; tolerate plain text too."""
    if not text.strip():
        return []
    with contextlib.suppress(ValueError):
        entries = json.loads(text)
        if isinstance(entries, list):
            return [entry for entry in entries if isinstance(entry, dict)]
    return [{"stream_name": "stdout", "time": 0.0, "data": text}]
