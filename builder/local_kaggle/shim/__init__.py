"""A ``sitecustomize`` that points the ``kaggle`` *command* at ``$KKB_KAGGLE_API``.

The CLI always builds its client for PROD (``https://api.kaggle.com``) unless ``--local``; an
in-process caller can override ``build_kaggle_client``, a subprocess cannot. Put :func:`shim_dir`
first on ``PYTHONPATH`` and set ``KKB_KAGGLE_API=http://127.0.0.1:PORT``: every ``kaggle`` process then
talks to that server and nothing else. Without ``KKB_KAGGLE_API`` the shim does nothing.
"""

from __future__ import annotations

from pathlib import Path


def shim_dir() -> Path:
    """The folder to prepend to ``PYTHONPATH`` (it holds ``sitecustomize.py``)."""
    return Path(__file__).resolve().parent
