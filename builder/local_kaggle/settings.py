"""Tunable behaviour of the local Kaggle (timings that Kaggle itself does not publish)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerSettings:
    """How the local Kaggle paces itself.

    Attributes:
        dataset_ready_seconds: a new dataset version is not READY until this long after its creation
            (Kaggle processes uploads for a while; a kernel pushed before then still sees the old version).
        dataset_ready_polls: ...and until ``GetDatasetStatus`` has answered "not ready" this many times.
        commit_timeout_seconds: run-time cap of a commit run when the push sets none
            (Kaggle's session limit is 12 hours).
        rerun_timeout_seconds: run-time cap of a scoring rerun; ``None`` uses the competition's
            ``time_limit_hours``. Lowering it rehearses "Notebook Timeout" quickly.
        workers: kernel runs executed at the same time (commit runs and scoring reruns share them).
        max_body_bytes: the largest RPC or admin request body; a larger one is answered 413 unread.
        max_upload_bytes: the largest file a blob upload may announce (and a PUT may carry); uploads
            go through the blob endpoint, so this one is generous.
        request_timeout_seconds: a request whose bytes stop arriving this long is cut (408).
        machine_shapes: the accelerators this account may use; a push asking for another is refused
            in the body, as Kaggle refuses a shape the account has no access or quota for. None: any.
        internet_folders: what "the internet" is for a kernel pushed with internet on: host folders it
            may read at their own paths (a local package index, say). Other kernels never see them, and no
            kernel reaches the network: the sandbox has none.
        honour_pins: mount the version a dataset or notebook source pins (``owner/slug/N``). Kaggle was seen
            to drop ``kernel_sources`` pins and mount the latest complete version (dataset pins: unverified),
            so by default the pin is dropped the same way; True rehearses a Kaggle that honours pins.
        image: the image this Kaggle says its runs have: a description file (``kkb image --json``'s shape, or a
            capture), read when each run ends and put in its output as ``kkb_image.json``, as a kkb kernel's run on
            Kaggle records its image (``builder.local_kaggle.image``). Rewrite the file and the image "moves". No
            file: runs record nothing (the sandbox is this machine, not Kaggle's image).
        max_page_size: the most items one answer of a list call holds, whatever ``pageSize`` the request asks
            (Kaggle pages every list, and the client caps ``pageSize`` at 100); a small one makes every list span
            several pages, so a client that reads only the first page is caught. None: the request's size.
    """

    dataset_ready_seconds: float = 1.0
    dataset_ready_polls: int = 0
    commit_timeout_seconds: float = 12 * 3600
    rerun_timeout_seconds: float | None = None
    workers: int = 1
    max_body_bytes: int = 64 << 20
    max_upload_bytes: int = 200 << 30
    request_timeout_seconds: float = 60.0
    machine_shapes: tuple[str, ...] | None = None
    internet_folders: tuple[Path, ...] = ()
    honour_pins: bool = False
    image: Path | None = None
    max_page_size: int | None = None
