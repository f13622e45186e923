"""Golden files in ``tests/golden/``: compared by default, rewritten only with ``pytest --update-golden``."""

from __future__ import annotations

import re

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current render instead of comparing")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when the run was asked to rewrite the golden files instead of comparing with them."""
    return bool(request.config.getoption("--update-golden"))


def normalize_provenance(text: str) -> str:
    """A rendered notebook with its content hashes and git commit replaced: what a golden file compares."""
    text = re.sub(r"sha256:[0-9a-f]{64}", "sha256:<hash>", text)
    return re.sub(r"(project commit `|\"git_commit\": \")[^`\"]+", r"\1<commit>", text)
