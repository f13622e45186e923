"""Bench 1: bytes uploaded by `kkb push` against the plain `kaggle datasets version` path, on the local Kaggle.

One local Kaggle (loopback, throwaway user), one generated project with a realistic weights folder.
After a first push (which creates both datasets and the kernel), each repetition measures, side by side:

* ``kkb push`` with nothing changed (target: 0 bytes);
* ``kkb push`` after a change to one code file (target: the code dataset alone, weights untouched);
* the plain client path for the same built folders: ``dataset_create_version(folder, dir_mode="tar")``
  on the weights folder and on the code folder, i.e. what ``kaggle datasets version -p build/NAME/<x>
  --dir-mode tar`` does (everything again). The real ``kaggle`` client, through ``builder.remote.kaggle_api.connect``.

Bytes are counted at the server: the size of every blob it received (``<data>/blobs/*/data``), new
since the call began, and cross-checked with push's own count (``PushResult.uploaded_bytes``).
Kernel runs on the server are instant (a stub runner): this bench is about uploads, not runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.bundle import make_project
from bench.common import Row
from builder.local_kaggle import InstantRunner, LocalKaggle, ServerSettings
from builder.remote.kaggle_api import client_output, connect
from builder.remote.push import PushResult, push
from builder.remote.session import PushSettings, Waits

REPO = Path(__file__).resolve().parent.parent
COMPETITION = REPO / "kernels" / "minimal" / "data" / "competition"  # a tiny competition the kernel can name
USER = "bench"
MB = 1e6

# Polls against a loopback server: short, so the timings show work rather than sleeps.
WAITS = Waits(poll_initial_s=0.05, poll_max_s=0.5, dataset_timeout_s=600, run_timeout_s=600, scoring_timeout_s=600)


@contextlib.contextmanager
def _credentials(home: Path, base_url: str, key: str) -> Iterator[None]:
    """Throwaway credentials for this process only; the developer's own KAGGLE_* are hidden meanwhile."""
    saved = {name: value for name, value in os.environ.items() if name.startswith(("KAGGLE_", "KKB_KAGGLE"))}
    for name in saved:
        del os.environ[name]
    config = home / ".kaggle"
    config.mkdir(parents=True, exist_ok=True)
    os.environ.update(KAGGLE_USERNAME=USER, KAGGLE_KEY=key, KAGGLE_CONFIG_DIR=str(config), KKB_KAGGLE_API=base_url)
    try:
        yield
    finally:
        for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_CONFIG_DIR", "KKB_KAGGLE_API"):
            os.environ.pop(name, None)
        os.environ.update(saved)


def received_bytes(server: LocalKaggle) -> dict[str, int]:
    """Every blob the server holds: token → bytes received (uploads are never deleted by the server)."""
    blobs = {}
    for meta_path in (server.store.root / "blobs").glob("*/blob.json"):
        meta = json.loads(meta_path.read_text())
        if meta.get("type") == "DATASET":
            blobs[meta_path.parent.name] = (meta_path.parent / "data").stat().st_size
    return blobs


def _new_bytes(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(size - before.get(token, 0) for token, size in after.items())


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def run(total_mb: int = 2048, files: int = 4, repeat: int = 3) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="kkb-bench-push-") as tmp:
        root = Path(tmp)
        kernel = make_project(root, total_mb, files, title="KKB Bench Push", competition="kkb-minimal")
        key = secrets.token_hex(16)
        settings = ServerSettings(dataset_ready_seconds=0.0)
        with LocalKaggle(root / "kaggle", port=0, settings=settings, runner=InstantRunner()) as server, \
                _credentials(root / "home", server.base_url, key):
            server.add_user(USER, key)
            server.add_competition(COMPETITION)
            return _measure(server, kernel, root / "build", total_mb, files, repeat)


def _measure(server: LocalKaggle, kernel: Path, out: Path, total_mb: int, files: int, repeat: int) -> list[Row]:
    def kkb_push() -> tuple[PushResult, int, float]:
        before = received_bytes(server)
        started = time.perf_counter()
        result = push(PushSettings(kernel_dir=kernel, out_dir=out, base_url=server.base_url, waits=WAITS))
        elapsed = time.perf_counter() - started
        return result, _new_bytes(before, received_bytes(server)), elapsed

    def plain_version(folder: Path) -> tuple[int, float]:
        """What `kaggle datasets version -p FOLDER --dir-mode tar` uploads: the real client, in process."""
        before = received_bytes(server)
        started = time.perf_counter()
        api = connect(server.base_url)
        with client_output("bench: plain dataset version"):
            response = api.dataset_create_version(str(folder), "plain kaggle datasets version", quiet=True, dir_mode="tar")
        elapsed = time.perf_counter() - started
        if getattr(response, "error", None):
            raise RuntimeError(f"the plain client's version of {folder} was refused: {response.error}")
        return _new_bytes(before, received_bytes(server)), elapsed

    first, first_bytes, first_s = kkb_push()
    assert first.weights is not None
    samples: dict[str, list[float]] = {name: [] for name in (
        "noop_bytes", "noop_s", "noop_reported", "code_bytes", "code_s", "code_reported",
        "plain_weights_bytes", "plain_code_bytes", "plain_s", "plain_code_s")}
    actions: dict[str, set[str]] = {"noop": set(), "code": set()}
    for index in range(repeat):
        noop, noop_bytes, noop_s = kkb_push()
        actions["noop"].add(f"weights {noop.weights.action if noop.weights else '-'}, code {noop.code.action}, "
                            f"kernel {noop.kernel_action}")
        predict = kernel / "predict.py"
        predict.write_text(predict.read_text() + f"# bench edit {index} {time.time_ns()}\n")
        code, code_bytes, code_s = kkb_push()
        actions["code"].add(f"weights {code.weights.action if code.weights else '-'}, code {code.code.action}, "
                            f"kernel {code.kernel_action}")
        plain_w_bytes, plain_w_s = plain_version(first.out_dir / "weights")
        plain_c_bytes, plain_c_s = plain_version(first.out_dir / "code")
        for name, value in (("noop_bytes", noop_bytes), ("noop_s", noop_s), ("noop_reported", noop.uploaded_bytes),
                            ("code_bytes", code_bytes), ("code_s", code_s), ("code_reported", code.uploaded_bytes),
                            ("plain_weights_bytes", plain_w_bytes), ("plain_code_bytes", plain_c_bytes),
                            ("plain_s", plain_w_s + plain_c_s), ("plain_code_s", plain_c_s)):
            samples[name].append(value)
    med = {name: statistics.median(values) for name, values in samples.items()}
    plain_bytes = med["plain_weights_bytes"] + med["plain_code_bytes"]
    detail = {"total_mb": total_mb, "files": files, "repeat": repeat, "server": "local Kaggle (loopback)",
              "weights_folder_bytes": folder_bytes(first.out_dir / "weights"),
              "code_folder_bytes": folder_bytes(first.out_dir / "code"),
              "first_push_bytes": first_bytes, "first_push_s": round(first_s, 3),
              "plain_weights_bytes": med["plain_weights_bytes"], "plain_code_bytes": med["plain_code_bytes"],
              "samples": samples}
    rows = [
        Row("incremental push", "nothing changed: uploaded", med["noop_bytes"] / MB, "MB",
            "kaggle datasets version", plain_bytes / MB, med["noop_bytes"] / plain_bytes, "0 bytes",
            detail | {"push_reported_bytes": med["noop_reported"], "actions": sorted(actions["noop"])}),
        Row("incremental push", "code changed: uploaded", med["code_bytes"] / MB, "MB",
            "kaggle datasets version", plain_bytes / MB, med["code_bytes"] / plain_bytes, "code dataset alone",
            detail | {"push_reported_bytes": med["code_reported"], "actions": sorted(actions["code"])}),
        Row("incremental push", "code changed: uploaded vs code alone", med["code_bytes"] / MB, "MB",
            "code dataset, plain", med["plain_code_bytes"] / MB, med["code_bytes"] / med["plain_code_bytes"],
            "1.00x (weights untouched)", {"repeat": repeat}),
        Row("incremental push", "nothing changed: wall time", med["noop_s"], "s",
            "kaggle datasets version", med["plain_s"], med["noop_s"] / med["plain_s"], "", {"repeat": repeat}),
        Row("incremental push", "code changed: wall time", med["code_s"], "s",
            "kaggle datasets version", med["plain_s"], med["code_s"] / med["plain_s"], "",
            {"repeat": repeat, "plain_code_only_s": med["plain_code_s"]}),
    ]
    return rows


QUICK = {"total_mb": 16, "files": 4, "repeat": 1}
