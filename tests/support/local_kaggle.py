"""The local Kaggle server's own tests: a fast fake runner, tiny competitions and notebooks, clients.

``FakeRunner`` stands in at the server's ``KernelRunner`` seam: it lays out ``input/`` with symlinks,
runs the notebook's code cells as one plain ``python`` process (no Jupyter, ~50 ms) with
``KKB_KAGGLE_ROOT`` and, for a rerun, ``KAGGLE_IS_COMPETITION_RERUN`` set, and judges like Kaggle on
the few points the tests need. The real sandbox is exercised in ``test_local_kaggle_e2e.py``.

Fixtures: ``fake_runner``, ``kaggle_server`` (a server on a free loopback port with the users alice and
bob, whose kernels ``fake_runner`` runs) and ``api`` (the real ``KaggleApi`` signed in as alice).
Tests that use them talk over loopback and carry the ``loopback`` marker.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import pytest
from slugify import slugify

from builder.local_kaggle import InstantRunner, Judgement, LocalKaggle, RunRequest, RunResult, ServerSettings, shim_dir
from builder.local_kaggle.admin import AdminClient
from builder.remote.kaggle_api import connect
from tests.support.files import build_file_tree

USER, KEY = "alice", "alice-key-0123"
OTHER, OTHER_KEY = "bob", "bob-key-4567"
COMPETITION = "tiny-parity"
#: A new dataset version is ready at once: tests that want it not ready yet pass their own settings.
INSTANT_DATASETS = ServerSettings(dataset_ready_seconds=0.0, dataset_ready_polls=0)


# -- the fake runner -------------------------------------------------------------------------


@dataclass
class FakeRunner:
    """Runs a notebook's code cells (a script as it is) as one plain ``python`` process and records every request it got."""

    calls: list[RunRequest] = field(default_factory=list)
    crash: bool = False   # raise a BaseException: the worker dies mid-run, as in a server crash

    def run(self, request: RunRequest) -> RunResult:
        self.calls.append(request)
        if self.crash:
            raise ServerCrash("simulated crash during a kernel run")
        root = request.root
        working = root / "working"
        working.mkdir(parents=True)
        for mount in request.mounts:
            target = root / "input" / mount.target
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(mount.source, target_is_directory=True)
        script = root / "kernel.py"
        if request.kernel_type == "script":
            shutil.copyfile(request.notebook, script)
        else:
            nb = nbformat.read(str(request.notebook), as_version=4)
            script.write_text("\n".join(c.source for c in nb.cells if c.cell_type == "code"), encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", ""), "KKB_KAGGLE_ROOT": str(root), "HOME": str(root)}
        if request.rerun:
            env["KAGGLE_IS_COMPETITION_RERUN"] = "1"
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, str(script)], cwd=working, env=env, capture_output=True,
                                  text=True, timeout=request.timeout_seconds)
        except subprocess.TimeoutExpired:
            return RunResult(ok=False, timed_out=True, working_dir=working, failure="Notebook Timeout",
                             log=[{"stream_name": "stderr", "time": request.timeout_seconds or 0.0, "data": "timeout\n"}])
        elapsed = time.monotonic() - started
        log = [{"stream_name": name, "time": round(elapsed, 3), "data": text}
               for name, text in (("stdout", done.stdout), ("stderr", done.stderr)) if text]
        ok = done.returncode == 0
        failure = None if ok else (done.stderr.strip().splitlines() or ["failed"])[-1]
        return RunResult(ok=ok, timed_out=False, working_dir=working, log=log, failure=failure)

    def judge(self, result: RunResult, *, kernel_type: str, submission_file: Path, sample_submission: Path,
              id_column: str, target_columns: Sequence[str], machine_shape: str | None = None,
              column_types: dict[str, str] | None = None) -> Judgement:
        if result.timed_out:
            return Judgement("Notebook Timeout")
        if not submission_file.is_file():
            return Judgement("Submission CSV Not Found")
        with submission_file.open() as got, sample_submission.open() as want:
            rows, sample = list(csv.reader(got)), list(csv.reader(want))
        if rows[:1] != sample[:1] or len(rows) != len(sample):
            return Judgement("Submission Scoring Error", "rows or columns differ from the sample submission")
        return Judgement("OK")


class ServerCrash(BaseException):
    """Not an Exception: it passes every ``except Exception`` like a process dying would."""


# -- servers and clients ---------------------------------------------------------------------


def start_server(data_dir: Path, runner: Any = None, settings: ServerSettings = INSTANT_DATASETS, users: bool = True) -> LocalKaggle:
    """A started local Kaggle on a free loopback port (a ``FakeRunner`` unless told), with alice and bob unless ``users`` is off."""
    server = LocalKaggle(data_dir, port=0, settings=settings, runner=runner or FakeRunner()).start()
    if users:
        server.add_user(USER, KEY, token="alice-token-0001")
        server.add_user(OTHER, OTHER_KEY)
    return server


def admin_client(server: LocalKaggle) -> AdminClient:
    """``/_admin/faults`` with the token the server wrote into its data folder (as kkb's tools read it)."""
    return AdminClient(server.base_url, server.store.root)


def connect_as(monkeypatch: Any, base_url: str, user: str = USER, key: str = KEY) -> Any:
    """The real in-process ``KaggleApi`` (through kkb's adapter module) authenticated as ``user``."""
    monkeypatch.setenv("KAGGLE_USERNAME", user)
    monkeypatch.setenv("KAGGLE_KEY", key)
    return connect(base_url)


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy and return that; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(interval)


def kernel_status(api: Any, kernel: str) -> str:
    """The status name (QUEUED, RUNNING, COMPLETE, ERROR ...) of ``kernel``'s latest version."""
    return api.kernels_status(kernel).status.name


def wait_kernel(api: Any, kernel: str, timeout: float = 30.0) -> Any:
    """The status response of ``kernel`` once its run has ended (COMPLETE or ERROR)."""
    return wait_for(lambda: api.kernels_status(kernel) if kernel_status(api, kernel) in ("COMPLETE", "ERROR") else None,
                    timeout)


def wait_submission(api: Any, ref: int, timeout: float = 30.0) -> Any:
    """Submission ``ref`` once it is no longer PENDING."""
    return wait_for(lambda: (s := api.get_submission(ref)) and s.status.name != "PENDING" and s, timeout)


def kaggle_cli(args: Sequence[str], base_url: str, home: Path, user: str = USER, key: str | None = KEY,
               token: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``kaggle`` command against ``base_url`` through the sitecustomize shim.

    TMPDIR is one per server (``home/tmp/<host>-<port>``): the client keeps resumable-upload state
    there, keyed by file path only, and would resume against a server that is gone.
    """
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / "tmp" / re.sub(r"[^A-Za-z0-9.]+", "-", base_url.split("://", 1)[-1]).strip("-")
    tmp.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KAGGLE_CONFIG_DIR": str(home / ".kaggle"),
           "TMPDIR": str(tmp), "PYTHONPATH": str(shim_dir()), "KKB_KAGGLE_API": base_url}
    if key is not None:
        env.update(KAGGLE_USERNAME=user, KAGGLE_KEY=key)
    if token is not None:
        env["KAGGLE_API_TOKEN"] = token
    kaggle = Path(sys.executable).with_name("kaggle")
    return subprocess.run([str(kaggle), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


# -- tiny competitions, datasets and kernels -------------------------------------------------

#: The notebook of the tiny-parity competition: predicts ``x % 2`` for every row of the public (or, in a rerun, hidden) test.
PARITY_NOTEBOOK = """
import csv, os
root = os.environ.get("KKB_KAGGLE_ROOT", "/kaggle")
data = os.path.join(root, "input", "competitions", "tiny-parity")
rows = list(csv.DictReader(open(os.path.join(data, "test.csv"))))
print("rows:", len(rows), "rerun:", "KAGGLE_IS_COMPETITION_RERUN" in os.environ)
with open("submission.csv", "w", newline="") as out:
    writer = csv.writer(out)
    writer.writerow(["id", "label"])
    for row in rows:
        writer.writerow([row["id"], int(row["x"]) % 2])
"""


def make_competition(root: Path, slug: str = COMPETITION, metric: str = "accuracy", limit: int = 5,
                     extra: dict[str, str] | None = None) -> Path:
    """A competition whose answer is ``x % 2``: 3 public test rows, 4 hidden ones."""
    public = [(1, 3), (2, 4), (3, 7)]
    hidden = [(10, 5), (11, 8), (12, 9), (13, 2)]

    def table(rows: list[tuple[int, int]], header: str, value: Any) -> str:
        return header + "\n" + "".join(f"{i},{value(x)}\n" for i, x in rows)

    files: dict[str, str | bytes] = {
        "competition.toml": (f'slug = "{slug}"\ntitle = "Tiny Parity"\nmetric = "{metric}"\nid_column = "id"\n'
                             f'target_columns = ["label"]\ndaily_submission_limit = {limit}\ntime_limit_hours = 1\n'),
        "public/test.csv": table(public, "id,x", lambda x: x),
        "public/sample_submission.csv": table(public, "id,label", lambda x: 0),
        "hidden/test.csv": table(hidden, "id,x", lambda x: x),
        "hidden/sample_submission.csv": table(hidden, "id,label", lambda x: 0),
        "answers.csv": table(hidden, "id,label", lambda x: x % 2),
        **(extra or {}),
    }
    return build_file_tree(root, files)


def notebook_json(*sources: str) -> str:
    """An .ipynb text with one code cell per source and the python3 kernelspec."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(nb)


def make_kernel(folder: Path, title: str = "Parity Kernel", kernel_id: str | None = None, code: str = PARITY_NOTEBOOK,
                competitions: Sequence[str] = (COMPETITION,), datasets: Sequence[str] = (),
                internet: bool = False, owner: str = USER) -> Path:
    """A kernel folder (kernel-metadata.json and kernel.ipynb) ready for ``kernels_push``; the id comes from the title."""
    metadata = {
        "id": kernel_id or f"{owner}/{slugify(title)}", "title": title, "code_file": "kernel.ipynb",
        "language": "python", "kernel_type": "notebook", "is_private": True, "enable_gpu": False,
        "enable_internet": internet, "dataset_sources": list(datasets), "competition_sources": list(competitions),
        "kernel_sources": [],
    }
    return build_file_tree(folder, {"kernel-metadata.json": json.dumps(metadata), "kernel.ipynb": notebook_json(code)})


def make_dataset(folder: Path, slug: str = "tiny-numbers", title: str = "Tiny Numbers", files: dict[str, str | bytes] | None = None,
                 owner: str = USER) -> Path:
    """A dataset folder (dataset-metadata.json and ``files``, a small CSV by default) ready for ``dataset_create_new``."""
    metadata = {"id": f"{owner}/{slug}", "title": title, "licenses": [{"name": "CC0-1.0"}]}
    return build_file_tree(folder, {"dataset-metadata.json": json.dumps(metadata),
                                    **(files or {"numbers.csv": "n\n1\n2\n3\n"})})


GATE_SECONDS = 300


@dataclass
class GatedRunner(FakeRunner):
    """A FakeRunner that waits for ``gate`` before running, to observe QUEUED and RUNNING."""

    gate: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)

    def run(self, request: RunRequest) -> RunResult:
        self.started.set()
        # Longer than any test waits for what it observes (a `kkb submit` subprocess reaching its first status poll
        # took over 30 s under the suite's load, and the run went on without the gate); every test sets the gate.
        self.gate.wait(GATE_SECONDS)
        return super().run(request)


@dataclass
class SlugGates(FakeRunner):
    """A FakeRunner whose kernels with a gate (by slug) wait for it: RUNNING, and billing, until the test opens it."""

    gates: dict[str, threading.Event] = field(default_factory=dict)
    # slugs whose runs succeed at once, executing nothing: they leave the mounted competition's sample submission
    instant: set[str] = field(default_factory=set)

    def run(self, request: RunRequest) -> RunResult:
        slug = request.notebook.parts[-4]  # kernels/<owner>/<slug>/versions/<n>/source.ipynb
        if slug in self.gates:
            self.gates[slug].wait(GATE_SECONDS)
        if slug not in self.instant:
            return super().run(request)
        result = InstantRunner().run(request)
        for sample in (Path(mount.source) / "sample_submission.csv" for mount in request.mounts):
            if sample.is_file():
                shutil.copyfile(sample, result.working_dir / "submission.csv")
        return result

    def open_all(self) -> None:
        for gate in self.gates.values():
            gate.set()


# -- fixtures (registered by tests/conftest.py) ---------------------------------------------


@pytest.fixture
def fake_runner() -> FakeRunner:
    """The runner of ``kaggle_server``: a test reads ``fake_runner.calls`` to see what the server asked it to run."""
    return FakeRunner()


@pytest.fixture
def kaggle_server(tmp_path: Path, fake_runner: FakeRunner) -> Iterator[LocalKaggle]:
    """A local Kaggle on a free loopback port, users alice and bob, kernels run by ``fake_runner``."""
    with start_server(tmp_path / "kaggle-data", runner=fake_runner) as srv:
        yield srv


@pytest.fixture
def api(kaggle_server: LocalKaggle, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The real ``KaggleApi`` signed in as alice against ``kaggle_server``."""
    return connect_as(monkeypatch, kaggle_server.base_url)
