"""``kkb init --competition SLUG`` without ``--data``: the competition's public files, through the client.

Downloaded with the user's credentials (Kaggle answers 403 until the competition's rules are
accepted) into ``<kernel folder>/data/<slug>``, where the generated ``kernel.toml`` points.
"""

from __future__ import annotations

from pathlib import Path

from builder.errors import RemoteError
from builder.project.init import check_competition_slug
from builder.remote.kaggle_api import KaggleAdapter

DATA_DIR = "data"


def competition_data_dir(kernel_dir: Path, competition: str) -> Path:
    return Path(kernel_dir) / DATA_DIR / competition


def fetch_competition_data(kernel_dir: Path, competition: str, adapter: KaggleAdapter | None = None,
                           base_url: str | None = None) -> Path:
    """Download and unpack the competition's files; returns the folder they are in."""
    check_competition_slug(competition)  # it names a folder: '../x' or '/x' would land outside the project
    folder = competition_data_dir(kernel_dir, competition)
    if folder.is_dir() and any(folder.iterdir()):
        return folder  # already downloaded (a second kkb init after a refused first one)
    adapter = adapter or KaggleAdapter.connect(base_url)
    try:
        return adapter.download_competition(competition, folder)
    except RemoteError as exc:
        raise type(exc)(exc.message, hint=f"{exc.hint + '; ' if exc.hint else ''}or download the data yourself "
                                           "(kaggle competitions download) and pass --data DIR") from exc
