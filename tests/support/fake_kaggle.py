"""``FakeKaggle``: an in-memory Kaggle at the adapter seam, for push/submit tests that need no HTTP.

It keeps datasets, kernel versions, runs and submissions in memory and exposes the same methods as
:class:`builder.remote.kaggle_api.KaggleAdapter`. It lets each test script server behaviour that is
awkward over HTTP: a call that succeeds on the server but fails on the way back, a push interrupted
between Kaggle acting and kkb recording it. The wire itself is covered in ``test_push_e2e.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from builder.remote.kaggle_api import (
    KernelInfo,
    KernelPushed,
    KernelStatus,
    Quota,
    Submission,
    SubmissionLimits,
    TransientRemoteError,
)
from builder.remote.session import Waits

#: Waits for a FakeKaggle: it never sleeps for real (``sleep`` records), so the timeouts only bound loops.
FAKE_WAITS = Waits(poll_initial_s=0.01, poll_max_s=0.02, dataset_timeout_s=5, run_timeout_s=5, scoring_timeout_s=5)


@dataclass
class FakeKaggle:
    """In-memory Kaggle at the adapter seam. Counts uploaded bytes like the real adapter."""

    username: str = "kkb-demo"
    endpoint: str | None = None  # kaggle.com
    datasets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    kernels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    submissions_made: list[Submission] = field(default_factory=list)
    uploaded_bytes: int = 0
    not_ready_polls: int = 0
    fail_after_acting: set[str] = field(default_factory=set)  # "dataset", "kernel", "submit"
    run_status: str = "complete"
    run_log: list[dict[str, Any]] = field(default_factory=list)
    run_output: dict[str, str] = field(default_factory=dict)  # the run's output files (kernel_output)
    score: tuple[str, str, str] = ("complete", "0.875", "")
    calls: list[str] = field(default_factory=list)
    submissions_left: int = 5  # today's, for the team (GetSubmissionLimits)
    on_retry: Any = None
    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def web_url(self, path: str) -> str:
        return f"http://fake/{path}"

    # datasets
    def dataset_status(self, ref: str) -> str | None:
        versions = self.datasets.get(ref)
        if not versions:
            return None
        latest = versions[-1]
        if latest["polls"] > 0:
            latest["polls"] -= 1
            return "blobs_received"
        return "ready"

    def dataset_version(self, ref: str) -> int | None:
        return len(self.datasets[ref]) if self.datasets.get(ref) else None

    def dataset_file(self, ref: str, name: str) -> bytes | None:
        ready = [v for v in self.datasets.get(ref, []) if v["polls"] == 0]
        return json.dumps({"content_hash": ready[-1]["hash"]}).encode() if ready else None

    def _new_version(self, folder: Path, kind: str) -> None:
        manifest = json.loads((folder / "manifest.json").read_text())
        ref = json.loads((folder / "dataset-metadata.json").read_text())["id"]
        self.calls.append(f"{kind} {ref}")
        self.uploaded_bytes += sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        self.datasets.setdefault(ref, []).append({"hash": manifest["content_hash"], "polls": self.not_ready_polls})
        if "dataset" in self.fail_after_acting:
            self.fail_after_acting.discard("dataset")
            raise TransientRemoteError("Kaggle answered HTTP 500 while creating")

    def create_dataset(self, folder: Path) -> None:
        self._new_version(folder, "create")

    def version_dataset(self, folder: Path, notes: str) -> None:
        self._new_version(folder, "version")

    # kernels
    def kernel_version(self, kernel: str) -> int | None:
        return len(self.kernels[kernel]) if self.kernels.get(kernel) else None

    def push_kernel(self, folder: Path, *, timeout_seconds: int | None = None) -> KernelPushed:
        meta = json.loads((folder / "kernel-metadata.json").read_text())
        self.calls.append(f"kernel {meta['id']}")
        self.kernels.setdefault(meta["id"], []).append({**meta, "source": (folder / meta["code_file"]).read_text()})
        if "kernel" in self.fail_after_acting:
            self.fail_after_acting.discard("kernel")
            raise TransientRemoteError("Kaggle answered HTTP 502 while pushing the kernel")
        version = len(self.kernels[meta["id"]])
        return KernelPushed(ref=f"/code/{meta['id']}", url=f"http://fake/code/{meta['id']}", version=version)

    def kernel_source(self, kernel: str) -> str | None:
        versions = self.kernels.get(kernel)
        return versions[-1].get("source") if versions else None

    def kernel_status(self, kernel: str, version: int | None = None) -> KernelStatus:
        return KernelStatus(self.run_status, "" if self.run_status == "complete" else "Notebook failed")

    def kernel_log(self, kernel: str, version: int | None = None) -> list[dict[str, Any]]:
        return self.run_log

    def kernel_output(self, kernel: str, version: int | None, dest: Path, file_pattern: str | None = None) -> list[Path]:
        """The run's output files written into ``dest`` (``self.run_output``: name -> text; none by default)."""
        written = []
        for name, text in self.run_output.items():
            if file_pattern is not None and not re.search(file_pattern, name):
                continue
            (dest / name).write_text(text)
            written.append(dest / name)
        return written

    # competitions
    def submit_code(self, competition: str, kernel: str, version: int, file_name: str, message: str) -> tuple[int, str]:
        self.calls.append(f"submit {kernel} v{version}")
        state, score, error = self.score
        item = Submission(len(self.submissions_made) + 1, state, score, "", error, message, "")
        self.submissions_made.append(item)
        if "submit" in self.fail_after_acting:
            self.fail_after_acting.discard("submit")
            raise TransientRemoteError("connection dropped")
        return item.ref, "Successfully submitted"

    def submission_limits(self, competition: str) -> SubmissionLimits:
        return SubmissionLimits(len(self.submissions_made), self.submissions_left, len(self.submissions_made), False)

    # the account: a CPU kernel's push asks nothing of it
    def quota(self) -> Quota:
        return Quota(gpu=None, tpu=None, refresh=None)

    def my_kernels(self, limit: int = 50, run_since: datetime | None = None) -> list[KernelInfo]:
        return []

    def delete_kernel(self, kernel: str) -> None:
        self.calls.append(f"delete {kernel}")
        self.kernels.pop(kernel, None)

    def submission(self, ref: int) -> Submission:
        return self.submissions_made[ref - 1]

    def submissions(self, competition: str) -> list[Submission]:
        return list(self.submissions_made)
