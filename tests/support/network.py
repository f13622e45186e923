"""No network in tests unless a test says so, and then loopback only.

pytest-socket does the guarding: ``--disable-socket`` (pyproject's addopts) makes creating a socket in
the test process fail. A test, class or module marked ``@pytest.mark.loopback`` gets pytest-socket's
``allow_hosts`` marker with the loopback addresses instead: it may open sockets, but connect only to
127.0.0.1, ::1 or localhost. That is what the local Kaggle (HTTP), the evaluation API's gateway and a
notebook run need: a Jupyter kernel in the portable sandbox talks TCP on 127.0.0.1 (the namespace sandbox
uses unix sockets, but a machine without namespaces falls back to the portable one, so every test that
executes a notebook is marked). Unix sockets are allowed everywhere (``--allow-unix-socket``): asyncio's
event loop needs a socketpair.

The guard patches this process only: a subprocess (pip, the sandboxed kernel, the ``kaggle`` command)
is not guarded by it; those keep off the network by their own means (``--no-index``, the sandbox).
"""

from __future__ import annotations

import pytest

#: Where a ``loopback`` test may connect; ``localhost`` is resolved once by pytest-socket.
LOOPBACK_HOSTS = ["127.0.0.1", "::1", "localhost"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Translate ``loopback`` into pytest-socket's ``allow_hosts``, which pytest-socket reads at each test's setup."""
    for item in items:
        if item.get_closest_marker("loopback") is not None:
            item.add_marker(pytest.mark.allow_hosts(LOOPBACK_HOSTS))
