"""The suite's plugins: shared fixtures and hooks live in ``tests/support/`` (see its ``__init__``), not here.

Every test runs without the developer's Kaggle credentials or temp dir (``isolation``) and without
sockets unless it carries the ``loopback`` marker (``network``).
"""

pytest_plugins = [
    "tests.support.assets",
    "tests.support.isolation",
    "tests.support.golden",
    "tests.support.network",
    "tests.support.local_kaggle",
    "tests.support.wheels",
]
