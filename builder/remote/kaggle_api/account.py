"""The account around the kernels: the weekly accelerator quota, the user's kernels, and deleting one.

* ``GetAcceleratorQuotaStatistics`` (``kaggle quota``): GPU and TPU time used and allowed this week, and when
  the window resets;
* ``ListKernels`` (``--mine``, most recently run first, every page): what may be running, with its machine shape;
* ``DeleteKernel``: Kaggle's API stops a running session no other way. ``CancelKernelSession`` exists in the
  client but takes a session id that no answer of Kaggle's API carries (kaggle-cli #1169, #1174).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from builder.errors import RemoteError
from builder.remote.kaggle_api.calls import KaggleCalls, split_ref
from builder.remote.kaggle_api.translate import scrub

MAX_PAGES = 50  # a bound against a list that never ends: 50 pages of 100 kernels


@dataclass(frozen=True)
class QuotaLine:
    """One accelerator's week: seconds used and allowed (``reserved``: held by running sessions, when Kaggle says)."""

    used_s: float
    total_s: float
    reserved_s: float = 0.0

    @property
    def left_s(self) -> float:
        return max(0.0, self.total_s - self.used_s)  # as `kaggle quota` counts it


@dataclass(frozen=True)
class Quota:
    gpu: QuotaLine | None
    tpu: QuotaLine | None
    refresh: datetime | None  # when the weekly window resets (UTC)


@dataclass(frozen=True)
class KernelInfo:
    """One of the user's kernels as ``ListKernels`` describes it."""

    ref: str  # owner/slug
    current_version: int | None
    last_run: datetime | None  # UTC
    machine_shape: str | None
    gpu: bool
    tpu: bool


class AccountCalls(KaggleCalls):
    """The account operations of :class:`~builder.remote.kaggle_api.KaggleAdapter`."""

    def quota(self) -> Quota:
        def get() -> Any:
            return self.api.quota_view()

        response = self.call("reading the accelerator quota", get)
        return Quota(gpu=_line(getattr(response, "gpu_quota", None)), tpu=_line(getattr(response, "tpu_quota", None)),
                     refresh=_utc(getattr(response, "quota_refresh_time", None)))

    def my_kernels(self, page_size: int = 100, run_since: datetime | None = None) -> list[KernelInfo]:
        """The user's kernels, most recently run first: every page of ``ListKernels`` (its page token followed to
        the end, ``MAX_PAGES`` at most), so a kernel that runs is found however many the account has. With
        ``run_since``, paging stops after a page whose every kernel last ran before it (the later pages ran earlier)."""
        kernels: list[KernelInfo] = []
        token = ""
        for _ in range(MAX_PAGES):
            def get(token: str = token) -> Any:
                return self.api.kernels_list_with_response(mine=True, sort_by="dateRun", page_size=page_size,
                                                           page_token=token)

            response = self.call("listing your kernels", get)
            page = [_kernel_info(row) for row in getattr(response, "kernels", None) or []
                    if row is not None and str(getattr(row, "ref", None) or "")]
            kernels += page
            token = str(getattr(response, "next_page_token", "") or "")
            if not token or (run_since is not None and page
                             and all(k.last_run is not None and k.last_run < run_since for k in page)):
                break
        return kernels

    def delete_kernel(self, kernel: str) -> None:
        """``DeleteKernel``: the kernel and every version go, and a session still running stops (and bills no more)."""
        from kagglesdk.kernels.types.kernels_api_service import ApiDeleteKernelRequest

        owner, slug = split_ref(kernel)

        def delete() -> Any:
            request = ApiDeleteKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            with self._client() as kaggle:
                return kaggle.kernels.kernels_api_client.delete_kernel(request)

        response = self.call("deleting the kernel", delete, subject=kernel, idempotent=False)
        error = str(getattr(response, "error_message", "") or "")
        if error:
            raise RemoteError(f"Kaggle did not delete {kernel}: {scrub(error)}",
                              hint="stop its run on the kernel's page on Kaggle (the ⋮ menu of the running version)")


def _line(quota: Any) -> QuotaLine | None:
    if quota is None:
        return None
    used, total = getattr(quota, "time_used", None), getattr(quota, "total_time_allowed", None)
    if total is None:
        return None
    reserved = getattr(quota, "time_reserved", None)
    return QuotaLine(used_s=used.total_seconds() if used is not None else 0.0, total_s=total.total_seconds(),
                     reserved_s=reserved.total_seconds() if reserved is not None else 0.0)


def _utc(moment: Any) -> datetime | None:
    """The client returns UTC times without a zone (as its own ``kaggle quota`` notes)."""
    if not isinstance(moment, datetime):
        return None
    return moment.replace(tzinfo=timezone.utc) if moment.utcoffset() is None else moment.astimezone(timezone.utc)


def _kernel_info(row: Any) -> KernelInfo:
    ref = str(getattr(row, "ref", ""))
    shape = getattr(row, "machine_shape", None) or None
    version = getattr(row, "current_version_number", None)
    tpu = bool(getattr(row, "enable_tpu", False)) or str(shape or "").lower().startswith("tpu")
    gpu = not tpu and (bool(getattr(row, "enable_gpu", False)) or bool(shape))
    return KernelInfo(ref=ref, current_version=int(version) if version else None,
                      last_run=_utc(getattr(row, "last_run_time", None)), machine_shape=shape, gpu=gpu, tpu=tpu)
