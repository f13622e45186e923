"""kkb's local Kaggle as the push, submit and wheels tests meet it: the user ``kkb-demo`` signed in.

The real ``kaggle`` client talks to it over loopback HTTP (tests that use it carry the ``loopback``
marker). ``serve_local_kaggle`` is a generator for a module's own fixture, which picks the kernel runner
(``InstantRunner`` to test pushing, ``None`` for the real sandbox) and the competition.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.local_kaggle import KernelRunner, LocalKaggle, ServerSettings
from builder.remote.backoff import Backoff
from builder.remote.kaggle_api import KaggleAdapter
from builder.remote.session import Waits
from tests.support.files import KERNELS

DEMO_USER, DEMO_KEY = "kkb-demo", "local-test-key-0123456789"

#: Waits for a local Kaggle on loopback: short polls, timeouts that bound a real sandbox run.
LOOPBACK_WAITS = Waits(poll_initial_s=0.05, poll_max_s=0.3, dataset_timeout_s=30, run_timeout_s=60, scoring_timeout_s=60)


def serve_local_kaggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: KernelRunner | None,
                       competition: Path = KERNELS / "minimal" / "data" / "competition",
                       internet: tuple[Path, ...] = (), ready_polls: int = 0, workers: int = 1,
                       image: Path | None = None, max_page_size: int | None = None) -> Iterator[LocalKaggle]:
    """A local Kaggle with the test user signed in (env) and ``competition`` registered; ``internet``: the folders
    an internet-on kernel may read (a local package index); ``ready_polls``: status polls a new version answers
    "not ready" first (a push must wait for it); ``workers``: kernel runs at once; ``image``: the description file
    of the image its runs declare; ``max_page_size``: the most items a list answer holds (more pages)."""
    settings = ServerSettings(dataset_ready_seconds=0.0, dataset_ready_polls=ready_polls, internet_folders=internet,
                              workers=workers, image=image, max_page_size=max_page_size)
    with LocalKaggle(tmp_path / "kaggle", port=0, settings=settings, runner=runner) as local:
        local.add_user(DEMO_USER, DEMO_KEY)
        local.add_competition(competition)
        monkeypatch.setenv("KAGGLE_USERNAME", DEMO_USER)
        monkeypatch.setenv("KAGGLE_KEY", DEMO_KEY)
        monkeypatch.setenv("KKB_KAGGLE_API", local.base_url)
        yield local


def demo_adapter(server: LocalKaggle) -> KaggleAdapter:
    """kkb's adapter signed in from the environment, retrying fast: faults injected on the server recover in ms."""
    return KaggleAdapter.connect(server.base_url, retry=Backoff(attempts=5, base_seconds=0.02, max_seconds=0.1))
